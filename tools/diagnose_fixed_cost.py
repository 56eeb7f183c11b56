#!/usr/bin/env python3
"""Where the matmul's gap to cuBLAS goes at the shapes where it is behind (issue 27): a fixed cost a launch pays
whatever K is, or a rate it pays per K step. At each (M, N) the configuration the pick uses at its held-out K is held
fixed while K runs from 64 to 4096, with cuBLAS and torch.matmul timed in the same interleaved passes; a straight
line t = t0 + K * per_k fitted to each series splits the time. An empty Triton kernel gives the timer's floor. Then
one launch at 1536^3 is recorded with the kernel's timeline scopes (proton) and split per CTA into its phases: the
start, the wait for the first stage, the main loop and the epilogue. Every output is checked against torch before it
is timed; about three minutes.

    bash .device/run python3 tools/diagnose_fixed_cost.py --out $OUT
"""
import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from multicta_kernels import hopper_matmul as hm, results  # noqa: E402
from multicta_kernels.benchmarks.hopper_matmul import pick_label  # noqa: E402
from multicta_kernels.core.accuracy import assert_matmul_close  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402
from multicta_kernels.measure import timing, traces as tl  # noqa: E402
from multicta_kernels.measure.ceilings import Cublas  # noqa: E402

# (M, N, the held-out K whose pick is held fixed): the shapes of results/h200/hopper_matmul_shapes.json below 0.9
SHAPES = [(1536, 1536, 1536), (1024, 1024, 1024), (512, 6144, 4096), (640, 8192, 8192), (2560, 2560, 2560),
          (3072, 3072, 3072), (4096, 4096, 4096)]
KS = [64, 256, 512, 1024, 2048, 4096]
PASSES = 2
FIT_FROM = 256          # the line is fitted from this K up (one K step is not yet a pipeline)

# Copies of the kernel with one part taken away (tools/explore_hopper_matmul.py's, and two for stream-K's hand-on):
# their outputs are wrong by design, never checked, only timed beside the real kernel at the same shape.
STREAM_K_COPIES = {
    "stream-K, hand-on without flags (no release, no poll)": {
        '    gl.atomic_xchg(_flags(flag_ptr, q), 1, sem="release", scope="gpu")\n': "",
        '    gl.atomic_poll(_flags(flag_ptr, q), 1, sem="acquire", scope="gpu")\n': ""},
    "stream-K, no hand-on (partials neither posted nor added)": {
        '    gl.store(_slot(ws_ptr, q, acc.shape[0], acc.shape[1], layout), acc)\n': "",
        '    gl.atomic_xchg(_flags(flag_ptr, q), 1, sem="release", scope="gpu")\n': "",
        '    gl.atomic_poll(_flags(flag_ptr, q), 1, sem="acquire", scope="gpu")\n': "",
        '    acc += gl.load(_slot(ws_ptr, q, acc.shape[0], acc.shape[1], layout))\n': ""},
}
ABLATED = [(1536, 1536, 1536), (1024, 1024, 1024)]
# proton's record buffer for the traced launches: the default (what the kernel leaves of a CTA's shared memory: 16
# records a warp beside ping-pong's five stages, too few for 1024^3), then 4 KB a warp in global memory (both traced
# kernels have 12 warps; proton wants a power of two a warp)
BUFFERS = [("shared", lambda: tl.default_mode()), ("global, 4 KB a warp", lambda: tl.global_mode(12 * 4096))]
STREAM_K_PROGRAMS = [96, None]       # at 1536^3: runs of 18 K steps, and as many programs as are resident (14)


def fit(ks, us):
    """Least-squares t = t0 + K * per_k over the points with K >= FIT_FROM: (t0 in us, per_k in us per 1024 K)."""
    pts = [(k, t) for k, t in zip(ks, us) if k >= FIT_FROM]
    mk = statistics.mean(k for k, _ in pts)
    mt = statistics.mean(t for _, t in pts)
    slope = sum((k - mk) * (t - mt) for k, t in pts) / sum((k - mk) ** 2 for k, _ in pts)
    return mt - slope * mk, slope * 1024


