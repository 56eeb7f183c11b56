#!/usr/bin/env python3
"""Where one CTA holds a row, is ours behind the upstream design, or is that noise? Five interleaved passes
(about three minutes on a Hopper GPU).

    bash .device/run python3 tools/record_one_cta_repeat.py --out $OUT        # the device machine
    .venv/bin/python tools/record_one_cta_repeat.py --out results/h200          # a GPU node

The softmax and half benchmarks keep one median a row, and at the rows one CTA holds (N <= 32768) ours came out
0.996-1.029 x the upstream design's best. Here, at the benchmarks' one-CTA shapes, in fp32, fp16 and bf16: every
output checked against torch first, then five passes, each timing ours (pick_config) and every configuration of the
upstream design (upstream_design_configs) one after the other, so each pass's ratio compares kernels timed a moment
apart. Writes ``softmax_one_cta_repeat.json``: one row per (dtype, shape, pass).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

SHAPES = {"float32": [(32768, 1000), (32768, 1024), (32768, 2048), (32768, 4096), (32768, 32768)],
          "float16": [(32768, 1024), (32768, 8192), (32768, 32768)],
          "bfloat16": [(32768, 1024), (32768, 8192), (32768, 32768)]}
PASSES = 5
COLUMNS = ["dtype", "M", "N", "config", "pass", "gluon_gbps", "seed_design_gbps", "seed_design_config", "ratio"]


def main(argv=None) -> None:
    from record_softmax_phases import save_timed, start
    from record_timelines import say

    import torch

    from multicta_kernels import softmax as sm
    from multicta_kernels.core.accuracy import assert_softmax_close
    from multicta_kernels.measure import ceilings, timing
    out_dir, env, clock = start("record_one_cta_repeat", __doc__, argv)
    copy = ceilings.copy_ceiling_gbps()
    rows = []
    for dtype, shapes in SHAPES.items():
        for M, N in shapes:
            x = torch.empty((M, N), device="cuda").uniform_(-4, 4).to(getattr(torch, dtype))
            y = torch.empty_like(x)
            gb = lambda ms: timing.gbps(2 * x.numel() * x.element_size(), ms)  # noqa: E731
            cfg = sm.pick_config(N, dtype)
            ups = sm.upstream_design_configs(N)
            y.fill_(float("nan"))
            sm.multicta_softmax(x, y, config=cfg)
            assert_softmax_close(y, x, f"ours {dtype} {M}x{N}")
            for c, w in ups:
                y.fill_(float("nan"))
                sm.upstream_design(x, y, c, w)
                assert_softmax_close(y, x, f"the upstream design at {c} x {w}, {dtype} {M}x{N}")
            config = f"{cfg.num_ctas} CTA x {cfg.num_warps} warps, block_m {cfg.block_m}"
            for p in range(PASSES):
                ours = gb(timing.time_ms(lambda: sm.multicta_softmax(x, y, config=cfg)))
                seed = max((gb(timing.time_ms(lambda: sm.upstream_design(x, y, c, w))), f"{c} CTA x {w} warps")
                           for c, w in ups)
                rows.append([dtype, M, N, config, p, round(ours, 1), round(seed[0], 1), seed[1],
                             round(ours / seed[0], 4)])
            ratios = [r[-1] for r in rows[-PASSES:]]
            say(f"{dtype} {M}x{N} ({config}): ours / upstream {min(ratios):.3f}-{max(ratios):.3f}, "
                f"median {sorted(ratios)[PASSES // 2]:.3f}")
            x = y = None
            torch.cuda.empty_cache()
    save_timed(out_dir / "softmax_one_cta_repeat.json", "softmax-one-cta-repeat", env, clock, copy, rows, COLUMNS,
               command="python3 tools/record_one_cta_repeat.py --out <dir>",
               passes=f"{PASSES}, interleaved: in each pass ours, then every upstream configuration",
               seed_design="upstream_design_kernel, best of upstream_design_configs(N) in each pass",
               data="uniform(-4, 4), fresh per shape", bytes="2 * M * N * element size (read x, write out)",
               checked="ours and every upstream configuration against torch (assert_softmax_close) before any timing")


if __name__ == "__main__":
    main()
