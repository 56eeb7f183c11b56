"""Chapter 3's benchmark: bandwidth delivered into shared memory, each CTA loading its own copy or one multicast
per tile, with every legal release of a stage."""
from __future__ import annotations

from ..core.hardware import CLUSTERS, require
from ..measure import ceilings, timing
from ..multicast import STREAM_VARIANTS, tile_stream


def benchmark(quick: bool = False, log=print, passes: int = 3) -> dict:
    """Delivered bandwidth into shared memory when every CTA of a cluster needs the same tiles: each CTA loading
    its own copy vs one multicast per tile, for clusters of 1 to 16 CTAs, with every legal release of a stage
    (STREAM_VARIANTS: own copies need none; a relaxed cluster barrier suffices here because no thread reads the
    tiles). Every variant is timed in ``passes`` interleaved passes (the median of the passes' medians is
    recorded, with their spread); a variant that misses a tile is refused, not recorded."""
    require(CLUSTERS, "the multicast benchmark")
    copy = ceilings.copy_ceiling_gbps()
    sizes = (1, 2, 4) if quick else (1, 2, 4, 8, 16)
    variants = [(n, m, r) for n in sizes for m in ((False,) if n == 1 else (False, True))
                for r in (("none",) if n == 1 else STREAM_VARIANTS[m])]
    launches = {v: tile_stream(v[0], multicast=v[1], release=v[2]) for v in variants}
    times = {v: [] for v in variants}
    for p in range(1 if quick else passes):
        for v in variants:
            launch, nbytes = launches[v]
            got = launch()
            if not bool((got == 64).all().item()):
                raise AssertionError(f"tile stream {v}: a cluster saw {got.tolist()} tiles, not 64: nothing recorded")
            times[v].append(timing.time_ms(launch, cudagraph=False))
        log(f"[multicast] pass {p + 1} of {passes} done")
    rows = []
    for v in variants:
        num_ctas, multicast, mode = v
        nbytes = launches[v][1]
        ms = sorted(times[v])[len(times[v]) // 2]
        delivered = timing.gbps(nbytes, ms)
        from_l2 = delivered / num_ctas if multicast else delivered
        spread = (max(times[v]) - min(times[v])) / ms
        rows.append([num_ctas, multicast, mode, 128 // num_ctas, round(delivered, 1), round(from_l2, 1), True,
                     round(100 * spread, 1)])
        log(f"[multicast] {num_ctas:>2} CTAs, multicast={multicast!s:5}, release={mode:8}: delivered "
            f"{delivered:.0f} GB/s (L2 -> SM {from_l2:.0f} GB/s), spread over passes {100 * spread:.1f} %")
    return {"method": {"timer": "do_bench", "statistic": f"median of {passes} interleaved passes' medians",
                       "workload": "each cluster streams 64 tiles of 128x128 fp16 (32 KiB) through a 4-stage ring; "
                                   "the 8 MiB source stays in L2; 128 CTAs in all; 1 warp per CTA",
                       "delivered": "bytes landing in shared memory, all CTAs counted",
                       "l2_to_sm": "delivered / cluster size with multicast, delivered without",
                       "releases": "none: no release (own copies only); relaxed: barrier.cluster.arrive.relaxed per "
                                   "stage; cluster: barrier.cluster per stage; mbarrier: gather on CTA 0 + broadcast",
                       "init_sync": "gluon.sync.sync_inits() once before the loop (no init fence in the loop)"},
            "ceilings": {"copy_gbps": round(copy, 1)},
            "columns": ["num_ctas", "multicast", "release", "clusters", "delivered_gbps", "l2_to_sm_gbps",
                        "all_tiles_seen", "spread_pct"],
            "rows": rows}
