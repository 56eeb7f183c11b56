"""Regenerate the hardware-status tables of README.md and book/workshop.md from results/*/doctor.json.

    python tools/update_docs.py            # rewrite the blocks between the generated markers
    python tools/update_docs.py --check    # exit 1 (and name the files) if a block is stale

The table itself is :func:`multicta_kernels.results.labels.status_table`; this tool is the only thing that
writes it into the documents (the package writes nothing outside results/).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from multicta_kernels.results.labels import render_docs  # noqa: E402

DOCS = ("README.md", "book/workshop.md")


def stale(root: Path = ROOT) -> list[str]:
    """The documents whose generated block differs from what the recorded results say now."""
    return [rel for rel in DOCS if (root / rel).exists() and render_docs((root / rel).read_text()) != (root / rel).read_text()]


def update_docs(root: Path = ROOT) -> list[str]:
    """Rewrite every stale document; return the ones changed."""
    changed = stale(root)
    for rel in changed:
        p = root / rel
        p.write_text(render_docs(p.read_text()))
    return changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/update_docs.py", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether a document is stale (exit status 1 if so)")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale()
        print("stale: " + ", ".join(bad) if bad else "current")
        return 1 if bad else 0
    print("updated: " + (", ".join(update_docs()) or "nothing (already current)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
