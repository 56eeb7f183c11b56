"""Chapter 3: TMA multicast. Which CTAs receive which tile, what it saves, and the TMA -> MMA loop.

A matmul cluster whose accumulator ``C`` is split by ``cga_layout`` needs, in each CTA, the A rows and
B columns of its own piece of C. CTAs that share M bits need the same A tile; CTAs that share N bits
need the same B tile. So A's layout keeps the accumulator's M components and zeroes N, B's keeps N and
zeroes M (``operands.operand_cga_layouts``): zero bases are broadcasts, and a broadcast tile can be
fetched once and *multicast* by TMA into every CTA that needs it.

In Triton 3.9's lowering one CTA per receiving group issues the multicast load of the whole tile (the
PTX predicates ``cp.async.bulk.tensor...multicast::cluster`` on its cluster rank) and every receiver
expects its own bytes. So a stage may be reloaded only once *every* receiver has released it: on Hopper
that release is built by hand (``ring.release``); on Blackwell ``tcgen05_mma(..., multicast=True)``
signals it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                                                 tcgen05_mma, tcgen05_mma_barrier_count)
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from . import lens
from .core import validate
from .core.hardware import CLUSTERS, SMEM_PER_CTA, TCGEN05, WGMMA, check_cluster_size, check_on_gpu, log2, require
from .gluon.operands import (check_m_split, check_operands, check_tma_tensor, descriptor_type, gl_dtype, nvmma_layout,
                             operand_cga_layouts, stacked_along_m)
from .gluon.ring import RELEASE_GATHER, group_barrier_layout, release, release_mode, ring_barriers, stage_of
from .gluon.scope import scope
from .gluon.sync import sync_inits

# ------------------------------------------------------------------ who receives which tile


def tile_of(bases, cta: int) -> tuple:
    """The block coordinates that CTA ``cta`` holds under ``bases`` (XOR of the selected bases)."""
    bases = validate.bases(bases, "bases")
    validate.index(cta, "cta", 1 << len(bases), f" (a CTA of the {1 << len(bases)} that {len(bases)} bases lay out)")
    coord = [0] * (len(bases[0]) if bases else 2)
    for bit, b in enumerate(bases):
        if cta >> bit & 1:
            coord = [x ^ v for x, v in zip(coord, b)]
    return tuple(coord)


def receivers(bases, num_ctas: int) -> dict:
    """tile coordinates -> the CTAs that hold (and so can receive by multicast) that tile."""
    num_ctas = validate.cluster_size(num_ctas)
    bases = validate.bases(bases, "bases", num_ctas)
    out = {}
    for c in range(num_ctas):
        out.setdefault(tile_of(bases, c), []).append(c)
    return out


def multicast_mask(bases, cta: int, num_ctas: int) -> int:
    """The 16-bit CTA mask of a multicast issued by ``cta``: every CTA holding the same tile."""
    num_ctas = validate.cluster_size(num_ctas)
    bases = validate.bases(bases, "bases", num_ctas)
    validate.index(cta, "cta", num_ctas, f" (a CTA of the cluster of {num_ctas})")
    t = tile_of(bases, cta)
    return sum(1 << c for c in range(num_ctas) if tile_of(bases, c) == t)


# ------------------------------------------------------------------------------------- kernels

@gluon.jit
def multicast_copy_kernel(in_desc, in_ptr, out_desc, bad_ptr, MULTICAST: gl.constexpr, everyone: gl.constexpr,
                          slot: gl.constexpr):
    """Every CTA of the cluster receives the whole tile (its shared layout is a broadcast). Each CTA
    then compares its own copy with the source in global memory and reports its mismatches in
    bad_ptr[rank] (layout `slot`: CTA i holds element i); the tile is also stored back once."""
    M: gl.constexpr = in_desc.block_shape[0]
    N: gl.constexpr = in_desc.block_shape[1]
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    if MULTICAST:
        sync_inits()                                  # a peer's multicast completes bytes on my barrier
    mbarrier.expect(bar, in_desc.nbytes_per_cta)      # the full tile lands in every CTA
    tma.async_load(in_desc, [0, 0], bar, smem, multicast=MULTICAST)
    mbarrier.wait(bar, 0, deps=[smem])
    mbarrier.invalidate(bar)
    mine = smem.load(everyone)                        # each CTA reads its own shared memory
    r = gl.arange(0, M, gl.SliceLayout(1, everyone))[:, None]
    c = gl.arange(0, N, gl.SliceLayout(0, everyone))[None, :]
    source = gl.load(in_ptr + r * N + c)
    bad = gl.sum(gl.sum((mine != source).to(gl.int32), axis=1), axis=0)   # local: `everyone` is a broadcast
    ids = gl.arange(0, gl.num_ctas(), slot)
    gl.store(bad_ptr + ids, bad + ids * 0)
    tma.async_store(out_desc, [0, 0], smem)           # broadcast layout: one CTA stores
    tma.store_wait(0)


# A count of 1 must not become a constant: the release barriers would look unused, and fail to compile.
@gluon.jit(do_not_specialize=["TILES", "SRC_TILES"])
def tile_stream_kernel(desc, out_ptr, TILES, SRC_TILES, MULTICAST: gl.constexpr, STAGES: gl.constexpr,
                       RELEASE: gl.constexpr, group_all: gl.constexpr, INSTRUMENT: gl.constexpr = False,
                       CHECK: gl.constexpr = None, PER_CTA: gl.constexpr = None):
    """Stream TILES tiles into every CTA of the cluster through a ring of STAGES buffers; the
    cluster's CTAs all need the same tiles. MULTICAST: one load per tile, issued by CTA 0 of the
    cluster for all of them (the compiler predicates it on the cluster rank), instead of one load per CTA.

    CHECK (a register layout of 16 rows, or None): each CTA also sums every tile it reads, before releasing it, and
    stores its sum through PER_CTA (a layout with one element per CTA: a scalar store would be made once per cluster)."""
    BR: gl.constexpr = desc.block_shape[0]
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_shape, desc.layout)
    ready, empty, go = ring_barriers(STAGES, RELEASE, group_all)
    if MULTICAST or RELEASE == 1:                      # barriers that cross CTAs: a peer's multicast lands on my
        sync_inits()                                   # `ready`, or every CTA arrives on CTA 0's `empty`
    first = gl.program_id(0) * 13                      # clusters start at different tiles of the source
    for s in gl.static_range(STAGES):                  # prologue: fill the ring
        mbarrier.expect(ready.index(s), desc.nbytes_per_cta)
        tma.async_load(desc, [(first + s) % SRC_TILES * BR, 0], ready.index(s), bufs.index(s), multicast=MULTICAST)
    got = 0
    total = 0.0
    for t in range(TILES):
        slot, phase = stage_of(t, STAGES)
        with scope("wait", INSTRUMENT):                    # timeline scopes: no code unless proton records
            mbarrier.wait(ready.index(slot), phase, deps=[bufs])
        got += 1
        if CHECK is not None:                              # the data, not the count: read the whole tile
            for r in gl.static_range(BR // 16):
                part = bufs.index(slot).slice(r * 16, 16).load(CHECK).to(gl.float32)
                total += gl.sum(gl.sum(part, axis=1), axis=0)
        if t + STAGES < TILES:
            with scope("release", INSTRUMENT):
                release(slot, empty, go, phase, RELEASE)
            with scope("issue", INSTRUMENT):
                mbarrier.expect(ready.index(slot), desc.nbytes_per_cta)
                tma.async_load(desc, [(first + t + STAGES) % SRC_TILES * BR, 0], ready.index(slot), bufs.index(slot),
                               multicast=MULTICAST)
    gl.store(out_ptr + gl.program_id(0), got)
    if CHECK is not None:                                  # after the counts: element c is CTA c's own sum
        mine = gl.arange(0, gl.num_ctas(), PER_CTA)
        sums = out_ptr + gl.num_programs(0) + gl.program_id(0) * gl.num_ctas()
        value = gl.full([gl.num_ctas()], 0, gl.int32, PER_CTA) + total.to(gl.int32)
        gl.store(sums + mine, value)


@gluon.jit
def hopper_multicast_matmul_kernel(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, RELEASE: gl.constexpr,
                                   acc_layout: gl.constexpr, group_all: gl.constexpr):
    """C = A @ B on a cluster of CTAS CTAs stacked along M: each CTA owns BM rows of a
    [CTAS * BM, BN] tile. A is split (each CTA loads its own rows); B is shared and multicast.
    Each K step: wait for the stage, wgmma, then every CTA releases the stage before it is reloaded."""
    BM_ALL: gl.constexpr = a_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    BN: gl.constexpr = b_desc.block_shape[1]
    off_m = gl.program_id(0) * BM_ALL
    off_n = gl.program_id(1) * BN
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape, b_desc.layout)
    ready, empty, go = ring_barriers(STAGES, RELEASE, group_all)
    sync_inits()                                       # B's multicast lands on every CTA's `ready`
    nbytes: gl.constexpr = a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
    k_tiles = gl.cdiv(K, BK)
    for s in gl.static_range(STAGES):                  # prologue (TMA zero-fills past K)
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_load(a_desc, [off_m, s * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [s * BK, off_n], ready.index(s), b_bufs.index(s), multicast=True)
    acc = gl.zeros([BM_ALL, BN], gl.float32, acc_layout)
    steps = gl.maximum(k_tiles, STAGES)               # every loaded stage is consumed, even zero-filled ones
    for t in range(steps):
        slot, phase = stage_of(t, STAGES)
        mbarrier.wait(ready.index(slot), phase)
        acc = hopper.warpgroup_mma(a_bufs.index(slot), b_bufs.index(slot), acc, is_async=True)
        acc, _, _ = hopper.warpgroup_mma_wait(0, deps=[acc, a_bufs.index(slot), b_bufs.index(slot)])
        if t + STAGES < steps:
            release(slot, empty, go, phase, RELEASE)
            mbarrier.expect(ready.index(slot), nbytes)
            k = (t + STAGES) * BK
            tma.async_load(a_desc, [off_m, k], ready.index(slot), a_bufs.index(slot))
            tma.async_load(b_desc, [k, off_n], ready.index(slot), b_bufs.index(slot), multicast=True)
    for s in gl.static_range(STAGES):                  # the epilogue's buffer may reuse the ring's bytes
        mbarrier.invalidate(ready.index(s))
        if RELEASE == 1:
            mbarrier.invalidate(empty.index(s))
            mbarrier.invalidate(go.index(s))
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_shape, c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    hopper.fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


@gluon.jit
def blackwell_multicast_mma_kernel(a_desc, b_desc, c_desc, K_TILES: gl.constexpr, acc_layout: gl.constexpr):
    """One [BM, BN] output tile per cluster, K_TILES steps of TMA (multicast) -> tcgen05. The MMA
    itself tells every CTA of each multicast group when a buffer is free again (multicast=True),
    so the next load cannot overwrite a tile a peer still reads."""
    BK: gl.constexpr = a_desc.block_shape[1]
    TWO: gl.constexpr = acc_layout.two_ctas
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    acc = allocate_tensor_memory(gl.float32, [a_desc.block_shape[0], b_desc.block_shape[1]], acc_layout)
    loaded = mbarrier.allocate_mbarrier(two_ctas=TWO)     # 2-CTA: the pair's leader waits for both
    consumed = mbarrier.allocate_mbarrier()
    mbarrier.init(loaded, count=1)
    mbarrier.init(consumed, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=True, two_ctas=TWO))
    sync_inits()                                    # once: else the init fence runs at every K step
    for k in range(K_TILES):
        phase = k & 1
        mbarrier.expect(loaded, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)   # per CTA, never x cluster
        tma.async_load(a_desc, [0, k * BK], loaded, a_smem, multicast=True)
        tma.async_load(b_desc, [k * BK, 0], loaded, b_smem, multicast=True)
        mbarrier.wait(loaded, phase, deps=[a_smem, b_smem])
        tcgen05_mma(a_smem, b_smem, acc, use_acc=k > 0, multicast=True, mbarriers=[consumed])
        mbarrier.wait(consumed, phase, deps=[a_smem, b_smem])                   # every reader is done
    mbarrier.invalidate(loaded)                     # c_smem may reuse the barriers' bytes (PTX: invalidate first)
    mbarrier.invalidate(consumed)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_shape, c_desc.layout)
    c_smem.store(acc.load().to(c_desc.dtype))
    hopper.fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


# The upstream tutorial's tcgen05 multicast loop (python/tutorials/gluon/14-multicta.py): its cluster, tile and K steps.
UPSTREAM_BLACKWELL = dict(acc_bases=((1, 0), (2, 0)), two_ctas=True, BM=512, BN=128, BK=64, K_TILES=2)


# -------------------------------------------------------------------------------- plans (host)
# Each kernel's layouts and constants, computed once from the call's sizes: the launch and the lens
# spec both read them, so what the book compiles is what runs.

def copy_layouts(num_ctas: int, M: int, N: int, dtype=gl.float16) -> dict:
    validate.cluster_size(num_ctas)
    validate.power_of_two(M, "M", 1, 256)
    validate.power_of_two(N, "N", 1, 256)
    validate.dtype(dtype)
    bits = log2(num_ctas)
    return dict(tile=nvmma_layout([M, N], dtype, [[0, 0]] * bits),        # every CTA holds the whole tile
                everyone=gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0], cga_layout=[[0, 0]] * bits),
                slot=gl.BlockedLayout([1], [32], [4], [0], cga_layout=[[1 << i] for i in range(bits)]))


STREAM_TILE = (128, 128)          # the tile stream's fp16 tile: 32 KiB, the whole of it in every CTA
STREAM_TILE_BYTES = STREAM_TILE[0] * STREAM_TILE[1] * 2


def stream_bases(num_ctas: int) -> list:
    """The stream's CGA layout: every basis zero, every CTA holds the whole tile."""
    validate.cluster_size(num_ctas)
    return [[0, 0]] * log2(num_ctas)


