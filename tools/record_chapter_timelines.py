#!/usr/bin/env python3
"""Record the chapters' measured warp timelines on a Hopper GPU (issue 18); about a minute.

    bash .device/run python3 tools/record_chapter_timelines.py --out $OUT        # the device machine
    .venv/bin/python tools/record_chapter_timelines.py --out results/h200          # a GPU node

The book's own kernels carry timeline scopes behind a constexpr flag (no code unless proton
records): chapter 1's softmax at 2 and 16 CTAs per cluster, chapter 2's ping-pong rounds, chapter 3's
multicast ring with each release, chapter 6's warp-specialised matmul at K = 512 and K = 4096 and its
ping-pong variant. Each trace is checked (the kernel's output against torch), trimmed to a few
clusters and saved as ``timeline_<name>.json``; ``timeline_chapters_overhead.json`` holds each kernel's
time with and without its scopes (prepared launches, no proton session).
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from record_timelines import say, sm_clock_mhz  # noqa: E402

from multicta_kernels import barriers, hopper_matmul as hm, multicast as mc, results, softmax as sm  # noqa: E402
from multicta_kernels.core.accuracy import assert_matmul_close, assert_softmax_close  # noqa: E402
from multicta_kernels.core.hardware import CLUSTERS, WGMMA, require_or_exit  # noqa: E402
from multicta_kernels.gluon import matmul  # noqa: E402
from multicta_kernels.gluon.operands import gl_dtype  # noqa: E402
from multicta_kernels.measure import timing, traces as tl  # noqa: E402


def by_name(spec, **runtime):
    """A prepared launch's arguments, in the kernel's order: the runtime ones, then the spec's constexprs."""
    values = {**runtime, **spec.constexprs}
    return [values[n] for n in spec.fn.arg_names]


