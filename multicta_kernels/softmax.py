"""Chapter 1: a row-wise softmax whose rows are sharded across a cluster of 1 to 16 CTAs.

Two kernels, one step apart:

* ``softmax_two_pass_kernel`` holds a ``[BLOCK_M, BLOCK_N]`` tile whose layout shards the columns
  over the CTAs (``cga_layout`` bases ``[0, 1], [0, 2], ...``). ``gl.max`` and ``gl.sum`` along
  the row then become cross-CTA reductions: two round trips through distributed shared memory.
* ``softmax_kernel`` views the same tile as ``[BLOCK_M, CTAS, BLOCK_N // CTAS]`` with the CTA
  index as its own axis. Max and sum stay inside each CTA; one cross-CTA ``gl.reduce`` merges the
  partial (max, sum) pairs. One round trip instead of two: cross-CTA traffic must be earned.

Short rows stack several rows in one program instead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import multicta_kernels  # noqa: F401
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from . import lens
from .hardware import CLUSTERS, MAX_CLUSTER_CTAS, check_cluster_size, check_on_gpu, log2, require

LOG2E = gl.constexpr(1.4426950408889634)  # exp(x) = exp2(x * log2(e)): one ex2.approx

# Register budget: at most this many fp32 values of a row tile per thread (keeps the tile out of
# local-memory spills), at most 16 warps per CTA and 16 CTAs per cluster.
MAX_VALUES_PER_THREAD = 64
MAX_WARPS = 16
MAX_N = MAX_CLUSTER_CTAS * MAX_WARPS * 32 * MAX_VALUES_PER_THREAD  # 524288 columns



@gluon.jit
def softmax_two_pass_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div,
                            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                            layout: gl.constexpr):
    # Sizes arrive divided by ALIGN so the compiler can prove every row 16-byte aligned and keep
    # vector loads even when the row width needs a mask.
    N = n_div * ALIGN
    rows = (gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, layout)))[:, None]
    cols = gl.arange(0, BLOCK_N, gl.SliceLayout(0, layout))[None, :]
    mask = (rows < M) & (cols < N)
    rows = rows.to(gl.int64)                                # M * stride may exceed 2**31

    x = gl.load(x_ptr + rows * (x_stride_div * ALIGN) + cols, mask=mask, other=-float("inf"))
    x = x.to(gl.float32)
    row_max = gl.max(x, axis=1)                             # cross-CTA reduction no. 1
    e = gl.exp2((x - row_max[:, None]) * LOG2E)
    y = e * (1.0 / gl.sum(e, axis=1))[:, None]              # cross-CTA reduction no. 2
    gl.store(out_ptr + rows * (out_stride_div * ALIGN) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _merge(m1, s1, m2, s2):
    # Two partial softmax sums (max m, sum s of exp(x - m)) combined; a -inf max carries no mass.
    m = gl.maximum(m1, m2)
    a = gl.where(m1 == m, s1, s1 * gl.exp2((m1 - m) * LOG2E))
    b = gl.where(m2 == m, s2, s2 * gl.exp2((m2 - m) * LOG2E))
    return m, a + b


@gluon.jit
def softmax_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                   layout: gl.constexpr):
    # The tile is [BLOCK_M, CTAS, PER_CTA]: axis 1 is the CTA (cga_layout bases [0, 2**i, 0]).
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    N = n_div * ALIGN
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, gl.SliceLayout(2, layout)))
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    j = gl.arange(0, PER_CTA, gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    rows = rows[:, None, None]
    cols = cta[None, :, None] * PER_CTA + j[None, None, :]
    mask = (rows < M) & (cols < N)
    rows = rows.to(gl.int64)

    x = gl.load(x_ptr + rows * (x_stride_div * ALIGN) + cols, mask=mask, other=-float("inf"))
    x = x.to(gl.float32)
    m_cta = gl.max(x, axis=2)                               # inside each CTA
    m_cta = gl.where(m_cta == -float("inf"), 0.0, m_cta)    # a fully masked slice: no NaN
    e = gl.exp2((x - m_cta[:, :, None]) * LOG2E)
    s_cta = gl.sum(e, axis=2)                               # inside each CTA
    m, s = gl.reduce((m_cta, s_cta), 1, _merge)             # the one cross-CTA round trip
    scale = gl.exp2((m_cta - m[:, None]) * LOG2E) / s[:, None]
    y = e * scale[:, :, None]
    gl.store(out_ptr + rows * (out_stride_div * ALIGN) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@dataclass(frozen=True)
class SoftmaxConfig:
    """How one launch is shaped. ``layout`` is what ``softmax_kernel`` receives (3-D, CTA axis in
    the middle); ``layout_2d`` is the same ownership as a plain [rows, columns] layout, what
    ``softmax_two_pass_kernel`` receives and what the ownership maps draw."""
    N: int
    dtype: str
    num_ctas: int
    num_warps: int
    block_m: int
    block_n: int
    vec: int
    layout: object
    layout_2d: object
    reasons: tuple = field(default=(), compare=False)

    @property
    def values_per_thread(self) -> int:
        """fp32 values of the tile each thread holds in registers."""
        return self.block_m * self.block_n // (32 * self.num_warps * self.num_ctas)

    def explain(self) -> str:
        head = (f"N={self.N} {self.dtype}: {self.num_ctas} CTA(s) x {self.num_warps} warp(s), "
                f"{self.block_m} row(s) of {self.block_n} per program, {self.vec}-wide vectors, "
                f"{self.values_per_thread} values per thread")
        return "\n".join([head] + [f"  - {r}" for r in self.reasons])


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _check_pow2(name, value, limit):
    if not isinstance(value, int) or value < 1 or value & (value - 1) or value > limit:
        raise ValueError(f"{name} must be a power of two between 1 and {limit}, got {value!r}")


def make_config(N: int, num_ctas: int = 1, num_warps: int = 4, block_m: int = 1,
                dtype: str = "float32", reasons=()) -> SoftmaxConfig:
    """Build the layouts for a row width, cluster size, warp count and rows per program."""
    if dtype not in lens.DTYPES:
        raise TypeError(f"softmax supports {', '.join(lens.DTYPES)}, not {dtype}")
    if not isinstance(N, int) or N < 1:
        raise ValueError(f"the row width N must be a positive integer, got {N!r}")
    check_cluster_size(num_ctas)
    _check_pow2("num_warps", num_warps, MAX_WARPS)
    _check_pow2("block_m", block_m, 1 << 16)
    block_n = _pow2(N)
    if block_n < num_ctas:
        raise ValueError(f"a row of {N} elements cannot be split over {num_ctas} CTAs; use at most {block_n}")
    per_cta = block_n // num_ctas                       # columns each CTA owns
    vec = min(16 // lens.DTYPES[dtype].bytes, per_cta)   # 16-byte loads where the row allows
    tpw_n = min(32, per_cta // vec)                     # lanes along the row ...
    tpw_m = 32 // tpw_n                                 # ... the rest stack rows
    wpc_n = min(num_warps, per_cta // (vec * tpw_n))    # warps along the row ...
    wpc_m = num_warps // wpc_n                          # ... the rest stack rows
    block_m = max(block_m, tpw_m * wpc_m)               # no lane left without a row
    bits = range(log2(num_ctas))
    layout_2d = gl.BlockedLayout([1, vec], [tpw_m, tpw_n], [wpc_m, wpc_n], [1, 0],
                                 cga_layout=[[0, 1 << i] for i in bits])        # CTAs split the columns
    layout = gl.BlockedLayout([1, 1, vec], [tpw_m, 1, tpw_n], [wpc_m, 1, wpc_n], [2, 1, 0],
                              cga_layout=[[0, 1 << i, 0] for i in bits])        # ... as their own axis
    cfg = SoftmaxConfig(N, dtype, num_ctas, num_warps, block_m, block_n, vec, layout, layout_2d, tuple(reasons))
    if cfg.values_per_thread > MAX_VALUES_PER_THREAD:
        raise ValueError(
            f"{cfg.values_per_thread} values per thread would spill registers (limit "
            f"{MAX_VALUES_PER_THREAD}); use more CTAs or warps, or fewer rows per program")
    return cfg


# Fitted to the sweep recorded on an H200 (results/h200/softmax_sweep.json).
ONE_CTA_MAX_N = 32768        # up to here one CTA holds a row: no cluster traffic at all
VALUES_PER_THREAD = 16       # short rows: ~16 values per thread, extra warps stack rows
WIDE_WARPS = 8               # wide rows: 8 warps per CTA ...
WIDE_PER_CTA = 16384         # ... and at most 16384 columns per CTA, at least 8 CTAs


def pick_config(N: int, dtype: str = "float32") -> SoftmaxConfig:
    """Choose CTAs, warps and rows per program for rows of ``N`` elements, with the reasons."""
    if dtype not in lens.DTYPES:
        raise TypeError(f"softmax supports {', '.join(lens.DTYPES)}, not {dtype}")
    if not isinstance(N, int) or N < 1:
        raise ValueError(f"the row width N must be a positive integer, got {N!r}")
    if N > MAX_N:
        raise ValueError(
            f"rows of {N} elements do not fit in a 16-CTA cluster's registers (at most {MAX_N}); "
            "split each row into chunks and combine them with an online softmax")
    block_n = _pow2(N)
    if block_n <= ONE_CTA_MAX_N:
        num_warps = min(MAX_WARPS, max(1, block_n // (32 * VALUES_PER_THREAD)))
        block_m = max(1, 32 * num_warps * VALUES_PER_THREAD // block_n)
        reasons = [f"a row of {block_n} fits one CTA's registers (<= {ONE_CTA_MAX_N}): no cluster, no "
                   "cross-CTA traffic",
                   f"{num_warps} warp(s) x 32 lanes x {block_m * block_n // (32 * num_warps)} values per thread "
                   f"cover {block_m} row(s) per program"]
        if block_m > 1:
            reasons.append("short rows are stacked so each program still has enough loads in flight")
        return make_config(N, 1, num_warps, block_m, dtype, reasons)
    num_ctas = min(MAX_CLUSTER_CTAS, max(8, block_n // WIDE_PER_CTA))
    num_warps = max(WIDE_WARPS, block_n // (num_ctas * 32 * MAX_VALUES_PER_THREAD))
    reasons = [f"a row of {block_n} is too wide for one CTA: shard it over {num_ctas} CTAs "
               f"({block_n // num_ctas} columns each)",
               f"{num_warps} warps per CTA: {block_n // (num_ctas * num_warps * 32)} values per thread, "
               "held in registers from load to store",
               "max and sum stay inside each CTA; one cross-CTA reduce merges (max, sum) pairs"]
    return make_config(N, num_ctas, num_warps, 1, dtype, reasons)


def multicta_softmax(x, out=None, *, config: SoftmaxConfig | None = None, two_pass: bool = False):
    """Softmax over the last dimension of a 2-D CUDA tensor (fp32, fp16 or bf16).

    Rows may be strided (``x[:, :N]`` of a wider tensor); elements within a row must be
    contiguous. ``out`` (optional) receives the result and may be ``x`` itself; nothing is written
    to it if the call is rejected. ``two_pass=True`` runs the chapter's first kernel (two
    cross-CTA reductions) instead of the fused one.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows, columns), got shape {tuple(x.shape)}; "
                         "reshape it, e.g. x.reshape(-1, x.shape[-1])")
    if lens.dtype_name(x.dtype) not in lens.DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; the softmax supports float32, float16 and bfloat16")
    M, N = x.shape
    if N > MAX_N:
        raise ValueError(f"rows of {N} elements do not fit in a 16-CTA cluster's registers "
                         f"(at most {MAX_N}); split the rows and combine them with an online softmax")
    if N > 1 and x.stride(1) != 1:
        raise ValueError(f"x.stride(1) is {x.stride(1)}: the kernel reads each row as contiguous memory; "
                         "pass x.contiguous() (strided rows, x.stride(0) != N, are fine)")
    if out is None:
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    else:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        if tuple(out.shape) != (M, N) or out.dtype != x.dtype or out.device.type != x.device.type:
            raise ValueError(f"out must be a {tuple(x.shape)} {x.dtype} tensor on {x.device}, got "
                             f"{tuple(out.shape)} {out.dtype} on {out.device}")
        if N > 1 and out.stride(1) != 1:
            raise ValueError(f"out.stride(1) is {out.stride(1)}: each output row must be contiguous")
        if M > 1 and out.stride(0) < N:
            raise ValueError(f"out.stride(0) is {out.stride(0)} < N = {N}: output rows would overlap")
    if config is None:
        config = pick_config(N, lens.dtype_name(x.dtype))
    elif config.block_n < N or config.dtype != lens.dtype_name(x.dtype):
        raise ValueError(f"config was made for N={config.N} {config.dtype}, not N={N} {lens.dtype_name(x.dtype)}; "
                         f"build one with pick_config({N}, {lens.dtype_name(x.dtype)!r})")
    require(CLUSTERS, "multicta_softmax")
    check_on_gpu(x, "x")
    if M == 0 or N == 0:
        return out
    # The largest power of two (up to one 16-byte vector) dividing N and both row strides.
    align = config.vec
    while align > 1 and (N % align or x.stride(0) % align or out.stride(0) % align):
        align //= 2
    kernel, layout = (softmax_two_pass_kernel, config.layout_2d) if two_pass else (softmax_kernel, config.layout)
    kernel[(math.ceil(M / config.block_m),)](
        x, out, M, N // align, x.stride(0) // align, out.stride(0) // align,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, ALIGN=align, layout=layout,
        num_warps=config.num_warps, num_ctas=config.num_ctas)
    return out