def stream_layout(num_ctas: int):
    return nvmma_layout(list(STREAM_TILE), gl.float16, stream_bases(num_ctas))


def stream_check_layouts(num_ctas: int) -> dict:
    """The tile stream's CHECK path: 16-row slices of the tile read by every CTA (the stream's zero bases), and
    one element per CTA for its sum."""
    return dict(CHECK=gl.BlockedLayout([1, 8], [2, 16], [1, 1], [1, 0], cga_layout=stream_bases(num_ctas)),
                PER_CTA=gl.BlockedLayout([1], [32], [1], [0], cga_layout=[[1 << i] for i in range(log2(num_ctas))]))


def stream_constexprs(num_ctas: int, multicast: bool, release: int, stages: int, instrument: bool = False) -> dict:
    validate.cluster_size(num_ctas)
    validate.boolean(multicast, "multicast")
    validate.count(stages, "stages", high=16)
    validate.boolean(instrument, "instrument")
    return dict(MULTICAST=multicast, STAGES=stages, RELEASE=release, group_all=group_barrier_layout(num_ctas),
                INSTRUMENT=instrument)


@dataclass(frozen=True)
class MulticastMatmulPlan:
    """Chapter 3's Hopper loop: CTAs stacked along M, each BM rows of A, one multicast B tile."""
    num_ctas: int
    bm: int
    bn: int
    bk: int
    stages: int
    release: int
    dtype: object

    @property
    def tile_m(self) -> int:
        return self.bm * self.num_ctas

    def layouts(self) -> dict:
        acc = stacked_along_m(self.num_ctas)
        a_bases, b_bases = operand_cga_layouts(acc)
        return dict(a=nvmma_layout([self.tile_m, self.bk], self.dtype, a_bases),
                    b=nvmma_layout([self.bk, self.bn], self.dtype, b_bases),
                    c=nvmma_layout([self.tile_m, self.bn], self.dtype, acc))

    def constexprs(self) -> dict:
        acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, self.bn, 16],
                                        cga_layout=[list(b) for b in stacked_along_m(self.num_ctas)])
        return dict(STAGES=self.stages, RELEASE=self.release, acc_layout=acc,
                    group_all=group_barrier_layout(self.num_ctas))


