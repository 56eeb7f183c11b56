#!/usr/bin/env python3
"""Split-K on a Hopper GPU (issue 27): at the shapes where the persistent matmul leaves SMs idle (too few tiles
for one wave), each configuration with split_k = 1, 2, 4 and 8 against cuBLAS and torch.matmul in the same run;
every output is checked against cuBLAS's before anything is timed (``sweeps.matmul_sweep``). Then, per split
configuration, its two launches timed alone (``launch.parts``: the matmul that writes the fp32 partials, the sum
that reads them back): where a split's time goes. The rule ``hm.split_k_for`` was set from this run.

    bash .device/run python3 tools/explore_split_k.py --out $OUT/hopper_matmul_split_k.json
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multicta_kernels import hopper_matmul as hm, results  # noqa: E402
from multicta_kernels.benchmarks import hopper_matmul as bench  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing  # noqa: E402

PINGPONG = dict(consumers=2, block_m=128, block_n=128, l2_hints=True)
EXPLORE = {"ping-pong": dict(PINGPONG, stages=5),
           **{f"ping-pong, split_k {s}": dict(PINGPONG, stages=4, epilogue_n=32, split_k=s) for s in (2, 4, 8)},
           "picked": {},        # no options: pick_config chooses (its record calls it "default": RECORDED)
           **{f"default, split_k {s}": dict(epilogue_n=64, split_k=s) for s in (2, 4)}}
RECORDED = {"picked": "default"}      # a variant's name in results/h200/hopper_matmul_split_k.json, where it differs
SHAPES = [(128, 4096, 14336), (128, 14336, 4096), (256, 8192, 8192), (512, 6144, 4096), (640, 8192, 8192),
          (1024, 1024, 1024), (1536, 1536, 1536), (2048, 2048, 2048), (2560, 2560, 2560), (3072, 3072, 3072)]


# The configurations whose two launches are timed alone (the record's parts table).
PARTS = {"ping-pong, split_k 2": EXPLORE["ping-pong, split_k 2"], "ping-pong, split_k 4": EXPLORE["ping-pong, split_k 4"],
         "ping-pong, split_k 2, 3 stages, epilogue_n 64": dict(PINGPONG, stages=3, epilogue_n=64, split_k=2),
         "default, split_k 2": EXPLORE["default, split_k 2"]}
PARTS_COLUMNS = ["M", "N", "K", "variant", "grid", "total_us", "graph_us", "matmul_us", "sum_us"]
PARTS_SHAPES = [(128, 14336, 4096), (128, 4096, 14336), (1024, 1024, 1024), (512, 6144, 4096)]


def parts(shapes=PARTS_SHAPES, dtype="float16") -> list:
    """PARTS_COLUMNS rows for every PARTS configuration: both launches (total), both in a CUDA graph (graph), and
    each launch of ``launch.parts`` timed alone (the matmul that writes the partials, the sum that reads them)."""
    import torch
    out = []
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
        b = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
        for name, cfg in PARTS.items():
            launch = hm.prepare(a, b, **cfg)
            us = {k: round(timing.time_ms(f, cudagraph=False, rep=100) * 1e3, 1) for k, f in launch.parts.items()}
            total = round(timing.time_ms(launch, cudagraph=False, rep=100) * 1e3, 1)
            graph = round(timing.time_ms(launch, cudagraph=True, rep=100) * 1e3, 1)
            out.append([M, N, K, name, launch.grid, total, graph, us["matmul"], us["sum"]])
    return out


def floor_us() -> float:
    """What the timer reads for a call that launches nothing (an unsplit launch's ``parts["sum"]``)."""
    return timing.time_ms(lambda: None, cudagraph=False, rep=100) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    require_or_exit("explore_split_k", WGMMA)
    columns, rows = sweeps.matmul_sweep(bench.prepared(EXPLORE), SHAPES, timing.log, "split-k", "float16")
    result = {"benchmark": "hopper-matmul-split-k", **results.environment(),
              "method": sweeps.matmul_method(
                  "float16", EXPLORE, defaults=hm.CONFIG,
                  launch="prepare(): the timer sees launches only (a split: the matmul and the sum)",
                  parts="each split's two launches (launch.parts) timed alone, L2 flushed before each, "
                        "time_ms(cudagraph=False, rep=100), microseconds; total: the two together, graph: the two in a "
                        f"CUDA graph. Timing a launch that does nothing reads {floor_us():.1f} us here (the timer's "
                        "floor)."),
              "ceilings": sweeps.cublas_ceiling(rows),
              "columns": columns, "rows": rows,
              "tables": {"parts": {"columns": PARTS_COLUMNS, "rows": parts()},
                         "parts_configs": {"columns": ["variant", "config"],
                                           "rows": [[n, json.dumps(c)] for n, c in PARTS.items()]}}}
    results.save(result, args.out)


if __name__ == "__main__":
    main()
