#!/usr/bin/env python3
"""The wide-tile pick on shapes it was not fitted to (issue 27). ``wide_tiles.pick_extra`` takes tiles of two
accumulators where the rounds model (``wide_tiles.rounds_cycles``, fitted to the eight shapes of
tools/explore_wide_tiles.py) predicts them at most WIDE_GAIN of the default kernel's time. Here, at ten held-out
shapes (six where it takes them, four where it predicts a loss), the pick, ``prepare_picked`` (the pick with the
rule) and the three widths, with cuBLAS and torch.matmul in the same interleaved passes; every output checked
before it is timed (``sweeps.matmul_sweep``). Then one launch of 128 x 160 at 1536^3 with the timeline scopes:
the step cycles the rule assumes for that width. About two minutes.

    bash .device/run python3 tools/validate_wide_pick.py --out $OUT
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from multicta_kernels import hopper_matmul as hm, results, wide_tiles as wt  # noqa: E402
from multicta_kernels.core import hardware  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing  # noqa: E402

HELD_OUT = [(768, 3072, 4096), (1024, 2304, 2048), (1280, 2048, 4096), (2304, 1024, 2048), (1024, 3072, 4096),
            (1792, 1536, 2048), (3584, 6144, 2048), (2304, 8192, 4096), (1536, 8192, 4096), (2304, 3072, 2048)]
TRACED = [32]


def variants():
    from explore_wide_tiles import WIDE
    out = {"picked": lambda a, b, c: hm.prepare(a, b, c), "with wide": lambda a, b, c: wt.prepare_picked(a, b, c)}
    out.update({n: (lambda a, b, c, e=e: wt.prepare(a, b, c, extra=e)) for n, e in WIDE.items()})
    return out


def predictions(sms: int) -> dict:
    """shape -> the rule's width (None: the pick) and each width's predicted share of the default kernel's time."""
    return {f"{M}x{N}x{K}": {"extra": wt.pick_extra(M, N, K, sms),
                             "predicted_share": {e: round(wt.rounds_cycles(M, N, K, sms, e)
                                                          / wt.rounds_cycles(M, N, K, sms), 4) for e in wt.EXTRAS}}
            for M, N, K in HELD_OUT}


def main():
    from explore_wide_tiles import WIDE, trace
    from record_timelines import sm_clock_mhz
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    require_or_exit("validate_wide_pick", WGMMA)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    sms = hardware.device().sms
    columns, rows = sweeps.matmul_sweep(variants(), HELD_OUT, timing.log, "wide-pick")
    result = {"benchmark": "hopper-matmul-wide-pick", **env,
              "method": sweeps.matmul_method(
                  "float16", {"picked": {}, "with wide": {"rule": "wide_tiles.pick_extra"},
                              **{n: {"extra": e} for n, e in WIDE.items()}},
                  defaults=hm.CONFIG, launch="prepare(): the timer sees launches only",
                  rule={"step_cycles": wt.STEP_CYCLES, "default_step_cycles": wt.DEFAULT_STEP_CYCLES,
                        "wide_gain": wt.WIDE_GAIN}),
              "predictions": predictions(sms), "ceilings": sweeps.cublas_ceiling(rows), "columns": columns,
              "rows": rows}
    results.save(result, out / "hopper_matmul_wide_pick.json")
    clock = sm_clock_mhz()
    result["phases"] = {"columns": ["M", "N", "K", "kernel", "phases"],
                        "rows": [trace(e, clock["clock_mhz"]) for e in TRACED],
                        "method": "as results/*/hopper_matmul_phases.json (tools/diagnose_fixed_cost.phases)",
                        "clock": clock}
    results.save(result, out / "hopper_matmul_wide_pick.json")
    timing.log("[wide-pick] done")


if __name__ == "__main__":
    main()