def plan_multicast_matmul(num_ctas=2, bm=64, bn=128, bk=64, stages=3, release="mbarrier",
                          dtype=gl.float16) -> MulticastMatmulPlan:
    check_cluster_size(num_ctas)
    validate.integer(bm, "bm")
    validate.integer(bn, "bn", 8, 256)
    validate.power_of_two(bk, "bk", 16, 256, " (a TMA box of 16-byte rows)")
    validate.count(stages, "stages", high=16)
    mode = release if isinstance(release, int) else release_mode(release, num_ctas)
    if bm != 64 or (bn % 8) or bn > 256:
        raise ValueError("this kernel uses one warpgroup per CTA: bm must be 64 and bn a multiple of 8 up to 256")
    smem = stages * (bm * bk + bk * bn) * 2 + bm * bn * 2          # per CTA: A rows, all of B, C staging
    if smem > SMEM_PER_CTA:
        raise ValueError(f"{stages} stages need {smem // 1024} KiB of shared memory per CTA (at most "
                         f"{SMEM_PER_CTA // 1024} KiB); use fewer stages or smaller tiles")
    return MulticastMatmulPlan(num_ctas, bm, bn, bk, stages, mode, dtype)


@dataclass(frozen=True)
class BlackwellLoopPlan:
    """Chapter 3's tcgen05 loop (the upstream tutorial's example): one [BM, BN] tile per cluster."""
    acc_bases: tuple
    two_ctas: bool
    BM: int
    BN: int
    BK: int
    dtype: object

    @property
    def num_ctas(self) -> int:
        return 1 << len(self.acc_bases)

    def layouts(self) -> dict:
        a_bases, b_bases = operand_cga_layouts(self.acc_bases, self.two_ctas)
        cta_m = self.BM >> sum(1 for m, _ in self.acc_bases if m)
        return dict(a=nvmma_layout([self.BM, self.BK], self.dtype, a_bases),
                    b=nvmma_layout([self.BK, self.BN], self.dtype, b_bases),
                    c=nvmma_layout([self.BM, self.BN], self.dtype, self.acc_bases),
                    acc=TensorMemoryLayout(block=(cta_m, self.BN), col_stride=1,
                                           cga_layout=[list(b) for b in self.acc_bases], two_ctas=self.two_ctas))


