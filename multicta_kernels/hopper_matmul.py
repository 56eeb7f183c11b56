"""Chapter 6 (groundwork): a persistent, warp-specialised Hopper matmul with TMA multicast.

STATUS: compiled for sm_90a and checked through the lens on a CPU; **not yet run on a GPU**. The
Hopper-marked tests in tests/test_hopper_matmul.py are the first thing to run on an H200.

Each cluster of CTAS CTAs (stacked along M) computes one [CTAS * BM, BN] tile at a time, walking
tiles in planar-snake order (chapter 5). Per CTA:

* producer (1 warp): TMA loads of its own A rows and of the B tile, which the cluster shares and
  multicasts, into a STAGES-deep ring;
* consumers (the default warps): asynchronous ``warpgroup_mma`` with one MMA in flight; when a
  stage's MMA is done they release the stage to the whole cluster (chapter 2's gather on CTA 0 and
  broadcast back), then write the tile through shared memory with TMA stores.
"""
from __future__ import annotations

import math

import multicta_kernels  # noqa: F401
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from . import lens
from .clc_matmul import planar_snake
from .hardware import HOPPER, require
from .multicast import _desc, _layout, prepare_matmul


@gluon.aggregate
class Ring:
    a_desc: tma.tensor_descriptor
    b_desc: tma.tensor_descriptor
    c_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor      # per CTA: the stage's A rows and B tile have landed
    freed: gl.shared_memory_descriptor      # one barrier in CTA 0: every CTA's consumers released the stage
    go: gl.shared_memory_descriptor         # per CTA: CTA 0 says the stage may be reloaded
    M: gl.tensor
    N: gl.tensor
    K: gl.tensor
    STAGES: gl.constexpr
    MINOR_DIM: gl.constexpr
    TILE_WIDTH: gl.constexpr

    @gluon.jit
    def tiles(self):
        TM: gl.constexpr = self.a_desc.block_shape[0]
        TN: gl.constexpr = self.b_desc.block_shape[1]
        return gl.cdiv(self.M, TM), gl.cdiv(self.N, TN)