# Every softmax: 16-byte loads and stores, warp-shuffle reductions, exp as one ex2.approx. With a cluster:
_EXPECT_ROW = ("ld.global.v4", "st.global.v4", "shfl.sync.bfly", "ex2.approx")
_EXPECT_CLUSTER = (".reqnctapercluster", "mapa.shared::cluster", "ld.shared::cluster", "barrier.cluster.arrive",
                   "barrier.cluster.wait")


def kernel_spec(name, kernel, use_2d, num_ctas, N, num_warps, block_m, dtype):
    """Either softmax kernel as the lens compiles it (default row: 16384 columns per CTA)."""
    N = N or 16384 * num_ctas
    cfg = pick_config(N, dtype)
    cfg = make_config(N, num_ctas, num_warps or cfg.num_warps, block_m or cfg.block_m, dtype)
    ty = lens.DTYPES[dtype].short
    sig = {"x_ptr": f"*{ty}", "out_ptr": f"*{ty}", "M": "i32", "n_div": "i32", "x_stride_div": "i32",
           "out_stride_div": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "ALIGN": "constexpr",
           "layout": "constexpr"}
    return lens.KernelSpec(
        name=name, fn=kernel, signature=sig,
        constexprs={"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "ALIGN": cfg.vec,
                    "layout": cfg.layout_2d if use_2d else cfg.layout},
        options={"num_warps": cfg.num_warps, "num_ctas": num_ctas},
        expect=_EXPECT_ROW + (_EXPECT_CLUSTER if num_ctas > 1 else ()),
        divisible=("x_ptr", "out_ptr"))


