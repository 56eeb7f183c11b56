"""Chapter 1's benchmarks: the picked softmax against the upstream design, torch and the copy of the same bytes;
the sweep of every candidate configuration (what the picker learns from); the two exchanges side by side.

    python -m multicta_kernels.cli.bench softmax --out results/h200/softmax.json
"""
from __future__ import annotations

from ..core.accuracy import assert_softmax_close
from ..core.hardware import CLUSTERS, require
from ..core.occupancy import max_clusters, resident_clusters_known
from ..measure import ceilings, timing
from ..softmax import (EXCHANGE_SHAPES, MAX_VALUES_PER_THREAD, ODD_SHAPES, ONE_CTA_MAX_N, TUTORIAL_SHAPES, WIDE_SHAPES,
                       alignment, candidates, make_config, multicta_softmax, online_softmax, pick_config, softmax_kernel,
                       softmax_pipelined_kernel, staged_launch, halves_launch, upstream_design,
                       upstream_design_configs)


def _measure(x, out, cfg, two_pass=False):
    """(ms, max abs error) of one configuration; a wrong result is refused (AssertionError), not recorded: the output
    is poisoned first and checked element-wise against torch before it is timed."""
    import torch
    out.fill_(float("nan"))
    multicta_softmax(x, out, config=cfg, two_pass=two_pass)
    assert_softmax_close(out, x, f"softmax {tuple(x.shape)} {cfg}{' two-pass' if two_pass else ''}: nothing recorded")
    err = (out.float() - torch.softmax(x.float(), dim=1)).abs().max().item()
    ms = timing.time_ms(lambda: multicta_softmax(x, out, config=cfg, two_pass=two_pass))
    return ms, err


SWEEP_COLUMNS = ["M", "N", "num_ctas", "num_warps", "block_m", "values_per_thread", "time_us", "gbps",
                 "fraction_of_copy", "max_abs_err", "dtype", "exchange"]      # what _sweep_row returns


def sweep(quick: bool = False, log=print, shapes=None, space=None, dtypes=("float32",),
          exchanges=("one_round",), copy=None) -> dict:
    """Time every candidate configuration on every benchmark shape, in each of ``dtypes`` and with each of
    ``exchanges`` that the configuration can run (the pipelined kernel needs a cluster and registers for two
    blocks); ``space`` narrows :func:`candidates` (keyword arguments); ``copy``: the copy ceiling (GB/s) already
    measured in this run, else measured here."""
    import torch
    require(CLUSTERS, "the softmax sweep")
    copy = copy or ceilings.copy_ceiling_gbps()
    log(f"[softmax-sweep] copy ceiling {copy:.0f} GB/s")
    shapes = shapes or (TUTORIAL_SHAPES + ODD_SHAPES)[:: 4 if quick else 1]
    rows = []
    for dtype in dtypes:
        for M, N in shapes:
            x = torch.empty((M, N), device="cuda").uniform_(-4, 4).to(getattr(torch, dtype))
            out = torch.empty_like(x)
            for cfg in [c for one in candidates(N, dtype, **(space or {})) for c in _with_exchanges(one, exchanges)]:
                rows.append(_sweep_row(x, out, cfg, copy, log, "softmax-sweep"))
            del x, out
            torch.cuda.empty_cache()
    return {"method": {"timer": "do_bench_cudagraph", "statistic": "median", "dtype": ", ".join(dtypes),
                       "data": "uniform(-4, 4), fresh per shape",
                       "bytes": "2 * M * N * element size (read x, write out)",
                       "exchange": "column exchange: " + ", ".join(exchanges) + " (one CTA: no exchange; pipelined: "
                                   "where check_pipelined allows it, as many clusters as fit at once)",
                       "space": f"candidates(N, dtype): 1-16 CTAs, 1-16 warps, 16-{MAX_VALUES_PER_THREAD} values per "
                                "thread"},
            "ceilings": {"copy_gbps": round(copy, 1)},
            "columns": SWEEP_COLUMNS, "rows": rows}