@gluon.jit
def producer_partition(r):
    TM: gl.constexpr = r.a_desc.block_shape[0]
    BK: gl.constexpr = r.a_desc.block_shape[1]
    TN: gl.constexpr = r.b_desc.block_shape[1]
    nbytes: gl.constexpr = r.a_desc.nbytes_per_cta + r.b_desc.nbytes_per_cta
    m_tiles, n_tiles = r.tiles()
    k_steps = gl.cdiv(r.K, BK)
    it = 0
    for lin in range(gl.program_id(0), m_tiles * n_tiles, gl.num_programs(0)):
        tm, tn = planar_snake(lin, m_tiles, n_tiles, r.MINOR_DIM, r.TILE_WIDTH)
        for k in range(k_steps):
            s = it % r.STAGES
            if it >= r.STAGES:                                   # the stage was used before: wait for
                ph = ((it // r.STAGES) & 1) ^ 1                  # every CTA of the cluster to free it
                mbarrier.wait(r.freed.index(s), ph)              # (CTA 0 only: the group's leader)
                mbarrier.arrive(r.go.index(s), from_cta=0)       # CTA 0 tells every CTA
                mbarrier.wait(r.go.index(s), ph)
            mbarrier.expect(r.ready.index(s), nbytes)
            tma.async_load(r.a_desc, [tm * TM, k * BK], r.ready.index(s), r.a_bufs.index(s))
            tma.async_load(r.b_desc, [k * BK, tn * TN], r.ready.index(s), r.b_bufs.index(s), multicast=True)
            it += 1


@gluon.jit
def consumer_partition(r, acc_layout: gl.constexpr):
    TM: gl.constexpr = r.a_desc.block_shape[0]
    BK: gl.constexpr = r.a_desc.block_shape[1]
    TN: gl.constexpr = r.b_desc.block_shape[1]
    c_smem = gl.allocate_shared_memory(r.c_desc.dtype, r.c_desc.block_shape, r.c_desc.layout)
    m_tiles, n_tiles = r.tiles()
    k_steps = gl.cdiv(r.K, BK)
    it = 0
    for lin in range(gl.program_id(0), m_tiles * n_tiles, gl.num_programs(0)):
        tm, tn = planar_snake(lin, m_tiles, n_tiles, r.MINOR_DIM, r.TILE_WIDTH)
        acc = gl.zeros([TM, TN], gl.float32, acc_layout)
        for k in range(k_steps):
            s = it % r.STAGES
            mbarrier.wait(r.ready.index(s), (it // r.STAGES) & 1)
            acc = hopper.warpgroup_mma(r.a_bufs.index(s), r.b_bufs.index(s), acc, is_async=True)
            acc = hopper.warpgroup_mma_wait(1, deps=[acc])       # the previous step's MMA is done ...
            if k > 0:
                mbarrier.arrive(r.freed.index((it - 1) % r.STAGES))   # ... so its stage goes back (to CTA 0)
            it += 1
        acc = hopper.warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(r.freed.index((it - 1) % r.STAGES))
        tma.store_wait(0)                                         # the previous tile's store has read c_smem
        c_smem.store(acc.to(r.c_desc.dtype))
        hopper.fence_async_shared()
        tma.async_store(r.c_desc, [tm * TM, tn * TN], c_smem)    # overlaps the next tile's MMAs
    tma.store_wait(0)


@gluon.jit
def hopper_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, MINOR_DIM: gl.constexpr,
                         TILE_WIDTH: gl.constexpr, acc_layout: gl.constexpr, group_all: gl.constexpr):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape, b_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    freed = gl.allocate_shared_memory(gl.int64, [STAGES, 1], group_all)
    go = mbarrier.allocate_mbarrier(batch=STAGES)
    for s in gl.static_range(STAGES):                # all inits before warp_specialize (chapter 2)
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(freed.index(s), count=1)       # x cluster size, on CTA 0
        mbarrier.init(go.index(s), count=1)
    r = Ring(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, freed, go, M, N, K, STAGES, MINOR_DIM, TILE_WIDTH)
    gl.warp_specialize([(consumer_partition, (r, acc_layout)), (producer_partition, (r,))], [1], [40])


CONFIG = dict(block_m=128, block_n=256, block_k=64, stages=3, num_ctas=2, minor_dim=0, tile_width=8)


def _plan(M, N, K, dtype, block_m, block_n, block_k, stages, num_ctas, minor_dim, tile_width):
    if not isinstance(num_ctas, int) or num_ctas not in (1, 2, 4):
        raise ValueError(f"num_ctas must be 1, 2 or 4 (CTAs stacked along M sharing B), got {num_ctas!r}")
    if block_m not in (64, 128):
        raise ValueError(f"block_m must be 64 or 128 (one or two consumer warpgroups), got {block_m}")
    if block_n % 8 or not 8 <= block_n <= 256:
        raise ValueError(f"block_n must be a multiple of 8 up to 256 (one wgmma), got {block_n}")
    if block_k not in (32, 64):
        raise ValueError(f"block_k must be 32 or 64, got {block_k}")
    smem = 2 * (stages * (block_m * block_k + block_k * block_n) + block_m * block_n)
    if smem > 220 * 1024:
        raise ValueError(f"{stages} stages need {smem // 1024} KiB of shared memory per CTA (at most ~227 KiB); "
                         "use fewer stages or a smaller block_n")
    if K < 1 or K % 8 or N % 8:
        raise ValueError(f"K and N must be positive multiples of 8 (16-byte aligned rows for TMA), got K={K}, N={N}")
    if minor_dim not in (0, 1) or tile_width < 1:
        raise ValueError("minor_dim must be 0 or 1 and tile_width at least 1")
    n = num_ctas.bit_length() - 1
    split, bcast = [[1 << i, 0] for i in range(n)], [[0, 0]] * n
    tm = block_m * num_ctas
    return dict(tile_m=tm, a=_layout([tm, block_k], dtype, split), b=_layout([block_k, block_n], dtype, bcast),
                c=_layout([tm, block_n], dtype, split),
                acc=gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[block_m // 16, 1],
                                              instr_shape=[16, block_n, 16], cga_layout=split),
                group_all=mbarrier.MBarrierLayout([[0]] * n), num_warps=block_m // 16)


def hopper_matmul(a, b, out=None, *, programs: int | None = None, **config):
    """C = A @ B (fp16 or bf16, fp32 accumulation) on Hopper, persistent over min(tiles, clusters)."""
    import torch
    cfg, plan, out, descs, M, N, K = prepare_matmul(a, b, out, config, CONFIG, _plan, HOPPER,
                                                    "hopper_matmul (wgmma and TMA multicast)")
    tiles = math.ceil(M / plan["tile_m"]) * math.ceil(N / cfg["block_n"])
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    grid = min(tiles, programs or max(1, sms // cfg["num_ctas"]))
    hopper_matmul_kernel[(grid,)](
        *descs, M, N, K, STAGES=cfg["stages"], MINOR_DIM=cfg["minor_dim"], TILE_WIDTH=cfg["tile_width"],
        acc_layout=plan["acc"], group_all=plan["group_all"], num_warps=plan["num_warps"], num_ctas=cfg["num_ctas"])
    return out


@lens.register("hopper_matmul", examples=[{}, {"num_ctas": 4}, {"num_ctas": 1}, {"dtype": "bfloat16"}])
def hopper_matmul_spec(dtype: str = "float16", **config):
    cfg = {**CONFIG, **config}
    g, t = {"float16": (gl.float16, "fp16"), "bfloat16": (gl.bfloat16, "bf16")}[dtype]
    plan = _plan(8192, 8192, 4096, g, **cfg)
    sig = {"a_desc": _desc(t, [plan["tile_m"], cfg["block_k"]], plan["a"]),
           "b_desc": _desc(t, [cfg["block_k"], cfg["block_n"]], plan["b"]),
           "c_desc": _desc(t, [plan["tile_m"], cfg["block_n"]], plan["c"]),
           "M": "i32", "N": "i32", "K": "i32", "STAGES": "constexpr", "MINOR_DIM": "constexpr",
           "TILE_WIDTH": "constexpr", "acc_layout": "constexpr", "group_all": "constexpr"}
    expect = ("wgmma.mma_async", "cp.async.bulk.tensor") + (
        (".multicast::cluster", ".reqnctapercluster", "mbarrier.arrive.shared::cluster") if cfg["num_ctas"] > 1 else ())
    return lens.KernelSpec("hopper_matmul", hopper_matmul_kernel, sig,
                           {"STAGES": cfg["stages"], "MINOR_DIM": cfg["minor_dim"], "TILE_WIDTH": cfg["tile_width"],
                            "acc_layout": plan["acc"], "group_all": plan["group_all"]},
                           {"num_warps": plan["num_warps"], "num_ctas": cfg["num_ctas"]}, targets=("sm_90a",),
                           expect=expect)


def benchmark(quick: bool = False, log=print) -> dict:
    """TFLOP/s at M = N = 8192, K = 512 ... 16384 (fp16), against cuBLAS (CublasLt) and torch.matmul in
    the same run, for 1, 2 and 4 CTAs per cluster."""
    from . import bench
    require(HOPPER, "the hopper-matmul benchmark")
    variants = {f"ctas{n}": (lambda a, b, c, n=n: hopper_matmul(a, b, out=c, num_ctas=n)) for n in (1, 2, 4)}
    columns, rows = bench.matmul_sweep(variants, [512, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384],
                                       log, "hopper-matmul")
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in CONFIG.items()}
    return {"method": {"timer": "do_bench", "statistic": "median", "dtype": "float16", "M": 8192, "N": 8192,
                       "config": config},
            "ceilings": {"cublas_fp16_tflops": {f"8192x8192x{r[0]}": r[-2] for r in rows}},
            "columns": columns, "rows": rows}
