#!/usr/bin/env python3
"""Record measured warp timelines (issue 18) on a Hopper or Blackwell GPU; about a minute.

From the repository root, on the device machine (Python 3.12, the triton 3.9 bundle with proton)::

    bash .device/run python3 tools/record_timelines.py --out $OUT

or on a GPU node with the book's environment::

    .venv/bin/python tools/record_timelines.py --out results/h200

Writes into --out (results: ``multicta_kernels.results.load`` and ``measure.traces.load`` read them)::

    timeline_center_rows_1cta.json   one launch of center_rows_kernel, 1 CTA per cluster: 4 clusters kept
    timeline_center_rows_2cta.json   the same at 2 CTAs per cluster
    timeline_tma_handoff.json        the warp-specialised TMA hand-off, with its cross-partition events
    timeline_overhead.json           each kernel's time without and with scopes (prepared launches)
    raw/*.chrome_trace.gz            proton's whole traces (open in Perfetto or chrome://tracing)

Progress goes to stdout, one line per step. Nothing here is timed under proton: an instrumented
launch synchronises and parses its buffer on the host, so overhead is timed on prepared launches.
"""
import argparse
import gzip
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from multicta_kernels import results  # noqa: E402
from multicta_kernels.measure import timing  # noqa: E402
from multicta_kernels.measure import trace_demos, traces as tl  # noqa: E402
from multicta_kernels.core.hardware import CLUSTERS, require_or_exit  # noqa: E402

T0 = time.time()


def say(msg: str) -> None:
    print(f"[timelines {time.time() - T0:5.1f}s] {msg}", flush=True)


def sm_clock_mhz() -> dict:
    """The SM clock while the GPU is busy (nvidia-smi samples taken during 1 s of device copies),
    the maximum clock, and the clock the driver reports; the traces convert cycles with the first."""
    import torch
    import triton
    dev = triton.runtime.driver.active.get_current_device()
    reported = triton.runtime.driver.active.utils.get_device_properties(dev)["sm_clock_rate"] / 1000
    samples, maximum = [], None
    try:
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv,noheader,nounits",
                                "-i", "0", "-lms", "100"], stdout=subprocess.PIPE, text=True)
    except OSError:
        smi = None
    lines = []
    if smi is not None:
        reader = threading.Thread(target=lambda: lines.extend(smi.stdout), daemon=True)
        reader.start()
    a = torch.empty(1 << 28, device="cuda")
    b = torch.empty_like(a)
    t = time.time()
    while time.time() - t < 1.0:
        for _ in range(50):
            b.copy_(a)
        torch.cuda.synchronize()
    if smi is not None:
        smi.terminate()
        smi.wait(timeout=10)
        reader.join(timeout=5)
        for line in lines:
            try:
                now, top = (float(v) for v in line.split(","))
            except ValueError:
                continue
            samples.append(now)
            maximum = top
    del a, b
    busy = max(samples) if samples else reported
    return {"clock_mhz": busy, "max_clock_mhz": maximum, "reported_clock_mhz": reported,
            "how": "max of nvidia-smi clocks.sm samples (100 ms apart) during 1 s of device copies"
            if samples else "CU_DEVICE_ATTRIBUTE_CLOCK_RATE (nvidia-smi unavailable)"}


def keep_raw(trace_dir: Path, out: Path, name: str) -> None:
    src = trace_dir / f"{name}.chrome_trace"
    (out / "raw").mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as f, gzip.open(out / "raw" / f"{name}.chrome_trace.gz", "wb") as g:
        shutil.copyfileobj(f, g)


