#!/usr/bin/env python3
"""Tall tiles (issue 27): 192 x 128 output tiles of three warpgroups (``wide_tiles.tall_matmul_kernel``), where the
SM count wants a tile between 128 x 128 and 128 x 256 and the wide tiles' narrow second wgmma costs more than its
FLOPs (results/h100/hopper_matmul_wide_regs.json). Each warpgroup issues m64n128k16 only, so no wgmma is narrow.

Set down before this ran (from first principles, not fitted):
  1. a tall K step (192 x 128 x 64) takes the tensor cores' 2 * 192 * 128 * 64 / 4096 = 768 SM cycles, as the
     default kernel's 128 x 256 x 64 step takes its 1024: so at 8192 x 8192 x 4096 (many rounds, little fill) the
     tall kernel makes at least 0.95x the default kernel's TFLOP/s;
  2. by the rounds model with 768-cycle steps, tall tiles make at least 1.10x the 128 x 144 tile at 1536^3
     (predicted 21048 / 18432 = 1.14x) and reach 0.9 of the better baseline there;
  3. the narrow wgmma's cost is its instruction, not its neighbour: alone, one m64n16k16 after another (mma_peak,
     one CTA of two warpgroups per SM) costs at least 30 SM cycles, where its FLOPs need 8 (the chapter's reading:
     46, from 877 - 512 cycles over eight of them).
Tall tiles enter the pick only if 1 and 2 hold; then where the model predicts them at most WIDE_GAIN of the
current rule's kernel, at these shapes and at shapes no run measured.

Measured (H100, 2026-12-07, results/h100/hopper_matmul_tall_tiles.json): 1 holds (0.97x at 8192 x 8192 x 4096);
2 fails (1536^3: 391.9 against the 128 x 144 rule's 393.9, 0.995x, and 0.84 of torch.matmul's 466.0); 3 fails
(21.3 SM cycles an m64n16k16). So tall tiles stay out of the pick. They do win where the model did not look for
them (3072^3: 702.3 against the pick's 635.8; 3584 x 6144 x 2048 and 2944 x 3072 x 2048), and lose badly where
their tile count leaves a partial wave (1024 x 3072 x 4096: 376.7 against 626.2): a new rule needs a new model and
new held-out shapes, not this record.

Here: the wgmma rates (mma_peak at N = 16 ... 256, and 64 x 128 at two and three CTAs per SM: three warpgroups of
m64n128k16 on one SM), then at the shapes of tools/explore_wide_tiles.py, tools/validate_wide_pick.py's held-out
and gate sets and 2048^3: the pick, the current rule (prepare_picked) and tall tiles, with cuBLAS and torch.matmul
in the same interleaved passes, every output checked before it is timed (``sweeps.matmul_sweep``). About three
minutes.

    bash .device/run python3 tools/explore_tall_tiles.py --out $OUT
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from multicta_kernels import hopper_matmul as hm, results, wide_tiles as wt  # noqa: E402
from multicta_kernels.benchmarks import hopper_matmul as hmb  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import sweeps, timing  # noqa: E402

import explore_wide_tiles as ew  # noqa: E402
import validate_wide_pick as vw  # noqa: E402

SHAPES = ew.SHAPES + vw.HELD_OUT + vw.GATE + [(2048, 2048, 2048)]
# (block_m, block_n, CTAs per SM): the ceiling, every narrow width, and three warpgroups of 64 x 128 on one SM
RATES = [(128, 256, 1), (128, 128, 1), (128, 64, 1), (128, 32, 1), (128, 16, 1), (128, 16, 2), (64, 128, 2),
         (64, 128, 3)]


def variants():
    return {"picked": lambda a, b, c: hm.prepare(a, b, c), "with wide": lambda a, b, c: hmb.prepare_picked(a, b, c),
            "tall 192x128": lambda a, b, c: wt.prepare_tall(a, b, c)}


def wgmma_rates(clock_mhz: float) -> dict:
    """TFLOP/s of mma_peak at each of RATES, and the SM cycles per m64nNk16 instruction at ``clock_mhz`` (every
    warpgroup of the SM counted: its instructions share the SM's tensor cores)."""
    import torch
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for bm, bn, per in RATES:
        tflops = hmb.mma_peak_tflops(block_m=bm, block_n=bn, ctas_per_sm=per)
        flop = 2 * 64 * bn * 16                             # one m64nNk16
        cycles = flop * sms * clock_mhz * 1e6 / (tflops * 1e12)
        rows.append([bm, bn, per, (bm // 64) * per, round(tflops, 1), round(cycles, 1), bn / 2])
        timing.log(f"[tall-tiles] wgmma {bm}x{bn}, {per} CTA/SM: {tflops:.0f} TFLOP/s, {cycles:.1f} cycles an "
                   f"m64n{bn}k16 (its FLOPs: {bn / 2:.0f})")
    return {"columns": ["block_m", "block_n", "ctas_per_sm", "warpgroups_per_sm", "tflops",
                        "sm_cycles_per_instruction", "flop_cycles_per_instruction"], "rows": rows,
            "method": "mma_peak_kernel (ITERS wgmmas on operands in shared memory, wait_group 1 after each), "
                      "cycles = FLOPs of one instruction x SMs x clock / TFLOP/s; flop cycles at 4096 FLOP a cycle"}


def main():
    from record_timelines import sm_clock_mhz
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="two shapes, the rates")
    args = ap.parse_args()
    require_or_exit("explore_tall_tiles", WGMMA)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    clock = sm_clock_mhz()
    result = {"benchmark": "hopper-matmul-tall-tiles", **env, "clock": clock,
              "wgmma_rates": wgmma_rates(clock["clock_mhz"])}
    columns, rows = sweeps.matmul_sweep(variants(), SHAPES[:2] if args.quick else SHAPES, timing.log, "tall-tiles")
    result.update({"method": sweeps.matmul_method("float16", {"picked": {}, "with wide": {"rule": "prepare_picked"},
                                                              "tall 192x128": {"kernel": "tall_matmul_kernel"}},
                                                  defaults=hm.CONFIG, launch="prepare(): the timer sees launches only"),
                   "ceilings": sweeps.cublas_ceiling(rows), "columns": columns, "rows": rows})
    results.save(result, out / "hopper_matmul_tall_tiles.json")
    timing.log("[tall-tiles] done")


if __name__ == "__main__":
    main()
