#!/usr/bin/env python3
"""Chapter 6's configuration knobs at short K on a Hopper GPU, against cuBLAS and torch in the same run
(issue 17: what bounds K = 512). Writes results/<gpu>/hopper_matmul_explore.json with the usual provenance.

    bash .device/run python3 tools/explore_hopper_matmul.py --out $OUT/hopper_matmul_explore.json
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multicta_kernels import bench, hopper_matmul as hm  # noqa: E402
from multicta_kernels.hardware import WGMMA, require_or_exit  # noqa: E402

EXPLORE = {
    "default (128x256, 3 stages)": {},
    "tile_width 16": dict(tile_width=16),
    "tile_width 4": dict(tile_width=4),
    "minor_dim 1": dict(minor_dim=1),
    "epilogue_n 64, 3 stages": dict(epilogue_n=64),
    "2-CTA": dict(num_ctas=2),
    "ping-pong 128x128, 5 stages": dict(consumers=2, block_m=128, block_n=128, stages=5),
    "128x128, 5 stages": dict(block_m=128, block_n=128, stages=5),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    require_or_exit("explore_hopper_matmul", WGMMA)
    variants = {n: (lambda a, b, c, cfg=cfg: hm.prepare(a, b, c, **cfg)) for n, cfg in EXPLORE.items()}
    columns, rows = bench.matmul_sweep(variants, [(8192, 8192, 512), (8192, 8192, 1024)], bench.log, "explore")
    result = {"benchmark": "hopper-matmul-explore", **bench.environment(),
              "method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events)",
                         "statistic": "median", "dtype": "float16", "variants": EXPLORE,
                         "launch": "prepare(): the timer sees launches only"},
              "ceilings": {"cublas_fp16_tflops": {f"{r[0]}x{r[1]}x{r[2]}": r[-2] for r in rows}},
              "columns": columns, "rows": rows}
    bench.save(result, args.out)


if __name__ == "__main__":
    main()