def _sweep_row(x, out, cfg, copy, log, tag) -> list:
    """One configuration measured on x (checked first, see _measure): a row of the sweeps' columns, logged."""
    M, N = x.shape
    ms, err = _measure(x, out, cfg)
    g = timing.gbps(2 * x.numel() * x.element_size(), ms)
    log(f"[{tag}] {cfg.dtype} {M}x{N} ctas={cfg.num_ctas} warps={cfg.num_warps} rows={cfg.block_m} {cfg.exchange}: "
        f"{g:.0f} GB/s ({g / copy:.3f} of copy) err={err:.1e}")
    return [M, N, cfg.num_ctas, cfg.num_warps, cfg.block_m, cfg.values_per_thread, round(ms * 1e3, 2), round(g, 1),
            round(g / copy, 4), err, cfg.dtype, cfg.exchange]


def _with_exchanges(cfg, exchanges):
    """``cfg`` once per exchange it can run: the pipelined one only with a cluster and registers for two blocks."""
    out = []
    for exchange in exchanges:
        try:
            out.append(make_config(cfg.N, cfg.num_ctas, cfg.num_warps, cfg.block_m, cfg.dtype, exchange=exchange))
        except ValueError:
            continue
    return out


WIDE_SPACE = dict(min_values=32, max_rows=2)       # wide rows: fewer, fuller threads; at most 2 rows per program


def sweep_wide(quick: bool = False, log=print) -> dict:
    """The sweep of rows that need a cluster (WIDE_SHAPES), over WIDE_SPACE: 32 to 128 values per thread,
    at most 2 rows per program (the narrower sweep of results/h200/softmax_sweep.json stopped at 64)."""
    result = sweep(log=log, shapes=WIDE_SHAPES[:1] if quick else WIDE_SHAPES, space=WIDE_SPACE)
    result["method"]["space"] = f"candidates(N, **{WIDE_SPACE})"
    return result


HALF_SHAPES = WIDE_SHAPES + [(8192, 200000)]       # the widths where the half types trailed the upstream design


def sweep_half(quick: bool = False, log=print) -> dict:
    """The sweep of fp16 and bf16 on the rows that need a cluster (HALF_SHAPES, over WIDE_SPACE): what the picker
    chooses from for the half types (before it, they took the configuration measured for fp32)."""
    result = sweep(log=log, shapes=HALF_SHAPES[:1] if quick else HALF_SHAPES, space=WIDE_SPACE,
                   dtypes=("float16", "bfloat16"), exchanges=("one_round", "pipelined"))
    result["method"]["space"] = f"candidates(N, dtype, **{WIDE_SPACE})"
    return result


STAGED_SHAPES = WIDE_SHAPES + [(4096, 524288)]    # the staged kernel's power-of-two widths, fp32 and half types
ONE_CTA_SHAPES = [(32768, 2048), (32768, 4096), (32768, 32768)]   # every one-CTA candidate at these widths
ONE_CTA_SPACE = dict(max_ctas=1, min_values=16)


def sweep_staged(quick: bool = False, log=print) -> dict:
    """The sweep of the staged exchange (the next row staged in shared memory by TMA) on STAGED_SHAPES in every dtype,
    and of every one-CTA candidate on ONE_CTA_SHAPES in fp32 (the widths where the picker had measured rows of
    another width, or one configuration only): what the picker adds to the earlier sweeps."""
    shapes = STAGED_SHAPES[-1:] if quick else STAGED_SHAPES
    result = sweep(log=log, shapes=shapes, space=WIDE_SPACE, dtypes=("float32", "float16", "bfloat16"),
                   exchanges=("staged",))
    one = sweep(log=log, shapes=ONE_CTA_SHAPES[-1:] if quick else ONE_CTA_SHAPES, space=ONE_CTA_SPACE,
                copy=result["ceilings"]["copy_gbps"])
    result["rows"] += one["rows"]
    result["method"]["dtype"] = "float32, float16, bfloat16 (one CTA: float32)"
    result["method"]["exchange"] = "staged (one CTA: no exchange)"
    result["method"]["space"] = (f"staged: candidates(N, dtype, **{WIDE_SPACE}) that check_staged allows, on "
                                 f"{[n for _, n in shapes]}; one CTA: candidates(N, **{ONE_CTA_SPACE}) on "
                                 f"{[n for _, n in ONE_CTA_SHAPES]}")
    return result


HALVES_SHAPES = [(4096, 524288), (2048, 1048576)]    # rows the halves kernel is for: wider than registers
HALVES_SPACE = [(c, w) for c in (8, 16) for w in (4, 8, 16)]
HALVES_REFERENCE = {524288: (16, 8, "staged"), 1048576: (16, 16, "one_round")}   # the picks before it, measured beside


