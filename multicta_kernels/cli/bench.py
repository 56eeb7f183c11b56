"""The one benchmark command of the book:

    python -m multicta_kernels.cli.bench softmax --out results/h200/softmax.json

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

from ..benchmarks import barriers, clc_matmul, foundations, hopper_matmul, multicast, softmax
from ..core.hardware import CUDA, UnsupportedHardwareError, require
from ..measure.timing import log
from ..results.store import environment, save


# name -> the benchmark itself: it takes (quick: bool, log) and returns a result's body (method, ceilings, table).
BENCHMARKS = {
    "softmax": softmax.benchmark,
    "softmax-half": softmax.benchmark_half,
    "softmax-beyond": softmax.benchmark_beyond,
    "softmax-sweep": softmax.sweep,
    "softmax-sweep-wide": softmax.sweep_wide,
    "softmax-sweep-half": softmax.sweep_half,
    "softmax-sweep-staged": softmax.sweep_staged,
    "softmax-sweep-halves": softmax.sweep_halves,
    "softmax-exchange": softmax.exchange_benchmark,
    "barriers": barriers.benchmark,
    "device": foundations.device_properties,
    "multicast": multicast.benchmark,
    "clc-matmul": clc_matmul.benchmark,
    "hopper-matmul": hopper_matmul.benchmark,
    "hopper-matmul-shapes": hopper_matmul.shapes_benchmark,
}


# ------------------------------------------------------------------------------------------- CLI

def run(name: str, out, quick: bool = False) -> dict:
    if name not in BENCHMARKS:
        raise SystemExit(f"unknown benchmark {name!r}; choose one of {', '.join(sorted(BENCHMARKS))}")
    require(CUDA, f"the {name} benchmark",       # each benchmark then asks for the feature it measures
            instead="read its recorded results in results/ (a benchmark measures a GPU; nothing was written)")
    env = environment()
    log(f"[bench] {name} on {env['gpu']} (triton {env['triton']}, torch {env['torch']})")
    body = BENCHMARKS[name](quick=quick, log=log)
    result = {"benchmark": name, **env, **body}
    if out:
        log(f"[bench] wrote {save(result, out)}")
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m multicta_kernels.cli.bench",
                                 description="Run one of the book's benchmarks on this GPU and record it.")
    ap.add_argument("name", choices=sorted(BENCHMARKS))
    ap.add_argument("--out", help="where to write the JSON result (e.g. results/h200/softmax.json)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes, for a smoke test")
    args = ap.parse_args(argv)
    try:
        run(args.name, args.out, args.quick)
    except UnsupportedHardwareError as exc:           # a feature asked for inside: one line, nothing written
        raise SystemExit(f"bench: {exc}") from None


if __name__ == "__main__":
    main()