def softmax_spec(num_ctas: int = 1, N: int | None = None, num_warps: int | None = None,
                 block_m: int | None = None, dtype: str = "float32") -> lens.KernelSpec:
    """The fused softmax as the lens compiles it (default row: 16384 columns per CTA)."""
    return kernel_spec("softmax", softmax_kernel, False, num_ctas, N, num_warps, block_m, dtype)


def softmax_two_pass_spec(num_ctas: int = 1, N: int | None = None, num_warps: int | None = None,
                          block_m: int | None = None, dtype: str = "float32") -> lens.KernelSpec:
    """The two-reduction softmax, for comparison."""
    return kernel_spec("softmax_two_pass", softmax_two_pass_kernel, True, num_ctas, N, num_warps, block_m, dtype)


# ------------------------------------------------------------------------------------ benchmarks

# The seed's 11 shapes (B200 reference in results/reference/) plus odd widths that need masks.
SEED_SHAPES = [(32768, 256), (32768, 512), (32768, 1024), (32768, 2048), (32768, 4096), (32768, 8192),
               (32768, 16384), (32768, 32768), (32768, 65536), (16384, 131072), (8192, 262144)]
ODD_SHAPES = [(32768, 1000), (32768, 3000), (16384, 50000), (8192, 200000)]
WIDE_SHAPES = [(32768, 65536), (16384, 131072), (8192, 262144), (16384, 50000), (8192, 200000)]


