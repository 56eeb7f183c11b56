#!/usr/bin/env python3
"""Where the pipelined softmax's time goes, by CTA of the cluster: fp16 against bf16, 262144 against 200000
(about a minute on a Hopper GPU).

    bash .device/run python3 tools/record_pipelined_phases.py --out $OUT        # the device machine
    .venv/bin/python tools/record_pipelined_phases.py --out results/h200          # a GPU node

For each (dtype, width), at the configuration the half sweep picked (softmax_pipelined_kernel), one launch of
M rows with the timeline scopes compiled in (after a warm-up launch) under proton's instrumentation backend,
its output checked against torch before its phases are kept. In the pipelined kernel the "local" scope starts
with the wait for the block's loads (issued one block earlier), so a long "local" is memory not yet arrived.
Writes ``softmax_pipelined_phases.json`` (median, min and max of every scope in every CTA rank, over the warps
and rows of that rank, and the plain kernel's GB/s over 8192 rows, timed without scopes) and the 262144-wide
traces ``timeline_softmax_pipelined_<dtype>.json`` (two clusters kept).
"""
import collections
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from record_softmax_phases import save_phases, save_trace, start, traced_and_timed  # noqa: E402
from record_timelines import say  # noqa: E402

from multicta_kernels import softmax as sm  # noqa: E402
from multicta_kernels.measure import traces as tl  # noqa: E402

CASES = [("float16", 262144), ("bfloat16", 262144), ("float16", 200000), ("bfloat16", 200000)]
M, TIMED_ROWS = 512, 8192
BUFFER = 16384      # bytes of proton buffer a CTA: every record of every warp (4 warps x ~37 blocks x 6 x 8 bytes)
COLUMNS = ["dtype", "N", "config", "gbps_8192_rows", "rank", "scope", "count", "median_ns", "min_ns", "max_ns"]


def full_buffer():
    """Proton's default mode with a buffer in global memory of BUFFER bytes a CTA: the shared-memory one is sized from
    what the kernel leaves free and kept 16 records a warp here, the last ones."""
    import triton.profiler as proton
    return proton.mode.Default(buffer_type="global", buffer_size=BUFFER)


def check_every_block_kept(trace) -> None:
    """Refuse a trace whose buffer dropped intervals: every warp of program c must hold one local step per block it
    walked (rows c, c + P, ... below M, in pairs: a last pair may end past M)."""
    recs = trace.records()
    programs = len({r["cluster"] for r in recs})
    got = collections.Counter((r["cluster"], r["rank"], r["warp"]) for r in recs if r["scope"] == "local")
    short = {k: n for k, n in got.items() if n != 2 * math.ceil(len(range(k[0], M, programs)) / 2)}
    if short:
        raise SystemExit(f"proton kept fewer local steps than blocks walked for {len(short)} warps "
                         f"(e.g. {next(iter(short.items()))}): raise BUFFER")


def main(argv=None) -> None:
    out, env, clock = start("record_pipelined_phases", __doc__, argv)
    rows = []
    for dtype, N in CASES:
        cfg = sm.pick_config(N, dtype)
        if cfg.exchange != "pipelined":
            raise SystemExit(f"pick_config({N}, {dtype!r}) is not the pipelined kernel: {cfg}")
        config = f"{cfg.num_ctas} CTAs x {cfg.num_warps} warps, block_m {cfg.block_m}"
        tr, gbps = traced_and_timed(cfg, M, f"pipelined_{dtype}_{N}", "/tmp/pipelined_phases", clock, TIMED_ROWS,
                                    full_buffer())
        check_every_block_kept(tr)
        mine = [[dtype, N, config, gbps] + [r[k] for k in COLUMNS[4:]] for r in tl.summary(tr, by=("rank",))]
        rows += mine
        say(f"{dtype} {N}: {config}, {gbps} GB/s; rank 0 " + ", ".join(f"{r[5]} {r[7]:.0f}" for r in mine if r[4] == 0)
            + f"; rank {cfg.num_ctas - 1} " + ", ".join(f"{r[5]} {r[7]:.0f}" for r in mine
                                                       if r[4] == cfg.num_ctas - 1) + " ns")
        if N == 262144:
            save_trace(tr, out / f"timeline_softmax_pipelined_{dtype}.json", env, clock,
                       f"softmax_pipelined_kernel, {M} x {N} {dtype}, picked configuration {config}")
    save_phases(out / "softmax_pipelined_phases.json", "timeline-softmax-pipelined-phases", env, clock, rows, COLUMNS,
                command="python3 tools/record_pipelined_phases.py --out <dir>",
                statistic=f"median, min and max, per CTA rank, over the warps and the {M} rows of each timeline scope "
                          "of softmax_pipelined_kernel: local (the wait for this block's loads, the next block's load "
                          "issue, max, exp, sum in the CTA), exchange (the one-round exchange through this block's "
                          "slot), store (issue)",
                count=f"count: warps x blocks of that rank's programs; every interval of the launch kept (a {BUFFER}-"
                      "byte proton buffer a CTA in global memory; the recorder refuses a trace that dropped any)")

if __name__ == "__main__":
    main()