def traced_config(M, N, K, sms):
    """The pick's options at (M, N, K), every one named but ``instrument``, which the timeline's call sets."""
    cfg = hm.pick_config(K, M, N, sms) or dict(hm.CONFIG)
    return {k: v for k, v in cfg.items() if k != "instrument"}


def floor_us():
    """do_bench's median for an empty kernel of one program: the timer's own floor."""
    import torch
    import triton
    import triton.language as tlang

    @triton.jit
    def empty(x_ptr):
        tlang.store(x_ptr, 1)

    x = torch.zeros(1, device="cuda", dtype=torch.int32)
    empty[(1,)](x)
    torch.cuda.synchronize()
    assert x.item() == 1, "the empty kernel did not run"
    return timing.time_ms(lambda: empty[(1,)](x), cudagraph=False, rep=200) * 1e3


def kernels_run(fn):
    """The GPU kernels one call of ``fn`` launches, by name and grid (torch.profiler): which tile and schedule cuBLAS
    chose is in its kernel's name."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out.append({"kernel": e.name, "us": round(e.device_time, 2)})
    return out


def phases(trace, k_steps=None):
    """Per CTA of one recorded launch (ns since the launch's first record): its first record, the end of its first
    wait for a ready stage, its first and last MMA, its epilogues' total (summed per warp, the busiest warp's: the
    warps of a consumer run one epilogue side by side, and each records it), its last record; medians and extremes
    over the CTAs. ``step_cycles``: the median time from one MMA scope's start to the next one's in a warp, in SM
    cycles (the trace's own unit inside a CTA, exact whatever the clock). ``k_steps``: the MMA scopes a warp
    records per tile; a warp with a count that is not a multiple of it lost records (proton keeps a warp's last
    ones when its buffer fills), and the split refuses it."""
    ctas, mmas = {}, {}
    for r in trace.records():
        c = ctas.setdefault(r["cta"], dict(start=r["start_ns"], end=r["end_ns"], first_ready=None, first_mma=None,
                                           last_mma=0.0, epilogue={}))
        c["start"], c["end"] = min(c["start"], r["start_ns"]), max(c["end"], r["end_ns"])
        if r["scope"] == "wait_ready" and (c["first_ready"] is None or r["end_ns"] < c["first_ready"]):
            c["first_ready"] = r["end_ns"]
        if r["scope"] == "mma":
            c["first_mma"] = r["start_ns"] if c["first_mma"] is None else min(c["first_mma"], r["start_ns"])
            c["last_mma"] = max(c["last_mma"], r["end_ns"])
            mmas.setdefault((r["cta"], r["warp"]), []).append(r["start_ns"])
        if r["scope"] == "epilogue":                   # every warp of a consumer records its own scope
            c["epilogue"][r["warp"]] = c["epilogue"].get(r["warp"], 0.0) + r["end_ns"] - r["start_ns"]
    short = sorted(w for w, v in mmas.items() if k_steps and len(v) % k_steps)
    if short:
        cta, warp = short[0]
        raise ValueError(f"the trace lost records: warp {warp} of CTA {cta} has {len(mmas[short[0]])} MMA scopes, "
                         f"not a multiple of {k_steps} K steps (a larger proton buffer keeps them)")
    parts = {"start": [c["start"] for c in ctas.values()],
             "fill": [c["first_ready"] - c["start"] for c in ctas.values()],
             "main_loop": [c["last_mma"] - c["first_mma"] for c in ctas.values()],
             "epilogue": [max(c["epilogue"].values(), default=0.0) for c in ctas.values()],
             "after_last_mma": [c["end"] - c["last_mma"] for c in ctas.values()],
             "span": [c["end"] - c["start"] for c in ctas.values()]}
    out = {k: {"median": round(statistics.median(v), 1), "min": round(min(v), 1), "max": round(max(v), 1)}
           for k, v in parts.items()}
    out["ctas"] = len(ctas)
    out["launch_span"] = round(max(c["end"] for c in ctas.values()) - min(c["start"] for c in ctas.values()), 1)
    gaps = [b - a for v in mmas.values() for a, b in zip(sorted(v), sorted(v)[1:])]
    mhz = trace.meta.get("clock_mhz")
    out["step_cycles"] = round(statistics.median(gaps) * mhz / 1000, 1) if gaps and mhz else None
    return out


def ablations(out, env, sms, quick):
    """The pick with its epilogue, its loads after the first lap, or both taken away; at 1536^3 stream-K with its
    hand-on's flags, or the whole hand-on, taken away; beside the real kernels and cuBLAS, in interleaved passes."""
    import tempfile

    import torch
    from explore_hopper_matmul import DIAGNOSTICS, kernel_copy
    rows = []
    blas = Cublas()
    with tempfile.TemporaryDirectory() as tmp:
        copies = {n: kernel_copy(e, Path(tmp)) for n, e in {**DIAGNOSTICS, **STREAM_K_COPIES}.items()}
        for M, N, K in ABLATED[:1] if quick else ABLATED:
            a = torch.randn(M, K, device="cuda", dtype=torch.float16)
            b = torch.randn(K, N, device="cuda", dtype=torch.float16)
            b_t = b.T.contiguous()
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            ref = torch.empty_like(c)
            cfg = hm.pick_config(K, M, N, sms) or dict(hm.CONFIG)
            fns = {"picked": (hm.prepare(a, b, c, **cfg), True)}
            fns.update({n: (mod.prepare(a, b, c, **cfg), False) for n, mod in copies.items() if n in DIAGNOSTICS})
            if (M, N, K) == (1536, 1536, 1536):
                for g in STREAM_K_PROGRAMS:
                    launch = hm.prepare(a, b, c, programs=g, stream_k=True)
                    fns[f"stream-K, {launch.grid} programs"] = (launch, True)
                    for n, mod in copies.items():
                        if n in STREAM_K_COPIES:
                            fns[f"{n}, {launch.grid} programs"] = (mod.prepare(a, b, c, programs=g, stream_k=True),
                                                                   False)
            for name, (fn, real) in fns.items():
                if real:                                         # a real kernel computes C: checked first
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    assert_matmul_close(c, a, b, f"{name} {M}x{N}x{K}")
            fns["cuBLAS"] = (lambda: blas.matmul(a, b_t, ref), True)
            best = dict.fromkeys(fns, float("inf"))
            for p in range(PASSES):
                for name in (list(fns) if p % 2 == 0 else list(fns)[::-1]):
                    best[name] = min(best[name], timing.time_ms(fns[name][0], cudagraph=False, rep=100) * 1e3)
            for name, us in best.items():
                rows.append([M, N, K, name, fns[name][1], round(us, 2)])
                timing.log(f"[fixed cost] ablation {rows[-1]}")
    results.save({"benchmark": "hopper-matmul-ablated-parts", **env,
                  "method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events), median; "
                                      f"best of {PASSES} interleaved passes", "dtype": "float16",
                             "copies": "hopper_matmul.py copies with one part taken away (tools/explore_hopper_matmul."
                                       "DIAGNOSTICS, diagnose_fixed_cost.STREAM_K_COPIES): wrong outputs by design, "
                                       "timed only; checked: the real kernels' outputs, element by element",
                             "config": "the pick's at each shape (stream-K: 128 x 256, its own grids)"},
                  "ceilings": {}, "columns": ["M", "N", "K", "kernel", "checked", "us"], "rows": rows},
                 out / "hopper_matmul_ablated_parts.json")