def candidates(N: int, dtype: str = "float32", max_ctas: int = MAX_CLUSTER_CTAS):
    """Every sensible (CTAs, warps, rows per program) for rows of N: the sweep's search space."""
    block_n = _pow2(N)
    seen, out = set(), []
    for c in (1, 2, 4, 8, 16):
        if c > max_ctas or block_n // c < (1 if c == 1 else 2048):
            continue
        for w in (1, 2, 4, 8, 16):
            for vpt in (16, 32, 64):
                bm = vpt * 32 * w * c // block_n
                if bm < 1 or bm > 64:     # bm > 1: rows stacked in one program (sharing its barriers)
                    continue
                try:
                    cfg = make_config(N, c, w, bm, dtype)
                except ValueError:
                    continue
                key = (cfg.num_ctas, cfg.num_warps, cfg.block_m)
                if key not in seen:
                    seen.add(key)
                    out.append(cfg)
    return out


def _measure(x, out, cfg, bench, two_pass=False):
    import torch
    multicta_softmax(x, out, config=cfg, two_pass=two_pass)
    err = (out.float() - torch.softmax(x.float(), dim=1)).abs().max().item()
    ms = bench.time_ms(lambda: multicta_softmax(x, out, config=cfg, two_pass=two_pass))
    return ms, err


