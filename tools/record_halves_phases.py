#!/usr/bin/env python3
"""Where the softmax in halves spends a row, by CTA of the cluster, against the staged kernel one width below
(about a minute on a Hopper GPU).

    bash .device/run python3 tools/record_halves_phases.py --out $OUT        # the device machine
    .venv/bin/python tools/record_halves_phases.py --out results/h200          # a GPU node

For fp32 rows of 1048576 (softmax_halves_kernel, the picked configuration) and of 524288 (softmax_staged_kernel, the
picked one), one launch of M rows with the timeline scopes compiled in (after a warm-up launch) under proton's
instrumentation backend with a buffer in global memory, its output checked against torch before its phases are kept.
The halves kernel's scopes: load (quarter 1's loads issued, the wait for quarter 0 and its read from shared memory,
the next row's quarter 0 by TMA, the wait for the second half, its max read from shared memory, the wait for quarter
1), local (exp of both halves, the second written back, the sums), exchange, store (the second half from shared
memory, the next row's second half by TMA, the first half from registers). The staged kernel's:
load (the wait for the staged row, its read, the next row's TMA), local, exchange, store. Writes
``softmax_halves_phases.json`` (median, min and max of every scope in every CTA rank, over the warps and rows of that
rank, and the plain kernel's GB/s over TIMED_ROWS rows, timed without scopes).
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from record_softmax_phases import save_phases, start, traced_and_timed  # noqa: E402
from record_timelines import say  # noqa: E402

from multicta_kernels import softmax as sm  # noqa: E402
from multicta_kernels.measure import traces as tl  # noqa: E402

CASES = [(1048576, "halves"), (524288, "staged")]
M, TIMED_ROWS = 256, 2048      # 2048 rows of 1048576: 8 GiB each way (torch's float64 check needs 16 more)
BUFFER = 65536      # bytes of proton buffer a CTA: every record of every warp (16 warps x ~37 rows x 4 scopes x 16 bytes)
COLUMNS = ["N", "exchange", "config", "gbps_2048_rows", "rank", "scope", "count", "median_ns", "min_ns", "max_ns"]


def main(argv=None) -> None:
    import triton.profiler as proton
    out, env, clock = start("record_halves_phases", __doc__, argv)
    rows = []
    for N, exchange in CASES:
        cfg = sm.pick_config(N)
        if cfg.exchange != exchange:
            raise SystemExit(f"pick_config({N}) is not the {exchange} kernel: {cfg}")
        config = f"{cfg.num_ctas} CTAs x {cfg.num_warps} warps"
        tr, gbps = traced_and_timed(cfg, M, f"{exchange}_{N}", f"/tmp/{exchange}_phases", clock, TIMED_ROWS,
                                    proton.mode.Default(buffer_type="global", buffer_size=BUFFER))
        mine = [[N, exchange, config, gbps] + [r[k] for k in COLUMNS[4:]] for r in tl.summary(tr, by=("rank",))]
        rows += mine
        say(f"{exchange} {N}: {config}, {gbps} GB/s; rank 0 "
            + ", ".join(f"{r[5]} {r[7]:.0f} (x{r[6]})" for r in mine if r[4] == 0) + " ns")
    save_phases(out / "softmax_halves_phases.json", "timeline-softmax-halves-phases", env, clock, rows, COLUMNS,
                command="python3 tools/record_halves_phases.py --out <dir>",
                timer="proton intra-kernel instrumentation (per-warp cycle counters) for the phases; the plain kernel "
                      f"timed by measure.timing.time_ms (no CUDA graph) for gbps_{TIMED_ROWS}_rows",
                statistic=f"median, min and max, per CTA rank, over the warps and the {M} rows of each timeline scope",
                count=f"count: warps x rows of that rank's programs (a {BUFFER}-byte proton buffer a CTA in global "
                      "memory)")


if __name__ == "__main__":
    main()
