"""The results store: benchmark results recorded on real GPUs, ``results/<gpu>/<benchmark>.json``.

Every result carries its provenance (GPU, driver, versions, date: :func:`environment`), its method and
ceilings, and a table (``columns``, ``rows``). :func:`save` writes atomically and refuses a result without
provenance or with a number that is not finite; :func:`load` checks what it reads.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import tempfile
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]        # the repository: multicta_kernels/results/store.py
RESULTS = ROOT / "results"
REQUIRED = ("benchmark", "gpu", "date", "triton", "method", "ceilings", "columns", "rows")


# ---------------------------------------------------------------------------------- results store

def environment() -> dict:
    """The GPU, driver and versions a result is recorded with (needs a GPU: a result is a measurement)."""
    import torch
    import triton
    if not torch.cuda.is_available():
        from ..core.hardware import CUDA, require
        require(CUDA, "results.store.environment", instead="nothing is recorded without a GPU")
    props = torch.cuda.get_device_properties(0)
    try:
        import subprocess
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):  # pragma: no cover - no nvidia-smi on PATH
        driver = None
    return {"gpu": props.name, "capability": list(torch.cuda.get_device_capability()),
            "sms": props.multi_processor_count, "driver": driver, "cuda": torch.version.cuda,
            "triton": triton.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "date": datetime.date.today().isoformat()}


def validate(result: dict) -> dict:
    """Check a result's provenance and shape; return it unchanged. Third-party numbers
    (``"reference": true``, under results/reference/) must name their source instead."""
    need = ("benchmark", "gpu", "source", "columns", "rows") if result.get("reference") else REQUIRED
    missing = [k for k in need if k not in result]
    if missing:
        raise ValueError(f"result lacks {', '.join(missing)}")
    width = len(result["columns"])
    bad = [i for i, r in enumerate(result["rows"]) if len(r) != width]
    if not result["rows"] or bad:
        raise ValueError(f"result has no rows or rows of the wrong width (rows {bad[:5]})")
    return result


def non_finite(value, where: str = "result") -> list[str]:
    """Where ``value`` (a result, or any part of one) holds a number that is not finite (NaN or an infinity),
    e.g. ``["rows[3][5]"]``: JSON has no such numbers (Python would write ``NaN``, which other readers refuse),
    and a recorded NaN is a measurement that failed, not a number."""
    if isinstance(value, float) and not math.isfinite(value):
        return [where]
    if isinstance(value, dict):
        return [w for k, v in value.items() for w in non_finite(v, f"{where}[{k!r}]")]
    if isinstance(value, (list, tuple)):
        return [w for i, v in enumerate(value) for w in non_finite(v, f"{where}[{i}]")]
    return []


def save(result: dict, path) -> Path:
    """Write a result atomically (a crash never leaves half a JSON file behind), after :func:`validate`; a
    result holding NaN or an infinity anywhere is refused (:func:`non_finite`), and nothing is written."""
    validate(result)
    bad = non_finite(result)
    if bad:
        raise ValueError(f"{result.get('benchmark', 'the result')} holds {len(bad)} number(s) that are not finite "
                         f"(NaN or inf), first at {', '.join(b.removeprefix('result') for b in bad[:3])}: a failed "
                         "measurement; nothing was written")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        json.dump(result, f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(f.name, path)
    return path


def load(path) -> dict:
    """Load a recorded result (path relative to the repository's results/ folder, or absolute)."""
    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = RESULTS / p
    with open(p) as f:
        return validate(json.load(f))


def records(result: dict) -> list[dict]:
    """Rows as dictionaries keyed by column name."""
    cols = result["columns"]
    return [dict(zip(cols, r)) for r in result["rows"]]


def column(result: dict, name: str) -> list:
    i = result["columns"].index(name)
    return [r[i] for r in result["rows"]]
