#!/usr/bin/env python3
"""fp32 rows one CTA holds: is ours behind the upstream design because of its code or because of its pick? Both
kernels at the same configurations, five interleaved passes (about two minutes on a Hopper GPU).

    bash .device/run python3 tools/record_one_cta_configs.py --out $OUT        # the device machine
    .venv/bin/python tools/record_one_cta_configs.py --out results/h200          # a GPU node

softmax_one_cta_repeat.json found ours (pick_config) 0.995-0.9996x the upstream design's best in fp32 at the
one-CTA shapes, in every pass. Here, at those shapes: for every warp count the upstream design tries on one CTA,
ours at that very configuration (make_config(N, 1, warps), one row a program, as the upstream design) and the
upstream design, then ours at its pick; every output checked against torch first; five passes, each timing every
kernel once, one after the other. Writes ``softmax_one_cta_configs.json``: one row per (shape, kernel, warps, pass).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

SHAPES = [(32768, 1000), (32768, 1024), (32768, 2048), (32768, 4096), (32768, 32768)]
PASSES = 5
COLUMNS = ["M", "N", "kernel", "num_warps", "block_m", "pass", "gbps"]


def runs(N: int):
    """[(kernel, warps, block_m, launch(x, y))]: ours and the upstream design at each one-CTA warp count the upstream
    design tries, then ours at its pick."""
    from multicta_kernels import softmax as sm
    out = []
    for c, w in sm.upstream_design_configs(N):
        if c != 1:
            continue
        cfg = sm.make_config(N, 1, w, 1, "float32")
        out.append(("ours", cfg.num_warps, 1, lambda x, y, cfg=cfg: sm.multicta_softmax(x, y, config=cfg)))
        out.append(("upstream design", w, 1, lambda x, y, w=w: sm.upstream_design(x, y, 1, w)))
    pick = sm.pick_config(N, "float32")
    out.append(("ours, picked", pick.num_warps, pick.block_m, lambda x, y: sm.multicta_softmax(x, y, config=pick)))
    return out


def main(argv=None) -> None:
    from record_softmax_phases import save_timed, start
    from record_timelines import say

    import torch

    from multicta_kernels.core.accuracy import assert_softmax_close
    from multicta_kernels.measure import ceilings, timing
    out_dir, env, clock = start("record_one_cta_configs", __doc__, argv)
    copy = ceilings.copy_ceiling_gbps()
    rows = []
    for M, N in SHAPES:
        x = torch.empty((M, N), device="cuda").uniform_(-4, 4)
        y = torch.empty_like(x)
        gb = lambda ms: timing.gbps(2 * x.numel() * x.element_size(), ms)  # noqa: E731
        kernels = runs(N)
        for name, w, bm, launch in kernels:
            y.fill_(float("nan"))
            launch(x, y)
            assert_softmax_close(y, x, f"{name} at 1 CTA x {w} warps, fp32 {M}x{N}")
        for p in range(PASSES):
            for name, w, bm, launch in kernels:
                rows.append([M, N, name, w, bm, p, round(gb(timing.time_ms(lambda: launch(x, y))), 1)])
        mine = {(r[2], r[3]): [] for r in rows if r[1] == N}
        for r in rows:
            if r[1] == N:
                mine[(r[2], r[3])].append(r[6])
        best = {k: sorted(v)[PASSES // 2] for k, v in mine.items()}
        same = ", ".join(f"{w} warps {best[('ours', w)] / best[('upstream design', w)]:.4f}"
                         for name, w, _, _ in kernels if name == "ours")
        say(f"fp32 {M}x{N}: ours / upstream at the same configuration (medians): {same}")
        x = y = None
        torch.cuda.empty_cache()
    save_timed(out_dir / "softmax_one_cta_configs.json", "softmax-one-cta-configs", env, clock, copy, rows, COLUMNS,
               command="python3 tools/record_one_cta_configs.py --out <dir>",
               passes=f"{PASSES}, interleaved: in each pass every kernel of the shape once",
               kernels="ours: softmax_kernel at make_config(N, 1, warps) (one row a program) and at pick_config(N); "
                       "upstream design: upstream_design_kernel at (1, warps), for every one-CTA entry of "
                       "upstream_design_configs(N)",
               data="uniform(-4, 4), fp32, fresh per shape", bytes="2 * M * N * 4 (read x, write out)",
               checked="every kernel's output against torch (assert_softmax_close) before any timing")


if __name__ == "__main__":
    main()