def plan_blackwell_loop(acc_bases=UPSTREAM_BLACKWELL["acc_bases"], two_ctas=UPSTREAM_BLACKWELL["two_ctas"],
                        BM=UPSTREAM_BLACKWELL["BM"], BN=UPSTREAM_BLACKWELL["BN"], BK=UPSTREAM_BLACKWELL["BK"],
                        dtype=gl.float16) -> BlackwellLoopPlan:
    acc_bases = validate.bases(acc_bases, "acc_bases", rank=2)
    validate.cluster_size(1 << len(acc_bases), "1 << len(acc_bases)")
    validate.boolean(two_ctas, "two_ctas")
    validate.integer(BM, "BM", 1, 1024)
    validate.integer(BN, "BN")
    validate.power_of_two(BK, "BK", 16, 256, " (a TMA box of 16-byte rows)")
    check_m_split(acc_bases, "blackwell_multicast_mma")
    operand_cga_layouts(acc_bases, two_ctas)                 # validates the bases
    split_m = 1 << sum(1 for m, _ in acc_bases if m)
    if BM % split_m or BM // split_m not in ((128,) if two_ctas else (64, 128)):
        raise ValueError(f"BM = {BM} over {1 << len(acc_bases)} CTAs stacked along M gives {BM / split_m:g} rows per "
                         f"CTA; tcgen05 needs {'128 (2-CTA)' if two_ctas else '64 or 128'}")
    if BN & (BN - 1) or not 16 <= BN <= 256:     # B is one [BK, BN] TMA box: a power of two (check_tma_tensor)
        raise ValueError(f"BN must be a power of two from 16 to 256 (tensor-memory columns; a TMA box), got {BN}")
    return BlackwellLoopPlan(acc_bases, two_ctas, BM, BN, BK, dtype)