def main():
    import torch
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="two shapes, three depths")
    ap.add_argument("--only", choices=["all", "timelines"], default="all",
                    help="timelines: only the traced launches and their phase split (the other records kept)")
    args = ap.parse_args()
    require_or_exit("diagnose_fixed_cost", WGMMA)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    shapes, ks = (SHAPES[:2], KS[1:4]) if args.quick else (SHAPES, KS)
    if args.only == "all":
        fixed_cost(out, env, sms, shapes, ks)
        ablations(out, env, sms, args.quick)
    timelines(out, env, sms, args.quick)


def fixed_cost(out, env, sms, shapes, ks):
    """Each shape's time against K with the pick's configuration held, a line fitted to it and to the baseline."""
    import torch
    floor = floor_us()
    timing.log(f"[fixed cost] empty kernel: {floor:.2f} us")
    blas = Cublas()
    rows, fits, chosen = [], [], {}
    for M, N, K_ref in shapes:
        cfg = hm.pick_config(K_ref, M, N, sms) or dict(hm.CONFIG)       # {} would let prepare pick again per K
        label = pick_label(hm.pick_config(K_ref, M, N, sms))
        series = {"ours": [], "cuBLAS": [], "torch": []}
        for K in ks:
            a = torch.randn(M, K, device="cuda", dtype=torch.float16)
            b = torch.randn(K, N, device="cuda", dtype=torch.float16)
            b_t = b.T.contiguous()
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            ref = torch.empty_like(c)
            launch = hm.prepare(a, b, c, **cfg)
            launch()
            torch.cuda.synchronize()
            assert_matmul_close(c, a, b, f"{label} {M}x{N}x{K}")                  # element by element, first
            fns = {"ours": launch, "cuBLAS": lambda: blas.matmul(a, b_t, ref), "torch": lambda: a @ b}
            best = dict.fromkeys(fns, float("inf"))
            for p in range(PASSES):
                for name in (list(fns) if p % 2 == 0 else list(fns)[::-1]):
                    best[name] = min(best[name], timing.time_ms(fns[name], cudagraph=False, rep=100) * 1e3)
            for name in series:
                series[name].append(best[name])
            rows.append([M, N, K, label, round(best["ours"], 2), round(best["cuBLAS"], 2), round(best["torch"], 2)])
            timing.log(f"[fixed cost] {rows[-1]}")
        a = torch.randn(M, K_ref, device="cuda", dtype=torch.float16)
        b_t = torch.randn(N, K_ref, device="cuda", dtype=torch.float16)
        ref = torch.empty(M, N, device="cuda", dtype=torch.float16)
        try:
            chosen[f"{M}x{N}x{K_ref}"] = {"cuBLAS": kernels_run(lambda: blas.matmul(a, b_t, ref)),
                                          "torch": kernels_run(lambda: a @ b_t.T)}
        except Exception as e:                           # the profiler is a help here, not the measurement
            chosen[f"{M}x{N}x{K_ref}"] = f"torch.profiler failed: {type(e).__name__}: {e}"
        timing.log(f"[fixed cost] kernels at {M}x{N}x{K_ref}: {chosen[f'{M}x{N}x{K_ref}']}")
        base = [min(x, y) for x, y in zip(series["cuBLAS"], series["torch"])]
        (t0, per), (b0, bper) = fit(ks, series["ours"]), fit(ks, base)
        fits.append([M, N, K_ref, label, round(t0, 2), round(per, 3), round(b0, 2), round(bper, 3),
                     round(t0 - b0, 2), round((per - bper) * K_ref / 1024, 2)])
        timing.log(f"[fixed cost] fit {fits[-1]}")
    result = {"benchmark": "hopper-matmul-fixed-cost", **env,
              "method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events), median; "
                                  f"best of {PASSES} interleaved passes", "dtype": "float16",
                         "config": "pick_config at the held-out K (K_ref), held fixed for every K",
                         "fit": f"least squares t = t0 + K / 1024 * per_1024 over K >= {FIT_FROM}",
                         "baseline": "min(cuBLAS, torch.matmul) time at each K",
                         "gap": "t0_gap_us = t0 - base_t0; rate_gap_us = (per_1024 - base_per_1024) * K_ref / 1024"},
              "ceilings": {"empty_kernel_us": round(floor, 2)},
              "columns": ["M", "N", "K", "pick", "ours_us", "cublas_us", "torch_us"], "rows": rows,
              "fit_columns": ["M", "N", "K_ref", "pick", "t0_us", "per_1024_us", "base_t0_us", "base_per_1024_us",
                              "t0_gap_us", "rate_gap_us"], "fits": fits,
              "baseline_kernels": chosen}
    results.save(result, out / "hopper_matmul_fixed_cost.json")


