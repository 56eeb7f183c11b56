#!/usr/bin/env python3
"""Stream-K where the persistent matmul leaves SMs idle (issue 27): at the shapes of the held-out record below 0.9
of the better of cuBLAS and torch.matmul, at 2048^3 (128 tiles on 132 SMs), at the split's shape and at 4096^3, the
stream-K kernel (every program the same number of K steps, tiles shared across programs) at 128 x 256 and 128 x 128,
against today's pick (no options), the default 128 x 256 (every option given: with none, ``hopper_matmul`` picks)
and the ping-pong 128 x 128, with cuBLAS and torch.matmul in the same run. Every output is checked against cuBLAS's
before anything is timed (``sweeps.matmul_sweep``).

    bash .device/run python3 tools/explore_stream_k.py --out $OUT/hopper_matmul_stream_k.json
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multicta_kernels import hopper_matmul as hm, results  # noqa: E402
from multicta_kernels.benchmarks import hopper_matmul as bench  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing  # noqa: E402

EXPLORE = {"picked": {},                         # no options: pick_config chooses
           "default 128x256": dict(hm.CONFIG),    # every option given: the defaults themselves, not the pick
           "ping-pong 128x128": dict(hm.SHORT_K_CONFIG),
           "stream-K 128x256": dict(stream_k=True),
           "stream-K 128x128": dict(stream_k=True, block_n=128, stages=5)}
# Its record (results/h100/hopper_matmul_stream_k.json) was written before "default 128x256" was given its options:
# there the column is "default", with no options, so it is a second timing of the pick (RECORDED).
RECORDED = {"default 128x256": ("default", {})}
SHAPES = [(1024, 1024, 1024), (1536, 1536, 1536), (2048, 2048, 2048), (2560, 2560, 2560), (3072, 3072, 3072),
          (512, 6144, 4096), (640, 8192, 8192), (128, 4096, 14336), (4096, 4096, 4096)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    args = ap.parse_args()
    require_or_exit("explore_stream_k", WGMMA)
    columns, rows = sweeps.matmul_sweep(bench.prepared(EXPLORE), SHAPES, timing.log, "stream-k", args.dtype)
    result = {"benchmark": "hopper-matmul-stream-k", **results.environment(),
              "method": sweeps.matmul_method(args.dtype, EXPLORE, defaults=hm.CONFIG,
                                             launch="prepare(): the timer sees launches only"),
              "columns": columns, "rows": rows}
    result["ceilings"] = sweeps.cublas_ceiling(rows)
    results.save(result, args.out)


if __name__ == "__main__":
    main()