# -------------------------------------------------------------------------------- host wrappers

def blackwell_multicast_mma(a, b, *, acc_bases=((1, 0), (2, 0)), two_ctas=True, bk=64):
    """One output tile C = A @ B computed by a cluster (Blackwell only): A is (BM, K), B is (K, BN)."""
    validate.power_of_two(bk, "bk", 16, 256, " (a TMA box of 16-byte rows)")
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    BM, BN, K = check_operands(a, b)
    if K % bk or K < 1:
        raise ValueError(f"K must be a positive multiple of {bk}, got {K}")
    plan = plan_blackwell_loop(acc_bases, two_ctas, BM, BN, bk, gl_dtype(a))
    check_tma_tensor(a, "a", [min(BM, 256), bk])
    check_tma_tensor(b, "b", [bk, BN])
    require(TCGEN05, "blackwell_multicast_mma")
    check_on_gpu(a, "a")
    check_on_gpu(b, "b")
    lay = plan.layouts()
    c = torch.empty((BM, BN), device=a.device, dtype=a.dtype)
    blackwell_multicast_mma_kernel[(1,)](TensorDescriptor.from_tensor(a, [BM, bk], lay["a"]),
                                         TensorDescriptor.from_tensor(b, [bk, BN], lay["b"]),
                                         TensorDescriptor.from_tensor(c, [BM, BN], lay["c"]), K // bk, lay["acc"],
                                         num_warps=4, num_ctas=plan.num_ctas)
    return c


