#!/usr/bin/env python3
"""Where stream-K's time goes (issue 27): the stream-K kernel (128 x 256) at one shape with the grid chosen so that
the runs hold whole tiles (no partials: the kernel's main loop alone), two programs a tile, and more; beside today's
pick (no options) and the default persistent kernel (128 x 256, every option given). At 4096^3 a grid of 128
programs gives runs of exactly four tiles, every run starting at K step 0, against 132 programs whose runs start at
K steps spread over the whole of K. Every output is checked against torch before it is timed.

    bash .device/run python3 tools/diagnose_stream_k.py --out $OUT/hopper_matmul_stream_k_diagnosis.json
"""
import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multicta_kernels import hopper_matmul as hm, results  # noqa: E402
from multicta_kernels.core.accuracy import assert_matmul_close  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import timing  # noqa: E402

# Its record (results/h200/hopper_matmul_stream_k_diagnosis.json) was written before the first two kernels were named
# apart: its "default" rows gave no options, so they are the pick (the default 128 x 256 at 1536^3 and 4096^3, the
# 128 x 128 ping-pong at 1024^3), and it has no "default 128x256" rows.
# (M, N, K, [programs, ...]) for stream-K 128 x 256; None: as many as are resident
CASES = [(1024, 1024, 1024, [32, 64, 128]), (1536, 1536, 1536, [72, 96, None]), (4096, 4096, 4096, [128, None])]


def main():
    import torch
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    require_or_exit("diagnose_stream_k", WGMMA)
    rows = []
    for M, N, K, grids in CASES:
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        tiles, steps = math.ceil(M / 128) * math.ceil(N / 256), math.ceil(K / 64)
        kernels = [("picked", None, {}), ("default 128x256", None, dict(hm.CONFIG))]    # {}: the pick
        for name, grid, cfg in kernels + [("stream-K", g, dict(stream_k=True)) for g in grids]:
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            launch = hm.prepare(a, b, c, programs=grid, **cfg)
            launch()
            torch.cuda.synchronize()
            assert_matmul_close(c, a, b, f"{name}, {grid} programs")      # element by element, before timing
            ms = timing.time_ms(launch, cudagraph=False, rep=100)
            per = math.ceil(tiles * steps / launch.grid) if cfg.get("stream_k") else steps
            row = [M, N, K, name, launch.grid, per, per % steps == 0, round(timing.tflops(M, N, K, ms), 1),
                   round(ms * 1e3, 2)]
            rows.append(row)
            timing.log(f"[stream-k diagnosis] {row}")
    result = {"benchmark": "hopper-matmul-stream-k-diagnosis", **results.environment(),
              "method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events), median",
                         "dtype": "float16", "tile": "stream-K and default: 128 x 256, 64-deep K steps; picked: "
                                                             "pick_config's",
                         "per": "K steps a program runs (stream-K: ceil(tiles * steps / programs))"},
              "ceilings": {}, "columns": ["M", "N", "K", "kernel", "programs", "per", "whole_tiles", "tflops", "us"],
              "rows": rows}
    results.save(result, args.out)


if __name__ == "__main__":
    main()