def report(tr, name: str) -> None:
    say(f"{name}: {len(tr)} intervals, clock check from %globaltimer {tr.meta['clock_estimate_mhz']} MHz")
    for row in tl.summary(tr):
        say(f"  {row['partition']:>8} {row['scope']:<14} {row['kind']:<5} n={row['count']:<5} "
            f"median {row['median_ns']:8.1f} ns  (min {row['min_ns']:.1f}, max {row['max_ns']:.1f})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the results (e.g. $OUT or results/h200)")
    ap.add_argument("--rows", type=int, default=256, help="rows of the center_rows demo = clusters launched")
    ap.add_argument("--keep", type=int, default=4, help="clusters kept in each saved result")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace_dir = out / "raw"

    import torch
    require_or_exit("record_timelines", CLUSTERS)
    env = results.environment()
    say(f"{env['gpu']} (sm_{env['capability'][0]}{env['capability'][1]}), triton {env['triton']}, "
        f"torch {env['torch']}, driver {env['driver']}")
    clock = sm_clock_mhz()
    say(f"SM clock {clock['clock_mhz']} MHz ({clock['how']}); max {clock['max_clock_mhz']}, "
        f"reported {clock['reported_clock_mhz']}")
    method = {"clock": clock, "warmup_launches": 1}
    torch.manual_seed(0)

    # 1. center_rows at 1 and 2 CTAs per cluster: the row's sum crosses CTAs at 2
    x = torch.randn(args.rows, 1024, device="cuda")
    want = x - x.mean(1, keepdim=True)
    for n in (1, 2):
        name = f"center_rows_{n}cta"
        out_t = torch.full_like(x, float("nan"))
        tr = tl.record(lambda: trace_demos.center_rows(x, out_t, num_ctas=n, instrument=True), name, folder=trace_dir,
                       num_ctas=n, clock_mhz=clock["clock_mhz"])
        torch.testing.assert_close(out_t, want, atol=1e-5, rtol=1e-5)
        report(tr, name)
        keep_raw(trace_dir, out, name)
        path = tl.save(tl.trim(tr, clusters=args.keep), out / f"timeline_{name}.json", env,
                       benchmark=f"timeline-{name}",
                       method=dict(method, kernel=f"center_rows_kernel, {args.rows} x 1024 fp32, {n} CTA(s) "
                                                  "per cluster, 4 warps", kept=f"clusters 0-{args.keep - 1}"))
        say(f"wrote {path}")

    # 2. the warp-specialised TMA hand-off: scopes in both partitions, events across them
    h = trace_demos.HANDOFF
    programs = 128
    xh = torch.randn(programs * h["tiles"] * h["rows"], h["cols"], device="cuda", dtype=torch.float16)
    want_h = xh.float().view(programs, -1).sum(1)
    owner = tl.placed_partitions(trace_demos.handoff_spec(False), h["names"])
    out_h = torch.full((programs,), float("nan"), device="cuda")
    tr = tl.record(lambda: trace_demos.tma_handoff(xh, out_h, instrument=True), "tma_handoff", folder=trace_dir,
                   partitions=owner, clock_mhz=clock["clock_mhz"])
    torch.testing.assert_close(out_h, want_h, atol=1e-2, rtol=1e-3)
    report(tr, "tma_handoff")
    crossing = sum(1 for r in tr.records() if r["kind"] == "event" and r["warp"] != r["end_warp"])
    say(f"tma_handoff: {crossing} events crossed partitions (loader warps -> reducer warps)")
    keep_raw(trace_dir, out, "tma_handoff")
    path = tl.save(tl.trim(tr, clusters=args.keep), out / "timeline_tma_handoff.json", env,
                   benchmark="timeline-tma_handoff",
                   method=dict(method, kernel=f"tma_handoff_kernel, {programs} programs x {h['tiles']} TMA tiles of "
                                              f"{h['rows']}x{h['cols']} fp16; warps 0-3 reducer, 4-7 loader",
                               kept=f"programs 0-{args.keep - 1}"))
    say(f"wrote {path}")

    # 3. overhead: the same kernels without and with scopes, prepared launches, no proton session
    cases = [(f"center_rows_{n}cta", n, lambda on, n=n: trace_demos.center_rows_args(x, torch.empty_like(x), num_ctas=n,
                                                                             instrument=on))
             for n in (1, 2)]
    cases.append(("tma_handoff", 1, lambda on: trace_demos.tma_handoff_args(xh, torch.empty_like(want_h), instrument=on)))
    rows = []
    for name, n, build in cases:
        times = []
        for on in (False, True):
            spec, grid, kargs = build(on)
            launch = tl.prepare(spec, grid, kargs)
            launch()
            torch.cuda.synchronize()
            got = kargs[1]
            torch.testing.assert_close(got, want if name.startswith("center") else want_h,
                                       atol=1e-5 if name.startswith("center") else 1e-2, rtol=1e-3)
            times.append(timing.time_ms(launch) * 1e3)
        o = tl.overhead(times[1], times[0])
        rows.append([name, n, round(o["without"], 3), round(o["with"], 3), round(o["added"], 3), round(o["ratio"], 3)])
        say(f"overhead {name}: {o['without']:.2f} us without scopes, {o['with']:.2f} us with "
            f"(+{o['added']:.2f} us, x{o['ratio']:.2f})")
    path = results.save({"benchmark": "timeline-overhead", **env,
                       "method": {"timer": "do_bench_cudagraph", "statistic": "median",
                                  "launch": "timeline.prepare: compiled once, launched without proton; the "
                                            "instrumented build writes into a reused scratch buffer",
                                  "center_rows": f"{args.rows} x 1024 fp32", "tma_handoff": f"{programs} programs"},
                       "ceilings": {}, "columns": ["kernel", "num_ctas", "without_us", "with_us", "added_us", "ratio"],
                       "rows": rows}, out / "timeline_overhead.json")
    say(f"wrote {path}")
    for f in trace_dir.glob("*.chrome_trace"):
        f.unlink()                          # the gzipped copies stay
    say("done")


if __name__ == "__main__":
    main()