def multicast_copy(x, num_ctas: int, multicast: bool = True):
    """Deliver the 2-D tile ``x`` into the shared memory of each of ``num_ctas`` CTAs (one multicast,
    or one load per CTA). Returns (per-CTA mismatch counts against ``x``, the tile stored back)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    check_cluster_size(num_ctas, low=2)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    dtype = gl_dtype(x)
    check_tma_tensor(x, "x", x.shape)
    if x.shape[0] < 4 or x.shape[1] < 32 or x.stride(0) != x.shape[1]:
        raise ValueError("multicast_copy takes a contiguous tile of at least 4 x 32 elements")
    require(CLUSTERS, "multicast_copy")
    check_on_gpu(x, "x")
    M, N = x.shape
    lay = copy_layouts(num_ctas, M, N, dtype)
    out = torch.full_like(x, float("nan"))
    bad = torch.full((num_ctas,), -1, device=x.device, dtype=torch.int32)
    multicast_copy_kernel[(1,)](TensorDescriptor.from_tensor(x, [M, N], lay["tile"]), x,
                                TensorDescriptor.from_tensor(out, [M, N], lay["tile"]), bad, MULTICAST=multicast,
                                everyone=lay["everyone"], slot=lay["slot"], num_warps=4, num_ctas=num_ctas)
    return bad, out


def hopper_multicast_matmul(a, b, *, num_ctas: int = 2, bm: int = 64, bn: int = 128, bk: int = 64,
                            stages: int = 3, release: str = "mbarrier", out=None):
    """C = A @ B (fp16 or bf16, fp32 accumulation) on clusters of ``num_ctas`` CTAs stacked along M,
    B multicast to all of them. ``release``: "mbarrier" (gather on CTA 0, broadcast back) or
    "cluster" (a cluster barrier per K step). ``out``: an (M, N) tensor of A's dtype and device to write C
    into (tests poison it); by default a new one. Hopper only: wgmma does not exist on Blackwell."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    M, N, K = check_operands(a, b)
    plan = plan_multicast_matmul(num_ctas, bm, bn, bk, stages, release, gl_dtype(a))
    if K % 8:
        raise ValueError(f"K must be a multiple of 8 (16-byte aligned rows of A for TMA), got {K}")
    check_tma_tensor(a, "a", [plan.tile_m, bk])
    check_tma_tensor(b, "b", [bk, bn])
    require(WGMMA, "hopper_multicast_matmul")
    check_on_gpu(a, "a")
    check_on_gpu(b, "b")
    if out is not None and (tuple(out.shape) != (M, N) or out.dtype != a.dtype or out.device != a.device
                            or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous ({M}, {N}) {a.dtype} tensor on {a.device}, got "
                         f"{tuple(out.shape)} {out.dtype} on {out.device}")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype) if out is None else out
    lay = plan.layouts()
    grid = (math.ceil(M / plan.tile_m), math.ceil(N / bn))
    hopper_multicast_matmul_kernel[grid](TensorDescriptor.from_tensor(a, [plan.tile_m, bk], lay["a"]),
                                         TensorDescriptor.from_tensor(b, [bk, bn], lay["b"]),
                                         TensorDescriptor.from_tensor(c, [plan.tile_m, bn], lay["c"]), K,
                                         **plan.constexprs(), num_warps=4, num_ctas=num_ctas)
    return c