def save(tr, name, out, env, method, keep):
    path = tl.save(tl.trim(tr, clusters=keep), out / f"timeline_{name}.json", env, benchmark=f"timeline-{name}",
                   method=method)
    say(f"wrote {path.name}: " + "; ".join(f"{r['partition']}/{r['scope']} median {r['median_ns']:.0f} ns"
                                           for r in tl.summary(tr)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--keep", type=int, default=2, help="clusters kept in each saved result")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    require_or_exit("record_chapter_timelines", CLUSTERS, WGMMA)     # chapters 1-3 and chapter 6's wgmma matmul
    env = results.environment()
    clock = sm_clock_mhz()
    say(f"{env['gpu']}, SM clock {clock['clock_mhz']} MHz")
    base = {"clock": clock, "warmup_launches": 1}
    raw = Path("/tmp/chapter_traces")
    overhead = []

    # chapter 1: the softmax, 2 and 16 CTAs per cluster (wide rows, 128 values per thread)
    for ctas, warps, N, M in ((2, 8, 65536, 256), (16, 4, 262144, 128)):
        x = torch.randn(M, N, device="cuda") * 3
        y = torch.full_like(x, float("nan"))
        cfg = sm.make_config(N, ctas, warps, 1)
        tr = tl.record(lambda: sm.multicta_softmax(x, y, config=cfg, instrument=True), f"softmax_{ctas}cta",
                       folder=raw, num_ctas=ctas, clock_mhz=clock["clock_mhz"])
        assert_softmax_close(y, x)
        save(tr, f"softmax_{ctas}cta", out, env, dict(base, kernel=f"softmax_kernel, {M} x {N} fp32, {ctas} CTAs x "
                                                                   f"{warps} warps per cluster"), args.keep)
        spec = {on: sm.softmax_spec(num_ctas=ctas, N=N, num_warps=warps, block_m=1, instrument=on) for on in (0, 1)}
        kargs = lambda s, x=x, y=y, M=M, N=N: by_name(s, x_ptr=x, out_ptr=y, M=M, n_div=N // 4,   # noqa: E731
                                                      x_stride_div=N // 4, out_stride_div=N // 4)
        overhead.append((f"softmax {ctas} CTAs", spec, (M,), kargs))

    # chapter 2: ping-pong rounds, 4 CTAs
    tr = tl.record(lambda: barriers.ping_pong(4, 16, instrument=True), "ping_pong_4cta", folder=raw, num_ctas=4,
                   clock_mhz=clock["clock_mhz"])
    errors = barriers.ping_pong(4, 16)
    assert errors.tolist() == [0] * 4
    save(tr, "ping_pong_4cta", out, env, dict(base, kernel="ping_pong_kernel, 4 CTAs, 16 rounds, 1 warp per CTA"), 1)

    # chapter 3: the multicast ring, 4 CTAs, each release
    for release in ("cluster", "mbarrier"):
        launch, _ = mc.tile_stream(4, multicast=True, release=release, clusters=32, tiles=32, instrument=True)
        tr = tl.record(launch, f"tile_stream_{release}", folder=raw, num_ctas=4, clock_mhz=clock["clock_mhz"])
        assert launch().tolist() == [32] * 32
        save(tr, f"tile_stream_{release}", out, env,
             dict(base, kernel=f"tile_stream_kernel, 4 CTAs, multicast, release={release}, 32 clusters x 32 tiles"),
             args.keep)

    # chapter 6: the warp-specialised matmul, one CTA per cluster, and its ping-pong variant
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for name, cfg, K in (("hopper_matmul_k512", {}, 512), ("hopper_matmul_k4096", {}, 4096),
                         ("hopper_matmul_pingpong_k512", hm.VARIANTS["ping-pong"], 512)):
        a = torch.randn(8192, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, 8192, device="cuda", dtype=torch.float16)
        c = torch.full((8192, 8192), float("nan"), device="cuda", dtype=torch.float16)
        names = ["producer", "consumer0", "consumer1"] if cfg.get("consumers", 1) == 2 else ["consumer", "producer"]
        owner = tl.placed_partitions(hm.hopper_matmul_spec(**cfg), names)
        tr = tl.record(lambda: hm.hopper_matmul(a, b, out=c, **cfg, instrument=True), name, folder=raw,
                       partitions=owner, clock_mhz=clock["clock_mhz"])
        assert_matmul_close(c, a, b, name)
        save(tr, name, out, env, dict(base, kernel=f"hopper_matmul_kernel 8192 x 8192 x {K} fp16, {cfg or 'CONFIG'}; "
                                                   f"{sms} persistent CTAs"), args.keep)
        call = matmul.prepare_matmul(a, b, c, hm.plan(8192, 8192, K, gl_dtype(a), **cfg), WGMMA, "hopper_matmul")
        spec = {on: hm.hopper_matmul_spec(**cfg, instrument=bool(on)) for on in (0, 1)}
        kargs = lambda s, call=call: by_name(s, a_desc=call.a_desc, b_desc=call.b_desc,   # noqa: E731
                                             c_desc=call.c_desc, M=call.M, N=call.N, K=call.K)
        overhead.append((name, spec, (sms,), kargs))

    rows = []
    for name, spec, grid, kargs in overhead:
        times = []
        for on in (0, 1):
            launch = tl.prepare(spec[on], grid, kargs(spec[on]))
            launch()
            torch.cuda.synchronize()
            times.append(timing.time_ms(launch, cudagraph=False) * 1e3)
        o = tl.overhead(times[1], times[0])
        rows.append([name, round(o["without"], 2), round(o["with"], 2), round(o["added"], 2), round(o["ratio"], 3)])
        say(f"overhead {name}: {o['without']:.1f} us without scopes, {o['with']:.1f} us with (x{o['ratio']:.3f})")
    results.save({"benchmark": "timeline-chapters-overhead", **env,
                "method": {"timer": "do_bench", "statistic": "median",
                           "launch": "timeline.prepare: compiled once with and without proton's passes, launched "
                                     "without a session"},
                "ceilings": {}, "columns": ["kernel", "without_us", "with_us", "added_us", "ratio"], "rows": rows},
               out / "timeline_chapters_overhead.json")
    say("done")


if __name__ == "__main__":
    main()
