"""Chapter 2's benchmark: the cost per round of each cross-CTA hand-off, for clusters of 2 to 16 CTAs."""
from __future__ import annotations

from ..barriers import MODES, barrier_cost_kernel, cluster_layouts, ping_pong
from ..core.hardware import CLUSTERS, require
from ..measure import timing


def benchmark(quick: bool = False, log=print) -> dict:
    """Cost per round of each hand-off, for clusters of 2 to 16 CTAs: the slope of kernel time
    between two round counts, so launch overhead cancels."""
    import torch
    require(CLUSTERS, "the barriers benchmark")
    lo, hi = (100, 1100) if quick else (200, 5200)
    rows = []
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    for num_ctas in (2, 4, 8, 16):
        group_all = cluster_layouts(num_ctas)["group_all"]
        for mode, what in MODES.items():
            def run(n):
                return timing.time_ms(lambda: barrier_cost_kernel[(1,)](out, n, MODE=mode, group_all=group_all,
                                                                      num_warps=1, num_ctas=num_ctas),
                                     cudagraph=False)
            t_lo, t_hi = run(lo), run(hi)
            ns = (t_hi - t_lo) * 1e6 / (hi - lo)
            rows.append([num_ctas, mode, what, round(ns, 1), round(t_lo * 1e3, 2), round(t_hi * 1e3, 2)])
            log(f"[barriers] {num_ctas:>2} CTAs, {what}: {ns:.0f} ns per round")
    errors = [[c, ping_pong(c, 1000).sum().item()] for c in (2, 4, 8, 16)]
    log(f"[barriers] ping-pong errors over 1000 rounds: {errors}")
    return {"method": {"timer": "do_bench", "statistic": "median",
                       "cost": f"(t({hi} rounds) - t({lo} rounds)) / {hi - lo}, one cluster, 1 warp per CTA"},
            "ceilings": {},
            "columns": ["num_ctas", "mode", "what", "ns_per_round", "us_low_rounds", "us_high_rounds"],
            "rows": rows, "checks": {"ping_pong_errors_1000_rounds": errors}}