def sweep(quick: bool = False, log=print, shapes=None) -> dict:
    """Time every candidate configuration on every benchmark shape (fp32)."""
    import torch
    from . import bench
    require(CLUSTERS, "the softmax sweep")
    copy = bench.copy_ceiling_gbps()
    log(f"[softmax-sweep] copy ceiling {copy:.0f} GB/s")
    shapes = shapes or (SEED_SHAPES + ODD_SHAPES)[:: 4 if quick else 1]
    rows = []
    for M, N in shapes:
        x = torch.empty((M, N), device="cuda").uniform_(-4, 4)
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        for cfg in candidates(N):
            ms, err = _measure(x, out, cfg, bench)
            g = bench.gbps(nbytes, ms)
            rows.append([M, N, cfg.num_ctas, cfg.num_warps, cfg.block_m, cfg.values_per_thread,
                         round(ms * 1e3, 2), round(g, 1), round(g / copy, 4), err])
            log(f"[softmax-sweep] {M}x{N} ctas={cfg.num_ctas} warps={cfg.num_warps} rows={cfg.block_m}: "
                f"{g:.0f} GB/s ({g / copy:.2f} of copy) err={err:.1e}")
        del x, out
        torch.cuda.empty_cache()
    return {"method": {"timer": "do_bench_cudagraph", "statistic": "median", "dtype": "float32",
                       "data": "uniform(-4, 4), fresh per shape", "bytes": "2 * M * N * 4 (read x, write out)"},
            "ceilings": {"copy_gbps": round(copy, 1)},
            "columns": ["M", "N", "num_ctas", "num_warps", "block_m", "values_per_thread", "time_us",
                        "gbps", "fraction_of_copy", "max_abs_err"],
            "rows": rows}


