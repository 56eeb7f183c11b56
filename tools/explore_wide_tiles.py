#!/usr/bin/env python3
"""Tiles as wide as the SM count needs (issue 27): at the shapes where the pick stays below 0.9 of the better
baseline (tools/diagnose_fixed_cost.SHAPES) and at 8192 x 8192 x 4096, chapter 6's kernel with tiles of two
accumulators (``wide_tiles``: 128 x 144, 128 x 160 and 128 x 192) against today's pick, with cuBLAS and
torch.matmul in the same interleaved passes; every output checked against cuBLAS's before it is timed
(``sweeps.matmul_sweep``). Then one launch of 128 x 144 and of 128 x 192 at 1536^3 with the timeline scopes, split
into phases as tools/diagnose_fixed_cost.py splits the pick's (a K step's cycles: what the narrow second wgmma
costs). About two minutes. With ``--a-regs``, each width also with A's operand in registers
(``wide_tiles.plan(a_regs=True)``), and all six traced: results/*/hopper_matmul_wide_regs.json.

    bash .device/run python3 tools/explore_wide_tiles.py --out $OUT
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from multicta_kernels import hopper_matmul as hm, results, wide_tiles as wt  # noqa: E402
from multicta_kernels.core.accuracy import assert_matmul_close  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing, traces as tl  # noqa: E402

SHAPES = [(1536, 1536, 1536), (1024, 1024, 1024), (512, 6144, 4096), (640, 8192, 8192), (2560, 2560, 2560),
          (3072, 3072, 3072), (4096, 4096, 4096), (8192, 8192, 4096)]
WIDE = {f"wide 128x{wt.BLOCK_N0 + e}": e for e in wt.EXTRAS}
TRACED = [16, 64]


REGS = {f"{n}, A in registers": e for n, e in WIDE.items()}


def variants(a_regs: bool = False):
    out = {"picked": lambda a, b, c: hm.prepare(a, b, c)}
    out.update({n: (lambda a, b, c, e=e: wt.prepare(a, b, c, extra=e)) for n, e in WIDE.items()})
    if a_regs:
        out.update({n: (lambda a, b, c, e=e: wt.prepare(a, b, c, extra=e, a_regs=True)) for n, e in REGS.items()})
    return out


def trace(extra: int, clock_mhz: float, M: int = 1536, a_regs: bool = False) -> list:
    """One launch of 128 x (128 + extra) tiles at M^3 with the timeline scopes, split into phases as
    tools/diagnose_fixed_cost.py splits the pick's: a row [M, N, K, kernel, phases]."""
    import torch
    import diagnose_fixed_cost as fc
    N = K = M
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    owner = tl.placed_partitions(wt.wide_matmul_spec(extra=extra, a_regs=a_regs), ["consumer", "producer"])
    name = f"wide 128x{wt.BLOCK_N0 + extra}" + (", A in registers" if a_regs else "")
    for buffer, mode in fc.BUFFERS:
        tr = tl.record(lambda: wt.wide_matmul(a, b, out=c, extra=extra, a_regs=a_regs, instrument=True),
                       f"wide_{wt.BLOCK_N0 + extra}", partitions=owner, clock_mhz=clock_mhz, mode=mode())
        assert_matmul_close(c, a, b, f"{name} traced")
        try:
            ph = fc.phases(tr, k_steps=K // wt.BLOCK_K)
            break
        except ValueError as e:
            timing.log(f"[wide-tiles] timeline {name} with the {buffer} buffer: {e}")
    else:
        raise SystemExit(f"explore_wide_tiles: the {name} timeline lost records")
    ph["buffer"], ph["clock_estimate_mhz"] = buffer, tr.meta.get("clock_estimate_mhz")
    ph["mma_flop_per_step"] = 2 * wt.BLOCK_M * (wt.BLOCK_N0 + extra) * wt.BLOCK_K
    timing.log(f"[wide-tiles] timeline {name}: {ph}")
    return [M, N, K, name, ph]


def traced_phases(extras, a_regs=(False,)) -> dict:
    """A record's "phases": one traced launch at 1536^3 for each width in ``extras`` (:func:`trace`), with A's
    operand from shared memory and/or registers (``a_regs``), with the SM clock nvidia-smi reports."""
    from record_timelines import sm_clock_mhz
    clock = sm_clock_mhz()
    return {"columns": ["M", "N", "K", "kernel", "phases"],
            "rows": [trace(e, clock["clock_mhz"], a_regs=r) for r in a_regs for e in extras],
            "method": "as results/*/hopper_matmul_phases.json (tools/diagnose_fixed_cost.phases)", "clock": clock}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="two shapes, no timelines")
    ap.add_argument("--a-regs", action="store_true",
                    help="also each width with A's operand in registers (record hopper_matmul_wide_regs.json)")
    args = ap.parse_args()
    require_or_exit("explore_wide_tiles", WGMMA)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    name = "hopper_matmul_wide_regs.json" if args.a_regs else "hopper_matmul_wide_tiles.json"
    columns, rows = sweeps.matmul_sweep(variants(args.a_regs), SHAPES[:2] if args.quick else SHAPES, timing.log,
                                        "wide-tiles")
    series = {"picked": {}, **{n: {"extra": e} for n, e in WIDE.items()}}
    if args.a_regs:
        series.update({n: {"extra": e, "a_regs": True} for n, e in REGS.items()})
    result = {"benchmark": "hopper-matmul-wide-regs" if args.a_regs else "hopper-matmul-wide-tiles", **env,
              "method": sweeps.matmul_method("float16", series,
                                             defaults=hm.CONFIG, launch="prepare(): the timer sees launches only"),
              "ceilings": sweeps.cublas_ceiling(rows), "columns": columns, "rows": rows}
    results.save(result, out / name)
    if args.quick:
        return
    result["phases"] = traced_phases(wt.EXTRAS, (False, True)) if args.a_regs else traced_phases(TRACED)
    results.save(result, out / name)
    timing.log("[wide-tiles] done")


if __name__ == "__main__":
    main()