def sweep_halves(quick: bool = False, log=print) -> dict:
    """The sweep of the halves kernel (each CTA's first half of a row in registers, the second in shared memory) on
    HALVES_SHAPES in fp32, over every (CTAs, warps) of HALVES_SPACE that check_halves allows: the widths where
    registers alone spill (1048576) or hold the row with no room for the next one (524288)."""
    import torch
    require(CLUSTERS, "the halves sweep")
    copy = ceilings.copy_ceiling_gbps()
    log(f"[softmax-sweep-halves] copy ceiling {copy:.0f} GB/s")
    rows = []
    for M, N in HALVES_SHAPES[-1:] if quick else HALVES_SHAPES:
        x = torch.empty((M, N), device="cuda").uniform_(-4, 4)
        out = torch.empty_like(x)
        ref = HALVES_REFERENCE[N]
        for c, w, exchange in [(c, w, "halves") for c, w in HALVES_SPACE] + [ref]:
            try:
                cfg = make_config(N, c, w, 1, "float32", exchange=exchange)
            except ValueError:
                continue
            rows.append(_sweep_row(x, out, cfg, copy, log, "softmax-sweep-halves"))
        del x, out
        torch.cuda.empty_cache()
    return {"method": {"timer": "do_bench_cudagraph", "statistic": "median", "dtype": "float32",
                       "data": "uniform(-4, 4), fresh per shape", "bytes": "2 * M * N * element size (read x, write out)",
                       "exchange": "halves (as many clusters as fit at once); beside it, the pick before it at each "
                                   f"width (CTAs, warps, exchange): {HALVES_REFERENCE}",
                       "space": f"(CTAs, warps) in {HALVES_SPACE} that check_halves allows, one row per program; "
                                "values_per_thread counts the first half, the one in registers"},
            "ceilings": {"copy_gbps": round(copy, 1)},
            "columns": SWEEP_COLUMNS, "rows": rows}


