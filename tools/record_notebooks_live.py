#!/usr/bin/env python3
"""Run every notebook live on this GPU under nbval and record what ran: results/<gpu>/notebooks_live.json.

    python tools/record_notebooks_live.py --out results/h200/notebooks_live.json [--timeout 300]

A check, not a benchmark: nbval's lax mode (a cell passes when it runs without an error; its asserts are the
checks), a cold or warm Triton cache as found, wall clock per notebook from pytest's JUnit report. Nothing is
written unless every cell ran on a GPU: a run with a failed cell, or without a CUDA device, prints what failed and
exits non-zero (a record says what ran, not what was meant to).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_notebook(junit: Path) -> dict[str, list]:
    """{notebook: [cells passed, cells failed, seconds]} from pytest's JUnit XML."""
    out = defaultdict(lambda: [0, 0, 0.0])
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "")           # e.g. "notebooks.A1-triton-extras.ipynb"
        nb = name.removeprefix("notebooks.").removesuffix(".ipynb") or "?"
        row = out[nb]
        failed = any(child.tag in ("failure", "error") for child in case)
        row[1 if failed else 0] += 1
        row[2] += float(case.get("time", 0))
    return dict(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the result file, e.g. results/h200/notebooks_live.json")
    ap.add_argument("--timeout", type=int, default=300, help="seconds for the whole run (default 300)")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("record_notebooks_live: no CUDA device; nothing recorded (this records live runs only)")
        return 2
    from multicta_kernels.results import store
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env",
           "notebooks/"]
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        print(f"running every notebook live (up to {args.timeout} s) ...", flush=True)
        start = time.time()
        lines = []
        proc = subprocess.Popen(cmd + ["-v", f"--junitxml={junit}"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:                       # streamed: a run cut off by a limit still shows how far
            lines.append(line.rstrip())
            if "PASSED" in line or "FAILED" in line or "ERROR" in line or " passed" in line:
                print(line.rstrip(), flush=True)
            if time.time() - start > args.timeout:
                proc.kill()
                print(f"record_notebooks_live: the run passed its {args.timeout} s limit; nothing recorded")
                return 1
        proc.wait()
        wall = time.time() - start
        summary = [ln for ln in lines if " passed" in ln or " failed" in ln][-1:]
        if proc.returncode != 0 or not junit.exists():
            print("\n".join(lines[-15:]))
            print(f"record_notebooks_live: pytest exit {proc.returncode}; nothing recorded")
            return 1
        rows = [[nb, *v[:2], round(v[2], 1)] for nb, v in sorted(per_notebook(junit).items())]
    result = {"benchmark": "notebooks-live", **store.environment(),
              "method": {"timer": "pytest's JUnit time per cell, summed per notebook (compiles included; a check, "
                                  "not a benchmark)",
                         "command": "python tools/record_notebooks_live.py --out " + args.out,
                         "what": "every cell of every notebook executed on the GPU, nbval's lax mode: a cell passes "
                                 "when it runs without error (its asserts are the checks)",
                         "pytest_summary": summary[0].strip("= ") if summary else "",
                         "wall_s": round(wall, 1),
                         "commit": commit()},
              "ceilings": {}, "columns": ["notebook", "cells_passed", "cells_failed", "seconds"], "rows": rows}
    store.save(result, ROOT / args.out if not Path(args.out).is_absolute() else args.out)
    print(f"recorded {args.out}: {sum(r[1] for r in rows)} cells in {len(rows)} notebooks, {wall:.0f} s")
    return 0


def commit() -> str:
    """The commit the notebooks ran at: MULTICTA_COMMIT if set, else git's HEAD when the tracked files equal it. A
    copy whose files differ from its git metadata (the device tool sends the working tree, not the history) is
    "unknown: ...", never a commit it did not run."""
    if os.environ.get("MULTICTA_COMMIT"):
        return os.environ["MULTICTA_COMMIT"]
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)   # noqa: E731
    head = git("rev-parse", "--short", "HEAD").stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    if not head or dirty:
        return f"unknown: the tracked files differ from git's HEAD ({head or 'none'}); set MULTICTA_COMMIT"
    return head


if __name__ == "__main__":
    sys.exit(main())
