"""Timing: medians of a function's run time after warm-up, and the rates computed from them."""
from __future__ import annotations

import sys


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
