"""Ceilings, timing and the results store; the one benchmark command of the book.

    python -m multicta_kernels.bench softmax --out results/h200/softmax.json

Every recorded number comes from this command on a real GPU. Ceilings are measured in the same
run (device-to-device copy bandwidth; cuBLAS through Triton's CublasLt binding). Times are medians
on fresh random data: ``triton.testing.do_bench_cudagraph`` for the softmax (short kernels whose
launch gaps a CUDA graph removes), ``do_bench`` where a graph cannot capture the work (cuBLAS
through Triton's binding, and so every matmul, to time both sides alike) or where the kernel is
long enough (the multicast and barrier benchmarks). Each result records its timer under
``method.timer``; results are written as JSON with their provenance (GPU, driver, versions, date).
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import multicta_kernels  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"

# name -> "module:function"; the function takes (quick: bool, log) and returns a result dict body.
BENCHMARKS = {
    "softmax": "multicta_kernels.softmax:benchmark",
    "softmax-sweep": "multicta_kernels.softmax:sweep",
    "softmax-sweep-wide": "multicta_kernels.softmax:sweep_wide",
    "barriers": "multicta_kernels.barriers:benchmark",
    "device": "multicta_kernels.foundations:device_properties",
    "multicast": "multicta_kernels.multicast:benchmark",
    "clc-matmul": "multicta_kernels.clc_matmul:benchmark",
    "hopper-matmul": "multicta_kernels.hopper_matmul:benchmark",
}

REQUIRED = ("benchmark", "gpu", "date", "triton", "method", "ceilings", "columns", "rows")


def log(msg: str) -> None:
    """Progress on stderr, so long runs say what they are doing."""
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- timing

def time_ms(fn, *, cudagraph: bool = True, rep: int = 50) -> float:
    """Median milliseconds per call of ``fn`` after warm-up (CUDA graphs remove launch gaps)."""
    import triton.testing
    if cudagraph:
        return float(triton.testing.do_bench_cudagraph(fn, rep=rep, return_mode="median"))
    return float(triton.testing.do_bench(fn, warmup=25, rep=rep, return_mode="median"))


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def rel_err(c, ref) -> float:
    """||c - ref|| / ||ref|| in fp32: a summary recorded beside a benchmark's numbers, not a check (a few
    wrong rows barely move it; :func:`matmul_sweep` checks every element first)."""
    c, ref = c.float(), ref.float()
    return ((c - ref).norm() / ref.norm()).item()


# --------------------------------------------------------------------------------------- ceilings

def copy_ceiling_gbps(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    import torch
    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).uniform_(-1, 1)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), cudagraph=False, rep=200)
    del src, dst
    return gbps(2 * nbytes, ms)


class Cublas:
    """cuBLAS (cublasLt) through Triton's own binding: ``C = A @ B`` with B given as B^T, row-major."""

    def __init__(self, workspace_bytes: int = 32 << 20):
        import torch
        from triton._C.libtriton import nvidia
        self._workspace = torch.empty(workspace_bytes, device="cuda", dtype=torch.uint8)
        self._lt = nvidia.cublas.CublasLt(self._workspace)

    def matmul(self, a, b_t, c):
        """``c = a @ b_t.T``: a is (M, K), b_t is (N, K), both contiguous; c is (M, N)."""
        self._lt.matmul(a, b_t, c)
        return c