def benchmark(quick: bool = False, log=print, dtypes=("float32",), shapes=None) -> dict:
    """The chapter's benchmark in ``dtypes``, all in one run: the picked configuration (fused and two-pass kernels),
    the upstream tutorial's design at the best of its configurations, torch.softmax, a single-CTA online
    softmax on wide rows, the copy of the same bytes, and how many clusters fit on the GPU at once."""
    import torch
    require(CLUSTERS, "the softmax benchmark")
    copy = ceilings.copy_ceiling_gbps()
    blas = ceilings.cublas_tflops()
    log(f"[softmax] copy ceiling {copy:.0f} GB/s, cuBLAS fp16 {blas:.0f} TFLOP/s")
    shapes = shapes or (TUTORIAL_SHAPES + ODD_SHAPES)[:: 4 if quick else 1]
    rows = []
    half = HALF_BENCH_SHAPES[-2:] if quick else HALF_BENCH_SHAPES
    todo = [(dt, shape) for dt in dtypes for shape in (shapes if dt == "float32" else half)]
    for dtype, (M, N) in todo:
        x = torch.empty((M, N), device="cuda").uniform_(-4, 4).to(getattr(torch, dtype))
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        gb = lambda ms: timing.gbps(nbytes, ms)                                        # noqa: E731
        cfg = pick_config(N, dtype)
        ms, err = _measure(x, out, cfg)
        resident = _resident_clusters(x, out, cfg, max_clusters)
        two_ms = _measure(x, out, cfg, two_pass=True)[0]
        seed = []
        for c, w in upstream_design_configs(N):
            upstream_design(x, out, c, w)
            assert_softmax_close(out, x, f"the upstream design at {c} x {w}")     # element-wise, scaled by N
            seed.append((timing.time_ms(lambda: upstream_design(x, out, c, w)), f"{c} CTA x {w} warps"))
        seed_ms, seed_cfg = min(seed) if seed else (None, "none: the row is wider than its configurations")
        seed_gb = round(gb(seed_ms), 1) if seed_ms else None
        online = None
        if N > ONE_CTA_MAX_N:
            online_softmax(x, out)
            assert_softmax_close(out, x, "online softmax")
            online = round(gb(timing.time_ms(lambda: online_softmax(x, out))), 1)
        torch_ms = timing.time_ms(lambda: torch.softmax(x, dim=1))
        copy_ms = timing.time_ms(lambda: out.copy_(x))
        g = gb(ms)
        rows.append([M, N, cfg.num_ctas, cfg.num_warps, cfg.block_m, cfg.values_per_thread, resident, round(g, 1),
                     round(gb(two_ms), 1), seed_gb, seed_cfg, round(gb(torch_ms), 1), online,
                     round(gb(copy_ms), 1), round(g / copy, 4), seed_gb and round(seed_gb / copy, 4),
                     round(gb(torch_ms) / copy, 4), err, dtype, cfg.exchange])
        log(f"[softmax] {dtype} {M}x{N}: ours {g:.0f} GB/s ({g / copy:.3f}) with {cfg.num_ctas}x{cfg.num_warps} "
            f"{cfg.exchange}, upstream design "
            f"{seed_gb} ({seed_cfg}), torch {gb(torch_ms):.0f}, online {online}, {resident} clusters resident")
        del x, out
        torch.cuda.empty_cache()
    return {"method": {"timer": "do_bench_cudagraph", "statistic": "median",
                       "dtype": ", ".join(dtypes) + " (column dtype; fp32 at every shape, a half type at "
                                                     "HALF_BENCH_SHAPES)",
                       "data": "uniform(-4, 4), fresh per shape",
                       "bytes": "2 * M * N * element size (read x, write out)",
                       "exchange": "column exchange: the picked configuration's (config.exchange, the default of "
                                   "multicta_softmax; one CTA: none); two_pass_gbps: the two-pass kernel",
                       "config": "pick_config(N, dtype): the best of the recorded sweep for this width and dtype",
                       "seed_design": "upstream_design_kernel (the design of python/tutorials/gluon/14-multicta.py), "
                                      "best of upstream_design_configs(N) in this run",
                       "online": "online_softmax_kernel: one CTA per row, two passes over the row (rows > 32768)",
                       "resident_clusters": "cuOccupancyMaxActiveClusters of the picked kernel where Triton's "
                                            "binding is exact (4-warp CTAs, or shared memory allowing one CTA per SM: "
                                            "occupancy.resident_clusters_known), else null"},
            "ceilings": {"copy_gbps": round(copy, 1), "cublas_fp16_tflops": {"8192x8192x8192": round(blas, 1)}},
            "columns": ["M", "N", "num_ctas", "num_warps", "block_m", "values_per_thread", "resident_clusters",
                        "gluon_gbps", "two_pass_gbps", "seed_design_gbps", "seed_design_config", "torch_gbps",
                        "online_gbps", "copy_same_bytes_gbps", "gluon_fraction", "seed_design_fraction",
                        "torch_fraction", "max_abs_err", "dtype", "exchange"],
            "rows": rows}


HALF_BENCH_SHAPES = [(32768, 1024), (32768, 8192), (32768, 32768)] + HALF_SHAPES   # fp16 and bf16 in benchmark()


def benchmark_half(quick: bool = False, log=print) -> dict:
    """:func:`benchmark` for fp16 and bf16 (results/h200/softmax_half.json), against the same baselines."""
    return benchmark(quick, log, dtypes=("float16", "bfloat16"))


BEYOND_SHAPES = [(4096, 524288), (2048, 1048576)]      # rows past 256K: 2 and 4 MiB of fp32 each


def benchmark_beyond(quick: bool = False, log=print) -> dict:
    """:func:`benchmark` on fp32 rows wider than the chapter's table (BEYOND_SHAPES, results/h200/softmax_beyond.json):
    the picker's rule there, no sweep behind it."""
    return benchmark(quick, log, shapes=BEYOND_SHAPES[:1] if quick else BEYOND_SHAPES)


