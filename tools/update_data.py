"""Write the recorded results the package needs at run time into package data, from results/:

    python tools/update_data.py            # rewrite multicta_kernels/data/*.json
    python tools/update_data.py --check    # exit 1 if they differ from what results/ holds now

Today one file: ``softmax_sweeps.json``, the sweeps (fp32, fp16, bf16) the softmax picker (``softmax.pick_config``) chooses
from, per GPU folder (results/<gpu>/softmax_sweep*.json: every configuration measured, with its provenance).
The package reads only this file, never results/, so an installed copy picks as the repository does.
tests/test_data.py checks that the data equals what this tool writes now.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from multicta_kernels.results import store  # noqa: E402
from multicta_kernels.softmax import SWEEPS, SWEEPS_DATA  # noqa: E402

DATA = ROOT / "multicta_kernels" / "data"


def softmax_sweeps(results: Path = store.RESULTS) -> dict:
    """{gpu folder: {"gpu", "date", "sources", "columns", "rows"}}: the sweeps of every GPU that recorded one, the
    rows of its sweep files in SWEEPS order (all with the first file's columns, and ``dtype``: a file without that
    column measured the one dtype its method names; ``exchange``: null where the file has no such column, measured
    with multicta_softmax's default; ``date``: the day its file was recorded)."""
    out = {}
    for folder in sorted(p for p in results.iterdir() if p.is_dir() and p.name != "reference"):
        found = [store.load(folder / name) for name in SWEEPS if (folder / name).exists()]
        if not found:
            continue
        columns = [c for c in found[0]["columns"] if c not in ("dtype", "exchange")] + ["dtype", "exchange", "date"]
        rows = [[rec.get("dtype", r["method"]["dtype"]) if c == "dtype" else r["date"] if c == "date"
                 else rec.get("exchange") if c == "exchange" else rec[c]       # no exchange column: the default's
                 for c in columns] for r in found for rec in store.records(r)]
        out[folder.name] = {"gpu": found[0]["gpu"], "date": found[0]["date"],
                            "sources": [f"results/{folder.name}/{n}" for n in SWEEPS if (folder / n).exists()],
                            "columns": columns, "rows": rows}
    return out


def files() -> dict:
    """{path: text} of every data file, as this tool writes it."""
    return {DATA / SWEEPS_DATA: json.dumps(softmax_sweeps(), indent=0, sort_keys=True) + "\n"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/update_data.py", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether the data is stale (exit status 1 if so)")
    args = ap.parse_args(argv)
    stale = [p for p, text in files().items() if not p.exists() or p.read_text() != text]
    if args.check:
        print("stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale) if stale else "current")
        return 1 if stale else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files()[p])
    print("updated: " + (", ".join(str(p.relative_to(ROOT)) for p in stale) or "nothing (already current)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