def tile_stream(num_ctas: int, *, multicast: bool, release: str = "mbarrier", clusters: int | None = None,
                tiles: int = 64, src_tiles: int = 256, stages: int = 4, instrument: bool = False):
    """Launch the tile stream; returns (launch function, delivered bytes per launch). The source is
    ``src_tiles`` tiles of 128 x 128 fp16 (8 MiB by default: it stays in L2)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    mode = _check_stream(num_ctas, multicast, release, clusters, tiles, src_tiles, stages, instrument)
    require(CLUSTERS, "tile_stream")
    clusters = clusters or max(1, 128 // num_ctas)
    rows, cols = STREAM_TILE
    src = torch.randn(src_tiles * rows, cols, device="cuda", dtype=torch.float16)
    desc = TensorDescriptor.from_tensor(src, list(STREAM_TILE), stream_layout(num_ctas))
    out = torch.zeros(clusters, device="cuda", dtype=torch.int32)

    def launch():
        tile_stream_kernel[(clusters,)](desc, out, tiles, src_tiles, **stream_constexprs(num_ctas, multicast, mode, stages, instrument),
                                        num_warps=1, num_ctas=num_ctas)
        return out
    return launch, clusters * num_ctas * tiles * STREAM_TILE_BYTES


def tile_stream_sums(num_ctas: int, *, multicast: bool, release: str = "mbarrier", clusters: int = 8, tiles: int = 64,
                     src_tiles: int = 64, stages: int = 4):
    """The tile stream with its data checked: each CTA sums every tile it reads (before releasing it) into its own
    int32; returns (tiles waited for per cluster, each CTA's sum, each CTA's expected sum), as tensors. The
    source holds small integers (fp16, exact), so every partial sum is exact in fp32 in any order: a tile
    overwritten while a CTA still reads it gives a wrong sum, where the count alone stays right."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    mode = _check_stream(num_ctas, multicast, release, clusters, tiles, src_tiles, stages, False)
    require(CLUSTERS, "tile_stream_sums")
    rows, cols = STREAM_TILE
    src = torch.randint(-4, 5, (src_tiles * rows, cols), device="cuda").to(torch.float16)
    desc = TensorDescriptor.from_tensor(src, list(STREAM_TILE), stream_layout(num_ctas))
    out = torch.full((clusters * (1 + num_ctas),), -1, device="cuda", dtype=torch.int32)      # poisoned
    tile_stream_kernel[(clusters,)](desc, out, tiles, src_tiles, **stream_constexprs(num_ctas, multicast, mode, stages),
                                    **stream_check_layouts(num_ctas), num_warps=1, num_ctas=num_ctas)
    per_tile = src.float().view(src_tiles, rows * cols).sum(1).cpu()
    firsts = torch.arange(clusters) * 13                     # the kernel's first tile of each cluster
    which = (firsts[:, None] + torch.arange(tiles)[None, :]) % src_tiles
    expected = per_tile[which].sum(1).to(torch.int32).repeat_interleave(num_ctas)
    return out[:clusters].cpu(), out[clusters:].cpu(), expected


def _check_stream(num_ctas, multicast, release, clusters, tiles, src_tiles, stages, instrument) -> int:
    """Every argument of a tile stream checked, before any hardware is touched; returns the release mode."""
    check_cluster_size(num_ctas, low=2 if multicast else 1)
    validate.boolean(multicast, "multicast")
    validate.optional_count(clusters, "clusters", high=1 << 16)
    validate.count(tiles, "tiles", high=1 << 20)
    validate.count(src_tiles, "src_tiles", high=1 << 14)      # 32 KiB each: at most 512 MiB of source
    validate.count(stages, "stages", high=6)                  # 32 KiB each: at most 192 of the 227 KiB
    validate.boolean(instrument, "instrument")
    if multicast and release == "none":
        raise ValueError("release='none' needs multicast=False: with multicast a peer's load overwrites my stage, "
                         "so every CTA must release it first; use 'mbarrier', 'cluster' or 'relaxed'")
    return release_mode(release, num_ctas, allowed=("cluster", "mbarrier", "none", "relaxed"))


STREAM_VARIANTS = {False: ("none", "relaxed", "cluster", "mbarrier"), True: ("relaxed", "cluster", "mbarrier")}


# ------------------------------------------------------------------------------------------ lens