def sweep_wide(quick: bool = False, log=print) -> dict:
    """The sweep, restricted to rows that need a cluster (WIDE_SHAPES)."""
    return sweep(log=log, shapes=WIDE_SHAPES[:2] if quick else WIDE_SHAPES)


def benchmark(quick: bool = False, log=print) -> dict:
    """The chapter's benchmark: the picked config (fused and two-pass kernels) vs torch.softmax vs
    the best single-CTA variant, with the copy of the same bytes."""
    import torch
    from . import bench
    require(CLUSTERS, "the softmax benchmark")
    copy = bench.copy_ceiling_gbps()
    blas = bench.cublas_tflops()
    log(f"[softmax] copy ceiling {copy:.0f} GB/s, cuBLAS fp16 {blas:.0f} TFLOP/s")
    shapes = (SEED_SHAPES + ODD_SHAPES)[:: 4 if quick else 1]
    rows = []
    for M, N in shapes:
        x = torch.empty((M, N), device="cuda").uniform_(-4, 4)
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        cfg = pick_config(N)
        ms, err = _measure(x, out, cfg, bench)
        two_ms = _measure(x, out, cfg, bench, two_pass=True)[0]
        torch_ms = bench.time_ms(lambda: torch.softmax(x, dim=1))
        copy_ms = bench.time_ms(lambda: out.copy_(x))
        single = [(float("nan"), None)]
        if N <= 32 * MAX_WARPS * MAX_VALUES_PER_THREAD:
            single = [(_measure(x, out, c, bench)[0], c) for c in candidates(N, max_ctas=1)]
        s_ms, s_cfg = min(single, key=lambda t: t[0])
        g, tg = bench.gbps(nbytes, ms), bench.gbps(nbytes, torch_ms)
        sg = bench.gbps(nbytes, s_ms) if s_cfg else None
        rows.append([M, N, cfg.num_ctas, cfg.num_warps, cfg.block_m, round(g, 1),
                     round(bench.gbps(nbytes, two_ms), 1), round(tg, 1), None if sg is None else round(sg, 1),
                     None if s_cfg is None else f"{s_cfg.num_warps}w x {s_cfg.block_m}r",
                     round(bench.gbps(nbytes, copy_ms), 1), round(g / copy, 4), round(tg / copy, 4), err])
        log(f"[softmax] {M}x{N}: gluon {g:.0f} GB/s ({g / copy:.2f}) with {cfg.num_ctas} CTAs, torch {tg:.0f} "
            f"({tg / copy:.2f}), best 1-CTA {sg if sg is None else round(sg)}, err {err:.1e}")
        del x, out
        torch.cuda.empty_cache()
    return {"method": {"timer": "do_bench_cudagraph", "statistic": "median", "dtype": "float32",
                       "data": "uniform(-4, 4), fresh per shape", "bytes": "2 * M * N * 4 (read x, write out)",
                       "config": "pick_config(N)", "single_cta": "best of candidates(N, max_ctas=1)"},
            "ceilings": {"copy_gbps": round(copy, 1), "cublas_fp16_tflops": {"8192x8192x8192": round(blas, 1)}},
            "columns": ["M", "N", "num_ctas", "num_warps", "block_m", "gluon_gbps", "two_pass_gbps", "torch_gbps",
                        "single_cta_gbps", "single_cta_config", "copy_same_bytes_gbps", "gluon_fraction",
                        "torch_fraction", "max_abs_err"],
            "rows": rows}