def cublas_tflops(M: int = 8192, N: int = 8192, K: int = 8192, dtype: str = "float16") -> float:
    import torch
    dt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b_t = torch.randn(N, K, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    blas = Cublas()
    ms = time_ms(lambda: blas.matmul(a, b_t, c), cudagraph=False, rep=200)
    return tflops(M, N, K, ms)


SWEEP_PASSES = 2
SWEEP_METHOD = ("every series (ours and both baselines) timed once per pass, in launch order in the first pass and "
                "in reverse order in the second; each keeps its best pass, so no series is only ever timed first "
                "(cool GPU) or last")


def matmul_sweep(variants: dict, shapes, log, tag: str, dtype: str = "float16",
                 passes: int = SWEEP_PASSES) -> tuple[list, list]:
    """TFLOP/s and relative error of each variant at each (M, N, K), each output first checked element
    by element against torch (a wrong kernel stops the run, unrecorded), with cuBLAS (CublasLt, also the
    reference output) and torch.matmul measured in the same run with the same timer.
    ``variants[name](a, b, out)`` returns a prepared ``launch()`` (validated, compiled, descriptors
    built), so that the timer sees the GPU and not the Python front. The series are timed in
    ``passes`` interleaved passes (SWEEP_METHOD): the clock of a GPU under load drifts by a few per
    cent within a run, and a series always timed last would carry that drift. Returns (columns, rows)."""
    import torch
    from .checks import assert_matmul_close
    dt = getattr(torch, dtype)
    blas = Cublas()
    rows = []
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=dt)
        b = torch.randn(K, N, device="cuda", dtype=dt)
        b_t = b.T.contiguous()
        ref = torch.empty(M, N, device="cuda", dtype=dt)
        blas.matmul(a, b_t, ref)
        c = torch.empty_like(ref)
        series, errs = {}, {}
        for name, make in variants.items():
            c.fill_(float("nan"))
            launch = make(a, b, c)
            launch()
            assert_matmul_close(c, a, b, f"{tag} {name} {M}x{N}x{K}")    # nothing wrong is ever recorded
            errs[name] = rel_err(c, ref)
            series[name] = launch
        series["cuBLAS"] = lambda: blas.matmul(a, b_t, ref)
        series["torch"] = lambda: a @ b
        best = dict.fromkeys(series, 0.0)
        for p in range(passes):
            for name in (list(series) if p % 2 == 0 else list(series)[::-1]):
                best[name] = max(best[name], tflops(M, N, K, time_ms(series[name], cudagraph=False, rep=200)))
        row = [M, N, K] + [x for n in variants for x in (round(best[n], 1), errs[n])]
        row += [round(best["cuBLAS"], 1), round(best["torch"], 1)]
        rows.append(row)
        log(f"[{tag}] {dtype} {M}x{N}x{K}: " + ", ".join(f"{n} {row[3 + 2 * i]}" for i, n in enumerate(variants))
            + f", cuBLAS {row[-2]}, torch {row[-1]} TFLOP/s")
    columns = ["M", "N", "K"] + [c for n in variants for c in (f"{n}_tflops", f"{n}_rel_err")] + [
        "cublas_tflops", "torch_tflops"]
    return columns, rows


def ncu_kernels(csv_path, names) -> list[dict]:
    """The kernels of an ``ncu --csv`` profile in launch order, one dict each: ``kernel`` (its name),
    ``grid``, and every metric (a number where ncu printed one). ``names`` are the launches the profile
    should hold, in order: a profile with more or fewer kernels is refused (a launch matched twice by the
    kernel filter, or not at all, would shift every row)."""
    import csv
    rows = list(csv.reader(ln for ln in open(csv_path) if ln.startswith('"')))   # ncu's own chatter skipped
    head, data = rows[0], rows[1:]
    col = {h: head.index(h) for h in ("ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Value")}
    kernels: dict = {}
    for r in data:
        k = kernels.setdefault(int(r[col["ID"]]), {"kernel": r[col["Kernel Name"]], "grid": r[col["Grid Size"]]})
        value = r[col["Metric Value"]].replace(",", "")
        try:
            k[r[col["Metric Name"]]] = float(value)
        except ValueError:
            k[r[col["Metric Name"]]] = value
    if len(kernels) != len(names):
        raise ValueError(f"expected {len(names)} profiled kernels ({', '.join(names)}), found {len(kernels)}")
    return [k for _, k in sorted(kernels.items())]


# ---------------------------------------------------------------------------------- results store

def environment() -> dict:
    import torch
    import triton
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


def save(result: dict, path) -> Path:
    """Write a result atomically: a crash never leaves half a JSON file behind."""
    validate(result)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        json.dump(result, f, indent=1)
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


# ------------------------------------------------------------------------------------------- CLI

def run(name: str, out, quick: bool = False) -> dict:
    from .hardware import CUDA, require
    if name not in BENCHMARKS:
        raise SystemExit(f"unknown benchmark {name!r}; choose one of {', '.join(sorted(BENCHMARKS))}")
    require(CUDA, f"the {name} benchmark")       # each benchmark then asks for the feature it measures
    module, func = BENCHMARKS[name].split(":")
    env = environment()
    log(f"[bench] {name} on {env['gpu']} (triton {env['triton']}, torch {env['torch']})")
    body = getattr(importlib.import_module(module), func)(quick=quick, log=log)
    result = {"benchmark": name, **env, **body}
    if out:
        log(f"[bench] wrote {save(result, out)}")
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m multicta_kernels.bench",
                                 description="Run one of the book's benchmarks on this GPU and record it.")
    ap.add_argument("name", choices=sorted(BENCHMARKS))
    ap.add_argument("--out", help="where to write the JSON result (e.g. results/h200/softmax.json)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes, for a smoke test")
    args = ap.parse_args(argv)
    from .hardware import UnsupportedHardwareError
    try:
        run(args.name, args.out, args.quick)
    except UnsupportedHardwareError as exc:           # a feature asked for inside: one line, nothing written
        raise SystemExit(f"bench: {exc}") from None


if __name__ == "__main__":
    main()