def timelines(out, env, sms, quick):
    """One launch at 1536^3 and 1024^3 with the timeline scopes, split per CTA into its phases."""
    import torch
    from record_timelines import sm_clock_mhz
    clock = sm_clock_mhz()
    traced = []
    for M, N, K in ([(1536, 1536, 1536)] if quick else [(1536, 1536, 1536), (1024, 1024, 1024)]):
        cfg = traced_config(M, N, K, sms)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        names = ["producer", "consumer0", "consumer1"] if cfg.get("consumers", 1) == 2 else ["consumer", "producer"]
        owner = tl.placed_partitions(hm.hopper_matmul_spec(**cfg), names)
        name = f"hopper_matmul_{M}_{N}_{K}"
        full = {**hm.CONFIG, **cfg}
        for buffer, mode in BUFFERS:                    # the kernel's own shared memory first, then global memory
            tr = tl.record(lambda: hm.hopper_matmul(a, b, out=c, **cfg, instrument=True), name, partitions=owner,
                           clock_mhz=clock["clock_mhz"], mode=mode())
            assert_matmul_close(c, a, b, name)
            try:
                ph = phases(tr, k_steps=K // full["block_k"])
                break
            except ValueError as e:                     # proton dropped a warp's first records: a bigger buffer
                timing.log(f"[fixed cost] timeline {M}x{N}x{K} with the {buffer} buffer: {e}")
        else:
            raise SystemExit(f"diagnose_fixed_cost: the {M}x{N}x{K} timeline lost records in every buffer tried")
        tr.meta["buffer"] = buffer
        ph["buffer"], ph["clock_estimate_mhz"] = buffer, tr.meta.get("clock_estimate_mhz")
        ph["mma_flop_per_step"] = 2 * full["block_m"] * full["block_n"] * full["block_k"]     # one tile, one K step
        traced.append([M, N, K, pick_label(hm.pick_config(K, M, N, sms)), ph])
        timing.log(f"[fixed cost] timeline {M}x{N}x{K}: {ph}")
        tl.save(tl.trim(tr, clusters=4), out / f"timeline_{name}.json", env, benchmark=f"timeline-{name}",
                method={"clock": clock, "warmup_launches": 1,
                        "kernel": f"hopper_matmul_kernel {M} x {N} x {K} fp16, {cfg}"})
    results.save({"benchmark": "hopper-matmul-phases", **env,
                  "method": {"timer": "proton intra-kernel instrumentation (timeline scopes), one launch after a "
                                      "warm-up; ns (cycles / clock_mhz inside a CTA); per CTA, then the median, min "
                                      "and max over CTAs; step_cycles: median MMA-start-to-MMA-start in one warp, in "
                                      "SM cycles; a trace that lost records is refused and taken again with a bigger "
                                      "buffer",
                             "clock": clock,
                             "phases": "start: the CTA's first record after the launch's first; fill: first record to "
                                       "the end of the first wait for a ready stage; main_loop: first MMA's start to "
                                       "the last MMA's end; epilogue: the epilogue scopes' total per warp, the busiest "
                                       "warp's; after_last_mma: last MMA's end to the CTA's last record"},
                  "ceilings": {}, "columns": ["M", "N", "K", "pick", "phases"], "rows": traced},
                 out / "hopper_matmul_phases.json")
    timing.log("[fixed cost] done")


if __name__ == "__main__":
    main()