def multicast_copy_spec(num_ctas: int = 2, multicast: bool = True, M: int = 128, N: int = 64):
    validate.boolean(multicast, "multicast")
    lay = copy_layouts(num_ctas, M, N)
    d = descriptor_type(gl.float16, [M, N], lay["tile"])
    expect = ("cp.async.bulk.tensor", ".multicast::cluster") if multicast else ("cp.async.bulk.tensor",)
    return lens.KernelSpec("multicast_copy", multicast_copy_kernel,
                           {"in_desc": d, "in_ptr": "*fp16", "out_desc": d, "bad_ptr": "*i32", "MULTICAST": "constexpr",
                            "everyone": "constexpr", "slot": "constexpr"},
                           {"MULTICAST": multicast, "everyone": lay["everyone"], "slot": lay["slot"]},
                           {"num_warps": 4, "num_ctas": num_ctas}, expect=expect)


def tile_stream_spec(num_ctas: int = 4, multicast: bool = True, release: int = RELEASE_GATHER, stages: int = 4):
    d = descriptor_type(gl.float16, list(STREAM_TILE), stream_layout(num_ctas))
    return lens.KernelSpec("tile_stream", tile_stream_kernel,
                           {"desc": d, "out_ptr": "*i32", "TILES": "i32", "SRC_TILES": "i32", "MULTICAST": "constexpr",
                            "STAGES": "constexpr", "RELEASE": "constexpr", "group_all": "constexpr",
                            "INSTRUMENT": "constexpr", "CHECK": "constexpr", "PER_CTA": "constexpr"},
                           {**stream_constexprs(num_ctas, multicast, release, stages), "CHECK": None, "PER_CTA": None},
                           {"num_warps": 1, "num_ctas": num_ctas}, expect=("cp.async.bulk.tensor",))


def hopper_multicast_matmul_spec(num_ctas: int = 2, release: int = RELEASE_GATHER, bm: int = 64, bn: int = 128,
                                 bk: int = 64, stages: int = 3):
    plan = plan_multicast_matmul(num_ctas, bm, bn, bk, stages, release)
    lay = plan.layouts()
    sig = {"a_desc": descriptor_type(gl.float16, [plan.tile_m, bk], lay["a"]),
           "b_desc": descriptor_type(gl.float16, [bk, bn], lay["b"]),
           "c_desc": descriptor_type(gl.float16, [plan.tile_m, bn], lay["c"]),
           "K": "i32", "STAGES": "constexpr", "RELEASE": "constexpr", "acc_layout": "constexpr", "group_all": "constexpr"}
    return lens.KernelSpec("hopper_multicast_matmul", hopper_multicast_matmul_kernel, sig, plan.constexprs(),
                           {"num_warps": 4, "num_ctas": num_ctas}, targets=("sm_90a",),
                           expect=(".multicast::cluster", "wgmma.mma_async", ".reqnctapercluster"))


def blackwell_multicast_mma_spec(acc_bases=UPSTREAM_BLACKWELL["acc_bases"], two_ctas=UPSTREAM_BLACKWELL["two_ctas"],
                                 BM=UPSTREAM_BLACKWELL["BM"], BN=UPSTREAM_BLACKWELL["BN"], BK=UPSTREAM_BLACKWELL["BK"],
                                 K_TILES=UPSTREAM_BLACKWELL["K_TILES"]):
    plan = plan_blackwell_loop(acc_bases, two_ctas, BM, BN, BK)
    lay = plan.layouts()
    sig = {"a_desc": descriptor_type(gl.float16, [BM, BK], lay["a"]),
           "b_desc": descriptor_type(gl.float16, [BK, BN], lay["b"]),
           "c_desc": descriptor_type(gl.float16, [BM, BN], lay["c"]), "K_TILES": "constexpr", "acc_layout": "constexpr"}
    expect = ("tcgen05.mma", ".multicast::cluster", "tcgen05.commit") + (("cta_group::2",) if two_ctas else ())
    return lens.KernelSpec("blackwell_multicast_mma", blackwell_multicast_mma_kernel, sig,
                           {"K_TILES": K_TILES, "acc_layout": lay["acc"]}, {"num_warps": 4, "num_ctas": plan.num_ctas},
                           targets=("sm_100a",), expect=expect)
