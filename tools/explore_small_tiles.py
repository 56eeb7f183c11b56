#!/usr/bin/env python3
"""Smaller tiles where the persistent matmul leaves SMs idle (issue 27): at the shapes of the held-out record still
below 0.9 of the better of cuBLAS and torch.matmul (1024^3, 1536^3, 2560^3, 3072^3, 512 x 6144 x 4096, 640 x 8192 x
8192), tiles of 64 x 128, 128 x 64 and 64 x 256 (and 128 x 128 with one consumer) against the ping-pong's 128 x 128
and today's pick (no options: the 128 x 128 ping-pong or the default 128 x 256, by shape), with cuBLAS and torch.matmul in the same run; and at 128 x 4096 x 14336 the split's
partials stored with and without the L2 hints, against 64 x 64 tiles unsplit (128 of them, as many units as the
split's). The record is written after each table, so a run cut off keeps what it measured. Every output is checked against cuBLAS's before anything is timed
(``sweeps.matmul_sweep``).

    bash .device/run python3 tools/explore_small_tiles.py --out $OUT/hopper_matmul_small_tiles.json
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multicta_kernels import hopper_matmul as hm, results  # noqa: E402
from multicta_kernels.benchmarks import hopper_matmul as bench  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing  # noqa: E402

# "picked": no options, so pick_config chooses (the ping-pong 128 x 128 at 1024^3, 3072^3 and 640 x 8192 x 8192, the
# default 128 x 256 at the other three). Its record, written before this name was fixed, calls it "default" (RECORDED).
EXPLORE = {"picked": {},
           "ping-pong 128x128": dict(hm.SHORT_K_CONFIG),
           "ping-pong 64x128": dict(hm.SHORT_K_CONFIG, block_m=64, stages=6),
           "ping-pong 128x64": dict(hm.SHORT_K_CONFIG, block_n=64, stages=6),
           "1 consumer 64x256": dict(block_m=64, block_n=256, stages=4, l2_hints=True),
           "1 consumer 128x128": dict(block_m=128, block_n=128, stages=5, l2_hints=True)}
SHAPES = [(1024, 1024, 1024), (1536, 1536, 1536), (2560, 2560, 2560), (3072, 3072, 3072), (512, 6144, 4096),
          (640, 8192, 8192)]
SPLIT = {"split_k 4, L2 hints": dict(hm.SPLIT_K_CONFIG, split_k=4, l2_hints=True),
         "split_k 4, no L2 hints": dict(hm.SPLIT_K_CONFIG, split_k=4, l2_hints=False),
         "ping-pong 64x64, no split": dict(hm.SHORT_K_CONFIG, block_m=64, block_n=64, stages=8)}
SPLIT_SHAPES = [(128, 4096, 14336)]
RECORDED = {"picked": "default"}      # a variant's name in results/h100/hopper_matmul_small_tiles.json, where it differs


def table(explore, shapes, tag, dtype="float16"):
    columns, rows = sweeps.matmul_sweep(bench.prepared(explore), shapes, timing.log, tag, dtype)
    return {"columns": columns, "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    require_or_exit("explore_small_tiles", WGMMA)
    tiles = table(EXPLORE, SHAPES, "small-tiles")
    result = {"benchmark": "hopper-matmul-small-tiles", **results.environment(),
              "method": sweeps.matmul_method("float16", EXPLORE, defaults=hm.CONFIG,
                                             launch="prepare(): the timer sees launches only",
                                             split_variants=SPLIT),
              "ceilings": sweeps.cublas_ceiling(tiles["rows"]), **tiles}
    results.save(result, args.out)
    result["tables"] = {"split_l2_hints": table(SPLIT, SPLIT_SHAPES, "split-l2")}
    results.save(result, args.out)


if __name__ == "__main__":
    main()