def exchange_benchmark(quick: bool = False, log=print) -> dict:
    """The two exchanges of the fused kernel, measured side by side for every dtype on the rows that need a
    cluster (EXCHANGE_SHAPES): the compiler's (two rounds through cluster barriers) and the one-round exchange
    (st.async into every CTA), at the picked configuration; with the upstream design (best of its
    configurations) and torch.softmax as the baselines of the same run. Every output is checked element by
    element before it is timed: a wrong result is refused, not recorded."""
    import torch
    require(CLUSTERS, "the softmax exchange benchmark")
    copy = ceilings.copy_ceiling_gbps()
    log(f"[softmax-exchange] copy ceiling {copy:.0f} GB/s")
    shapes = EXCHANGE_SHAPES[:2] if quick else EXCHANGE_SHAPES
    rows = []
    for dtype in ("float32", "float16", "bfloat16"):
        tdt = getattr(torch, dtype)
        for M, N in shapes:
            x = torch.empty((M, N), device="cuda").uniform_(-4, 4).to(tdt)
            out = torch.empty_like(x)
            gb = lambda ms: timing.gbps(2 * x.numel() * x.element_size(), ms)   # noqa: E731
            cfg = pick_config(N, dtype)
            got = {}
            for exchange in ("compiler", "one_round"):
                multicta_softmax(x, out, config=cfg, exchange=exchange)
                assert_softmax_close(out, x, f"{exchange} exchange {M}x{N} {dtype}")
                got[exchange] = gb(timing.time_ms(lambda: multicta_softmax(x, out, config=cfg, exchange=exchange)))
            seed = []
            for c, w in upstream_design_configs(N):
                upstream_design(x, out, c, w)
                assert_softmax_close(out, x, f"the upstream design at {c} x {w}, {dtype}")
                seed.append((gb(timing.time_ms(lambda: upstream_design(x, out, c, w))), f"{c} CTA x {w} warps"))
            seed_gbps, seed_cfg = max(seed)
            torch_gbps = gb(timing.time_ms(lambda: torch.softmax(x, dim=1)))
            best = max(got.values())
            rows.append([dtype, M, N, cfg.num_ctas, cfg.num_warps, cfg.block_m, round(got["compiler"], 1),
                         round(got["one_round"], 1), round(seed_gbps, 1), seed_cfg, round(torch_gbps, 1),
                         round(best / copy, 4), round(seed_gbps / copy, 4), round(torch_gbps / copy, 4)])
            log(f"[softmax-exchange] {dtype} {M}x{N} ({cfg.num_ctas}x{cfg.num_warps}): compiler {got['compiler']:.0f}, "
                f"one round {got['one_round']:.0f}, upstream {seed_gbps:.0f} ({seed_cfg}), torch {torch_gbps:.0f} GB/s")
            del x, out
            torch.cuda.empty_cache()
    return {"method": {"timer": "do_bench_cudagraph", "statistic": "median", "data": "uniform(-4, 4), fresh per shape",
                       "bytes": "2 * M * N * element size (read x, write out)",
                       "config": "pick_config(N, dtype), the same for both exchanges",
                       "exchanges": "compiler: softmax_kernel (gl.reduce across the CTAs); one_round: "
                                    "softmax_one_round_kernel (st.async into every CTA, one wait)",
                       "seed_design": "upstream_design_kernel, best of upstream_design_configs(N) in this run",
                       "check": "every output element-wise against torch (checks.assert_softmax_close) before timing"},
            "ceilings": {"copy_gbps": round(copy, 1)},
            "columns": ["dtype", "M", "N", "num_ctas", "num_warps", "block_m", "compiler_gbps", "one_round_gbps",
                        "seed_design_gbps", "seed_design_config", "torch_gbps", "gluon_fraction",
                        "seed_design_fraction", "torch_fraction"],
            "rows": rows}


def _resident_clusters(x, out, cfg, max_clusters) -> int:
    """How many clusters of the picked kernel the GPU holds at once (the occupancy calculator)."""
    M, N = x.shape
    align = alignment(N, x, out, cfg.vec)
    if cfg.exchange in ("staged", "halves"):
        kernel, args, meta = (staged_launch if cfg.exchange == "staged" else halves_launch)(x, out, cfg, align, False)
        compiled = kernel.warmup(*args, **meta, grid=(1,))
    else:
        pipelined = cfg.exchange == "pipelined"
        kernel = softmax_pipelined_kernel if pipelined else softmax_kernel
        extra = cfg.exchange_layouts() if pipelined else {}
        compiled = kernel.warmup(x, out, M, N // align, x.stride(0) // align, out.stride(0) // align,
                                 BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, ALIGN=align, layout=cfg.layout, **extra,
                                 INSTRUMENT=False, grid=(1,), num_warps=cfg.num_warps, num_ctas=cfg.num_ctas)
    if not resident_clusters_known(cfg.num_warps, compiled.metadata.shared):
        return None                          # Triton's binding assumes 4 warps: its answer would be wrong
    return max_clusters(compiled, cfg.num_ctas)
