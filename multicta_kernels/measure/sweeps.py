"""Sweeps: matmul variants timed against cuBLAS and torch in interleaved passes, and Nsight Compute profiles read back."""
from __future__ import annotations

from ..core.accuracy import assert_matmul_close
from .ceilings import Cublas
from .timing import rel_err, tflops, time_ms


SWEEP_PASSES = 2
SWEEP_METHOD = ("every series (ours and both baselines) timed once per pass, in launch order in the first pass and "
                "in reverse order in the second; each keeps its best pass, so no series is only ever timed first "
                "(cool GPU) or last")


def matmul_method(dtype: str, variants: dict, **extra) -> dict:
    """The ``method`` of a recorded :func:`matmul_sweep`: its timer, statistic and passes, the dtype and the variants'
    configurations, then ``extra`` (what else the record measured, in its own words)."""
    return {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events)",
            "statistic": f"median; best of {SWEEP_PASSES} passes", "passes": SWEEP_METHOD, "dtype": dtype,
            "variants": variants, **extra}


def cublas_ceiling(rows) -> dict:
    """A matmul sweep's cuBLAS TFLOP/s by shape (its rows end with cuBLAS, then torch): the record's ceiling."""
    return {"cublas_fp16_tflops": {f"{r[0]}x{r[1]}x{r[2]}": r[-2] for r in rows}}


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
