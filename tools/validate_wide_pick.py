#!/usr/bin/env python3
"""The wide-tile pick on shapes it was not fitted to (issue 27). ``benchmarks.hopper_matmul.pick_extra`` takes
tiles of two accumulators where the rounds model (``wide_tiles.rounds_cycles``, fitted to the eight shapes of
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
from multicta_kernels.benchmarks import hopper_matmul as hmb  # noqa: E402
from multicta_kernels.core import hardware  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing  # noqa: E402

HELD_OUT = [(768, 3072, 4096), (1024, 2304, 2048), (1280, 2048, 4096), (2304, 1024, 2048), (1024, 3072, 4096),
            (1792, 1536, 2048), (3584, 6144, 2048), (2304, 8192, 4096), (1536, 8192, 4096), (2304, 3072, 2048)]
TRACED = [32]
# A second set, chosen after the first was measured, to test one change of the rule on shapes that neither set nor
# explore_wide_tiles measured: among the widths with the fewest rounds, take the widest (at 2304 x 1024 x 2048 the
# rule took 128 x 160, 126 tiles in one round, at 370 TFLOP/s where 128 x 192, 108 tiles in one round, made 422).
# At each of these shapes the two rules take different widths.
TIE_BREAK = [(384, 6144, 2048), (512, 5120, 4096), (640, 3840, 2048), (896, 2560, 4096), (1152, 2048, 2048),
             (1664, 1536, 4096), (2048, 1280, 2048), (3072, 768, 4096)]
# A third set, for the gate: pick_extra asks the model only where hopper_matmul's pick is the default kernel. Here the
# pick is the ping-pong and the model, without the gate, takes a width (eight shapes no run measured, the three widths
# each at least twice). Set down before it ran: the gate goes if that width makes 1.05x the pick's TFLOP/s or more
# at six of the eight and less than 0.97x at none; otherwise it stays.
GATE = [(256, 7168, 2048), (384, 5632, 2048), (768, 1536, 4096), (1792, 1024, 2048), (1280, 4096, 4096),
        (2432, 2048, 4096), (512, 10752, 4096), (2944, 3072, 2048)]
SETS = {"held-out": (HELD_OUT, "hopper_matmul_wide_pick.json"),
        "tie-break": (TIE_BREAK, "hopper_matmul_wide_tiebreak.json"),
        "gate": (GATE, "hopper_matmul_wide_gate.json")}


def widest_of_fewest_rounds(M: int, N: int, K: int, sms: int) -> int | None:
    """The changed rule: the widest of the widths with the fewest rounds, where its rounds_cycles are at most
    WIDE_GAIN of the default kernel's, and only where hopper_matmul's pick is the default kernel."""
    if hm.pick_config(K, M, N, sms):
        return None
    rounds = {e: -(-wt.tiles(M, N, e) // sms) for e in wt.EXTRAS}
    e = max(x for x in wt.EXTRAS if rounds[x] == min(rounds.values()))
    return e if wt.rounds_cycles(M, N, K, sms, e) <= wt.WIDE_GAIN * wt.rounds_cycles(M, N, K, sms) else None


def variants():
    from explore_wide_tiles import WIDE
    out = {"picked": lambda a, b, c: hm.prepare(a, b, c), "with wide": lambda a, b, c: hmb.prepare_picked(a, b, c)}
    out.update({n: (lambda a, b, c, e=e: wt.prepare(a, b, c, extra=e)) for n, e in WIDE.items()})
    return out


def predictions(sms: int, shapes=HELD_OUT) -> dict:
    """shape -> the rule's width (None: the pick), the changed rule's, and each width's predicted share of the
    default kernel's time."""
    return {f"{M}x{N}x{K}": {"extra": hmb.pick_extra(M, N, K, sms),
                             **({"widest_of_fewest_rounds": widest_of_fewest_rounds(M, N, K, sms)}
                                if shapes is TIE_BREAK else {}),
                             **({"without_the_gate": wt.best_extra(M, N, K, sms)} if shapes is GATE else {}),
                             "predicted_share": {e: round(wt.rounds_cycles(M, N, K, sms, e)
                                                          / wt.rounds_cycles(M, N, K, sms), 4) for e in wt.EXTRAS}}
            for M, N, K in shapes}


def main():
    from explore_wide_tiles import WIDE, traced_phases
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", choices=SETS, default="held-out", help="the shapes (default: %(default)s)")
    args = ap.parse_args()
    shapes, name = SETS[args.set]
    require_or_exit("validate_wide_pick", WGMMA)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    sms = hardware.device().sms
    columns, rows = sweeps.matmul_sweep(variants(), shapes, timing.log, "wide-pick")
    result = {"benchmark": "hopper-matmul-wide-pick", **env,
              "method": sweeps.matmul_method(
                  "float16", {"picked": {}, "with wide": {"rule": "benchmarks.hopper_matmul.pick_extra"},
                              **{n: {"extra": e} for n, e in WIDE.items()}},
                  defaults=hm.CONFIG, launch="prepare(): the timer sees launches only",
                  rule={"step_cycles": wt.STEP_CYCLES, "default_step_cycles": wt.DEFAULT_STEP_CYCLES,
                        "wide_gain": wt.WIDE_GAIN}),
              "set": args.set, "predictions": predictions(sms, shapes), "ceilings": sweeps.cublas_ceiling(rows),
              "columns": columns, "rows": rows}
    results.save(result, out / name)
    if args.set != "held-out":
        return timing.log("[wide-pick] done")
    result["phases"] = traced_phases(TRACED)
    results.save(result, out / "hopper_matmul_wide_pick.json")
    timing.log("[wide-pick] done")


if __name__ == "__main__":
    main()
