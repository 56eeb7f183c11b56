#!/usr/bin/env python3
"""Where a wide row's time goes, fp32 against fp16: chapter 1's phase table (about a minute on a Hopper GPU).

    bash .device/run python3 tools/record_softmax_phases.py --out $OUT        # the device machine
    .venv/bin/python tools/record_softmax_phases.py --out results/h200          # a GPU node

For rows of 262144 values in fp32 and in fp16, each at its picked configuration, one launch of 128 rows with
the timeline scopes compiled in (after a warm-up launch) under proton's instrumentation backend; each output
is checked against torch before its phases are kept. Writes ``softmax_half_phases.json`` (the median, min and
max of every scope over every warp of every CTA, and the plain kernel's GB/s over 8192 rows, timed without
scopes) and ``timeline_softmax_16cta_<dtype>.json`` (the traces, two clusters kept).
"""
import argparse
from dataclasses import replace
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from record_timelines import say, sm_clock_mhz  # noqa: E402

from multicta_kernels import results, softmax as sm  # noqa: E402
from multicta_kernels.core.accuracy import assert_softmax_close  # noqa: E402
from multicta_kernels.core.hardware import CLUSTERS, require_or_exit  # noqa: E402
from multicta_kernels.measure import timing, traces as tl  # noqa: E402

N, M, TIMED_ROWS = 262144, 128, 8192
COLUMNS = ["dtype", "N", "config", "gbps_8192_rows", "scope", "count", "median_ns", "min_ns", "max_ns"]


def start(name: str, doc: str, argv=None) -> tuple:
    """A recorder's command line (``--out``), refused without a cluster GPU: (out folder, environment, SM clock)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", required=True)
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    require_or_exit(name, CLUSTERS)
    return out, results.environment(), sm_clock_mhz()


def traced_and_timed(cfg, rows: int, name: str, folder: str, clock: dict, timed_rows: int = TIMED_ROWS,
                     mode=None):
    """One instrumented launch of ``rows`` rows at ``cfg`` (after a warm-up) and its trace, then the plain kernel's
    GB/s over ``timed_rows`` rows (no scopes, no CUDA graph); each output checked against torch first. ``mode``:
    proton's instrumentation mode (default: traces.default_mode(), whose buffer keeps each warp's last records only)."""
    import torch
    dt = getattr(torch, cfg.dtype)
    x = (torch.randn(rows, cfg.N, device="cuda") * 3).to(dt)
    y = torch.full_like(x, float("nan"))
    tr = tl.record(lambda: sm.multicta_softmax(x, y, config=cfg, instrument=True), name, folder=folder,
                   num_ctas=cfg.num_ctas, clock_mhz=clock["clock_mhz"], mode=mode)
    assert_softmax_close(y, x)
    big = torch.randn(timed_rows, cfg.N, device="cuda").to(dt)
    yb = torch.full_like(big, float("nan"))
    sm.multicta_softmax(big, yb, config=cfg)
    assert_softmax_close(yb, big)                           # checked, then timed
    ms = timing.time_ms(lambda: sm.multicta_softmax(big, yb, config=cfg), cudagraph=False)
    gbps = round(2 * big.numel() * big.element_size() / ms / 1e6, 1)
    return tr, gbps


def save_trace(trace, path, env: dict, clock: dict, kernel: str) -> None:
    """Keep two clusters of a recorded trace, with its clock and what ran."""
    tl.save(tl.trim(trace, clusters=2), path, env, benchmark=f"timeline-{path.stem.removeprefix('timeline_')}",
            method={"clock": clock, "warmup_launches": 1, "kernel": kernel})


def save_phases(path, benchmark: str, env: dict, clock: dict, rows: list, columns: list, **method) -> None:
    """Write a phase table with the method every recorder here shares (timer, clock, what was checked) and its own."""
    result = {"benchmark": benchmark, **env,
              "method": {"timer": "proton intra-kernel instrumentation (per-warp cycle counters) for the phases; "
                                  f"the plain kernel timed by measure.timing.time_ms (no CUDA graph) for "
                                  f"gbps_{TIMED_ROWS}_rows",
                         **method, "clock": clock,
                         "checked": "each instrumented launch's output, and the timed kernel's, against torch "
                                    "(assert_softmax_close) before anything was kept"},
              "ceilings": {}, "columns": columns, "rows": rows}
    say(f"wrote {results.save(result, path)}")


def save_timed(path, benchmark: str, env: dict, clock: dict, copy_gbps: float, rows: list, columns: list,
               **method) -> None:
    """Write a table of timed kernels with what every timing recorder here shares (the timer, the clock, the copy
    ceiling measured in the same run) and its own ``method`` entries (``command``, ``data``, ``checked``, ...)."""
    result = {"benchmark": benchmark, **env,
              "method": {**method, "timer": method.get("timer", "measure.timing.time_ms (do_bench_cudagraph, median "
                                                              "of each measurement)"), "clock": clock},
              "ceilings": {"copy_gbps": round(copy_gbps, 1)}, "columns": columns, "rows": rows}
    say(f"wrote {results.save(result, path)}")


def main(argv=None) -> None:
    out, env, clock = start("record_softmax_phases", __doc__, argv)
    rows = []
    for dtype in ("float32", "float16"):
        cfg = replace(sm.pick_config(N, dtype), exchange="one_round")   # the one-round kernel, whatever is picked now
        config = f"{cfg.num_ctas} CTAs x {cfg.num_warps} warps, block_m {cfg.block_m}"
        tr, gbps = traced_and_timed(cfg, M, f"softmax_{dtype}", "/tmp/softmax_phases", clock)
        for r in tl.summary(tr):
            rows.append([dtype, N, config, gbps, r["scope"], r["count"], r["median_ns"], r["min_ns"], r["max_ns"]])
        say(f"{dtype}: {config}, {gbps} GB/s; " + ", ".join(f"{r[4]} {r[6]:.0f} ns" for r in rows if r[0] == dtype))
        save_trace(tr, out / f"timeline_softmax_16cta_{dtype}.json", env, clock,
                   f"softmax, {M} x {N} {dtype}, picked configuration {config}")
    save_phases(out / "softmax_half_phases.json", "timeline-softmax-half-phases", env, clock, rows, COLUMNS,
                command="python3 tools/record_softmax_phases.py --out <dir>",
                statistic=f"median, min and max over every warp of every CTA of {M} rows (count: warps x rows) of each "
                          "timeline scope of softmax_one_round_kernel: load (issue, and for fp16 the conversion, which "
                          "waits for the data), local (max, exp, sum in the CTA), exchange (the one-round (max, sum) "
                          "exchange), store (issue)",
                traces="timeline_softmax_16cta_float32.json and timeline_softmax_16cta_float16.json: the same "
                       "launches, 2 clusters kept")

if __name__ == "__main__":
    main()
