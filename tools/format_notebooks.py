#!/usr/bin/env python3
"""Fit every notebook code cell to the book's code column: at most WIDTH (87) characters a line, the width the
rendered book shows at 1440 px without a scroll bar (tools/browser_check.py measures it).

    python tools/format_notebooks.py                 # report the cells with a line over WIDTH; exit 1 if any
    python tools/format_notebooks.py --fix           # reformat those cells (black, then comments), in place
    python tools/format_notebooks.py --fix notebooks/02-mbarriers.ipynb

``--fix`` touches only cells that have a line over WIDTH (a cell that fits keeps its hand-made layout), and in
each: ``black`` with ``line-length = WIDTH`` and the strings' quotes left as they are (``pip install black``; the
book's environment does not carry it), then every trailing comment that still makes its line too long moves to
its own line above the code, and comment lines longer than WIDTH are wrapped. What is still too long after that
(a long string, a long name chain) it lists, to be fixed by hand. Outputs, metadata and cell ids are kept; the
notebooks stay without outputs. ``tests/test_notebook_format.py`` checks the width in CI.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from multicta_kernels.show.fit import (WIDTH, fit, fit_comments, fit_docstrings, fit_strings,  # noqa: E402
                                       long_lines)


def black_format(src: str, width: int = WIDTH) -> str:
    import black
    mode = black.Mode(line_length=width, string_normalization=False)
    try:
        return black.format_str(src, mode=mode).rstrip("\n")
    except Exception as err:                                  # noqa: BLE001 - report and keep the cell
        print(f"  black could not format a cell ({type(err).__name__}: {str(err)[:80]})", file=sys.stderr)
        return src


def fit_cell(src: str, width: int = WIDTH) -> str:
    if not long_lines(src, width):
        return src
    if "# CHANGED" in src:                 # a reader's copy of a package kernel: laid out as notebook.source shows it
        return fit(src, width)
    # long trailing comments first move above their lines (so black does not split code to make room for them)
    new = black_format(fit_comments(src, width), width)
    new = fit_comments(new, width)
    if long_lines(new, width):                               # black again: the moved comments free some room
        new = fit_comments(black_format(new, width), width)
    if long_lines(new, width):                               # long strings: cut at spaces, black lays them out
        new = black_format(fit_docstrings(fit_strings(new, width), width), width)
    return new


def _split_source(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def notebooks(paths) -> list[Path]:
    return [Path(p) for p in paths] if paths else sorted((ROOT / "notebooks").glob("*.ipynb"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="notebooks (default: notebooks/*.ipynb)")
    ap.add_argument("--fix", action="store_true", help="reformat the cells with a line over the width")
    ap.add_argument("--width", type=int, default=WIDTH)
    args = ap.parse_args(argv)
    left = 0
    for path in notebooks(args.paths):
        nb = json.loads(path.read_text())
        changed = False
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            if args.fix and long_lines(src, args.width):
                new = fit_cell(src, args.width)
                if new != src:
                    cell["source"] = _split_source(new)
                    changed = True
                    src = new
            for ln in long_lines(src, args.width):
                left += 1
                print(f"{path.name} cell {cell.get('id')}: {len(ln)} > {args.width}: {ln.strip()[:70]}")
        if changed:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    print(f"{left} code line(s) over {args.width} characters")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
