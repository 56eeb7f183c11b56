"""The Gluon primer: the chapter between Part 0 and chapter 1, all of it inside one CTA.

Part 0's ``tl`` kernels leave four things to the compiler that the rest of the book writes by
hand: which thread holds which element (a *layout*), where a tile sits on chip (*shared memory*),
how a tile arrives without a thread copying it (a *TMA* copy, completed on an *mbarrier*) and
which warps do what (*warp specialisation*). This module has one short kernel for each, its host
wrapper and its lens spec. Every kernel runs on one CTA of a Hopper or Blackwell GPU, and the lens
compiles it for sm_90a and sm_100a on any machine.

The pure-Python pieces are small models that the chapter checks against Triton:
:func:`blocked_owner` (who holds an element of a ``BlockedLayout``), :func:`bank_conflicts` (how
many shared-memory wavefronts a warp's read needs), :func:`ring_schedule` (slot and parity of every
step of a ring of buffers), and :func:`ring_protocol` / :func:`ws_protocol`, the two TMA kernels
written for chapter 2's protocol checker.
"""
from __future__ import annotations

import math

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from . import lens
from .core import validate
from .core.dtypes import DTYPES
from .core.hardware import CLUSTERS, LANES, check_on_gpu, require

# ------------------------------------------------------------------ a BlockedLayout, in Python


def blocked_owner(size_per_thread, threads_per_warp, warps_per_cta, order, shape, index) -> tuple:
    """(warp, lane, register) holding element ``index`` of a tensor of ``shape`` under
    ``gl.BlockedLayout(size_per_thread, threads_per_warp, warps_per_cta, order)`` on one CTA.

    Along each dimension the layout covers ``size * threads * warps`` elements (its *tile*); a
    larger tensor repeats the tile, and each repeat gives every thread more registers. Lanes, warps
    and registers are numbered with dimension ``order[0]`` moving fastest. For shapes made of whole
    tiles only (in a smaller tensor several threads hold the same element)."""
    dims = len(shape)
    parts = (size_per_thread, threads_per_warp, warps_per_cta, order, index)
    if not all(len(v) == dims for v in parts):
        raise ValueError(f"every argument needs one entry per dimension of shape {list(shape)}")
    if math.prod(threads_per_warp) != LANES:
        raise ValueError(f"threads_per_warp must multiply to {LANES}, got {list(threads_per_warp)}")
    tile = [s * t * w for s, t, w in zip(size_per_thread, threads_per_warp, warps_per_cta)]
    if any(n % t for n, t in zip(shape, tile)):
        raise ValueError(f"the model covers whole tiles only: shape {list(shape)} is not a "
                         f"multiple of the layout's tile {tile}")
    rep, warp, lane, elem = [], [], [], []
    for x, s, t, cover in zip(index, size_per_thread, threads_per_warp, tile):
        rep.append(x // cover)
        x %= cover
        warp.append(x // (s * t))
        lane.append(x % (s * t) // s)
        elem.append(x % s)

    def linear(digits, sizes):                  # dimension order[0] is the fastest digit
        out, scale = 0, 1
        for d in order:
            out += digits[d] * scale
            scale *= sizes[d]
        return out
    reps = [n // t for n, t in zip(shape, tile)]
    reg = linear(elem, size_per_thread) + math.prod(size_per_thread) * linear(rep, reps)
    return linear(warp, warps_per_cta), linear(lane, threads_per_warp), reg


# ------------------------------------------------------------------ shared-memory banks, in Python

BANKS = 32          # 32 banks of 4 bytes each serve a warp's request per cycle (CUDA C++
BANK_BYTES = 4      # Programming Guide, "Shared Memory", compute capability 5.x and later)


def bank_conflicts(reg_own, smem_own, elem_bytes: int = 4) -> list[int]:
    """Wavefronts of each warp-wide read when warp 0 loads a tile held in registers as ``reg_own``
    from shared memory laid out as ``smem_own`` (both :class:`~multicta_kernels.core.layouts.Ownership`
    of one shape, parsed from Triton's views). One entry per register: 1 means the 32 lanes hit 32
    different banks (or the same word), n that the read is split into n. A model of 4-byte accesses
    (``ld.shared.b32``); a vector access ``.v2`` / ``.v4`` is served in other groups of lanes."""
    import numpy as np
    if reg_own.shape != smem_own.shape:
        raise ValueError(f"the layouts describe different shapes: {reg_own.shape} and "
                         f"{smem_own.shape}")
    out = []
    for r in range(int(reg_own.reg.max()) + 1):
        words = {}                                  # bank -> the distinct 4-byte words asked of it
        for idx in zip(*np.nonzero((reg_own.warp == 0) & (reg_own.reg == r))):
            word = int(smem_own.reg[idx]) * elem_bytes // BANK_BYTES
            words.setdefault(word % BANKS, set()).add(word)
        out.append(max(len(w) for w in words.values()))
    return out


# ------------------------------------------------------------------ a ring of buffers, in Python

def ring_schedule(tiles: int, stages: int) -> list[dict]:
    """Step ``t`` of a ring of ``stages`` buffers: its slot, the parity it waits on, and how many
    phases of that slot's barrier have completed when the wait returns. The parity flips each time
    a slot comes round."""
    validate.count(tiles, "tiles", high=1 << 16)
    validate.count(stages, "stages", high=64)
    if tiles < 1 or stages < 1:
        raise ValueError(f"tiles and stages must be at least 1, got {tiles} and {stages}")
    return [{"t": t, "slot": t % stages, "parity": (t // stages) & 1, "completed": t // stages + 1}
            for t in range(tiles)]


# ------------------------------------------------------------ 1-2. registers: load, compute, store

@gluon.jit
def transpose_kernel(x_ptr, y_ptr, M, N, alpha, BM: gl.constexpr, BN: gl.constexpr,
                     load_layout: gl.constexpr, store_layout: gl.constexpr):
    """y = alpha * x.T for x of shape [M, N]: each program loads a [BM, BN] tile in
    ``load_layout`` and stores it in ``store_layout``."""
    r0 = gl.program_id(0) * BM
    c0 = gl.program_id(1) * BN
    r = r0 + gl.arange(0, BM, gl.SliceLayout(1, load_layout))[:, None]    # [BM, 1]
    c = c0 + gl.arange(0, BN, gl.SliceLayout(0, load_layout))[None, :]    # [1, BN]
    tile = gl.load(x_ptr + r * N + c, mask=(r < M) & (c < N))            # rows of x
    tile = (tile * alpha).to(y_ptr.dtype.element_ty)                      # fp32 math, y's dtype
    # y[c, r] = x[r, c]: in y, r is the contiguous index. Hand the tile to threads owning runs of r.
    tile = gl.convert_layout(tile, store_layout)
    r = r0 + gl.arange(0, BM, gl.SliceLayout(1, store_layout))[:, None]
    c = c0 + gl.arange(0, BN, gl.SliceLayout(0, store_layout))[None, :]
    gl.store(y_ptr + c * M + r, tile, mask=(r < M) & (c < N))


# ------------------------------------------------------------------ 3. shared memory, by hand

@gluon.jit
def smem_transpose_kernel(x_ptr, y_ptr, M, N, alpha, BM: gl.constexpr, BN: gl.constexpr,
                          load_layout: gl.constexpr, store_layout: gl.constexpr,
                          smem_layout: gl.constexpr):
    """``transpose_kernel`` with the conversion written out: the tile goes through shared memory."""
    r0 = gl.program_id(0) * BM
    c0 = gl.program_id(1) * BN
    r = r0 + gl.arange(0, BM, gl.SliceLayout(1, load_layout))[:, None]
    c = c0 + gl.arange(0, BN, gl.SliceLayout(0, load_layout))[None, :]
    tile = (gl.load(x_ptr + r * N + c, mask=(r < M) & (c < N)) * alpha).to(y_ptr.dtype.element_ty)
    smem = gl.allocate_shared_memory(y_ptr.dtype.element_ty, [BM, BN], smem_layout)
    smem.store(tile)                     # every thread writes what it holds ...
    tile = smem.load(store_layout)       # ... and reads what others wrote (the compiler syncs)
    r = r0 + gl.arange(0, BM, gl.SliceLayout(1, store_layout))[:, None]
    c = c0 + gl.arange(0, BN, gl.SliceLayout(0, store_layout))[None, :]
    gl.store(y_ptr + c * M + r, tile, mask=(r < M) & (c < N))


# ------------------------------------------------------------------ 4. TMA and an mbarrier ring

@gluon.jit
def tile_coord(t, tiles_n, BM: gl.constexpr, BN: gl.constexpr):
    """Where tile ``t`` starts, tiles numbered row by row."""
    return [t // tiles_n * BM, t % tiles_n * BN]


@gluon.jit
def tma_ring_kernel(in_desc, out_desc, num_tiles, tiles_n, alpha, STAGES: gl.constexpr,
                    layout: gl.constexpr):
    """One CTA streams every tile of the input through a ring of STAGES shared buffers filled by
    TMA, and writes alpha * tile back with a TMA store."""
    BM: gl.constexpr = in_desc.block_shape[0]
    BN: gl.constexpr = in_desc.block_shape[1]
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES, BM, BN], in_desc.layout)
    out_buf = gl.allocate_shared_memory(out_desc.dtype, [BM, BN], out_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)     # ready[s]: slot s holds its next tile
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)           # one arrival a phase: the expect
    for s in gl.static_range(STAGES):                    # prologue: start the first loads
        mbarrier.expect(ready.index(s), in_desc.nbytes_per_cta, pred=s < num_tiles)
        tma.async_load(in_desc, tile_coord(s, tiles_n, BM, BN), ready.index(s), bufs.index(s),
                       pred=s < num_tiles)
    for t in range(num_tiles):
        slot = t % STAGES
        phase = (t // STAGES) & 1                        # flips each time the slot comes round
        mbarrier.wait(ready.index(slot), phase)          # the tile's bytes have landed
        tile = bufs.index(slot).load(layout)
        nxt = t + STAGES                                 # the slot has been read: refill it
        mbarrier.expect(ready.index(slot), in_desc.nbytes_per_cta, pred=nxt < num_tiles)
        tma.async_load(in_desc, tile_coord(nxt, tiles_n, BM, BN), ready.index(slot),
                       bufs.index(slot), pred=nxt < num_tiles)
        tma.store_wait(0)                                # the last store has read out_buf
        out_buf.store((tile * alpha).to(out_desc.dtype))
        fence_async_shared()                             # our writes, visible to the TMA unit
        tma.async_store(out_desc, tile_coord(t, tiles_n, BM, BN), out_buf)
    tma.store_wait(0)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))


# ------------------------------------------------------------------ 5. warp specialisation

@gluon.jit
def load_partition(in_desc, bufs, ready, empty, num_tiles, tiles_n, STAGES: gl.constexpr):
    """The producer: one warp that only issues TMA loads into the ring."""
    BM: gl.constexpr = in_desc.block_shape[0]
    BN: gl.constexpr = in_desc.block_shape[1]
    for t in range(num_tiles):
        slot = t % STAGES
        phase = (t // STAGES) & 1
        mbarrier.wait(empty.index(slot), phase ^ 1)      # freed by the consumer; round 0 passes
        mbarrier.expect(ready.index(slot), in_desc.nbytes_per_cta)
        tma.async_load(in_desc, tile_coord(t, tiles_n, BM, BN), ready.index(slot),
                       bufs.index(slot))


@gluon.jit
def compute_partition(out_desc, bufs, out_buf, ready, empty, num_tiles, tiles_n, alpha,
                      STAGES: gl.constexpr, layout: gl.constexpr):
    """The consumer (the default partition: the kernel's num_warps warps): wait, read, free,
    compute, store."""
    BM: gl.constexpr = out_desc.block_shape[0]
    BN: gl.constexpr = out_desc.block_shape[1]
    for t in range(num_tiles):
        slot = t % STAGES
        phase = (t // STAGES) & 1
        mbarrier.wait(ready.index(slot), phase)
        tile = bufs.index(slot).load(layout)
        mbarrier.arrive(empty.index(slot))               # the slot may be refilled
        tma.store_wait(0)
        out_buf.store((tile * alpha).to(out_desc.dtype))
        fence_async_shared()
        tma.async_store(out_desc, tile_coord(t, tiles_n, BM, BN), out_buf)
    tma.store_wait(0)


@gluon.jit
def ws_scale_kernel(in_desc, out_desc, num_tiles, tiles_n, alpha, STAGES: gl.constexpr,
                    layout: gl.constexpr):
    """``tma_ring_kernel``'s work split between a loading warp and the computing warps."""
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES] + in_desc.block_shape, in_desc.layout)
    out_buf = gl.allocate_shared_memory(out_desc.dtype, out_desc.block_shape, out_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)     # the tile's bytes have landed
    empty = mbarrier.allocate_mbarrier(batch=STAGES)     # the consumer is done with the slot
    for s in gl.static_range(STAGES):                    # before warp_specialize (chapter 2)
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    gl.warp_specialize([
        (compute_partition, (out_desc, bufs, out_buf, ready, empty, num_tiles, tiles_n, alpha,
                             STAGES, layout)),
        (load_partition, (in_desc, bufs, ready, empty, num_tiles, tiles_n, STAGES)),
    ], [1], [24])                                        # the producer: 1 warp, 24 registers
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


# ------------------------------------------------------------------ layouts and host wrappers

NUM_WARPS = 4
BLOCK = 32              # the transposes' tile: [BLOCK, BLOCK]
TMA_BLOCK = (64, 64)    # the TMA kernels' tile
STAGES = 2


def row_layout(num_warps: int = NUM_WARPS):
    """4 consecutive columns per thread, a warp's lanes along rows first: 16-byte reads of rows."""
    return gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])


def column_layout(num_warps: int = NUM_WARPS):
    """4 consecutive rows per thread, lanes down columns first: what a row of x.T is made of."""
    return gl.BlockedLayout([4, 1], [8, 4], [1, num_warps], [0, 1])


def smem_layout(swizzled: bool = True):
    """The transpose's shared buffer, rows one after another: each row's 4-byte words permuted by
    the row number (``swizzled``: column XOR row mod 32) or left in place."""
    if swizzled:
        return gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=32, order=[1, 0])
    return gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0])


HOW = ("registers", "convert", "shared", "shared-unswizzled")


def _transpose_kernel(how: str) -> tuple:
    """(kernel, constexprs) of a way to transpose: "registers" stores in the load layout (no
    conversion), "convert" converts with gl.convert_layout, "shared" goes through a swizzled shared
    buffer by hand, "shared-unswizzled" through a plain one."""
    if how not in HOW:
        raise ValueError(f"how must be one of {', '.join(HOW)}, got {how!r}")
    c = {"BM": BLOCK, "BN": BLOCK, "load_layout": row_layout(),
         "store_layout": row_layout() if how == "registers" else column_layout()}
    if how.startswith("shared"):
        return smem_transpose_kernel, {**c, "smem_layout": smem_layout(how == "shared")}
    return transpose_kernel, c


def transpose(x, alpha: float = 1.0, how: str = "convert", out=None):
    """alpha * x.T, one CTA per [32, 32] tile, into ``out`` (a contiguous (N, M) tensor of x's
    dtype; by default a new one). x: 2-D float32, float16 or bfloat16. ``how``: one of
    :data:`HOW`."""
    import torch
    kernel, c = _transpose_kernel(how)
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError("x must be a 2-D torch tensor")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"x must be float32, float16 or bfloat16, got {x.dtype}")
    if min(x.shape) < 1:
        raise ValueError(f"x needs at least one row and one column, got shape {tuple(x.shape)}")
    M, N = x.shape
    if out is not None and (not isinstance(out, torch.Tensor) or tuple(out.shape) != (N, M)
                            or out.dtype != x.dtype or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous ({N}, {M}) {x.dtype} tensor (x transposed)")
    require(CLUSTERS, "the primer's kernels")
    check_on_gpu(x, "x")
    x = x.contiguous()
    y = torch.empty((N, M), device=x.device, dtype=x.dtype) if out is None else out
    check_on_gpu(y, "out")
    grid = (math.ceil(M / BLOCK), math.ceil(N / BLOCK))
    kernel[grid](x, y, M, N, float(alpha), **c, num_warps=NUM_WARPS)
    return y


def _tma_call(x, stages, block, out, what):
    """The TMA wrappers' shared front: arguments first, then the hardware, then the descriptors."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    from .gluon.operands import check_tma_tensor, gl_dtype
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError("x must be a 2-D torch tensor")
    dtype = gl_dtype(x)
    check_tma_tensor(x, "x", list(block))
    if min(x.shape) < 1:
        raise ValueError(f"x needs at least one row and one column, got shape {tuple(x.shape)}")
    if isinstance(stages, bool) or not isinstance(stages, int) or not 1 <= stages <= 4:
        raise ValueError(f"stages must be an integer from 1 to 4, got {stages!r}")
    if out is not None:
        if not isinstance(out, torch.Tensor) or out.shape != x.shape or out.dtype != x.dtype:
            raise ValueError(f"out must be a {tuple(x.shape)} {x.dtype} tensor, like x")
        check_tma_tensor(out, "out", list(block))
    require(CLUSTERS, what)
    check_on_gpu(x, "x")
    out = torch.empty_like(x) if out is None else out
    check_on_gpu(out, "out")
    layout = gl.NVMMASharedLayout.get_default_for(list(block), dtype)
    tiles_n = math.ceil(x.shape[1] / block[1])
    num_tiles = math.ceil(x.shape[0] / block[0]) * tiles_n
    descs = [TensorDescriptor.from_tensor(t, list(block), layout) for t in (x, out)]
    return descs, out, num_tiles, tiles_n


def tma_scale(x, alpha: float = 2.0, stages: int = STAGES, block=TMA_BLOCK, out=None):
    """alpha * x by one CTA, every tile loaded by TMA into a ring of ``stages`` buffers
    (``tma_ring_kernel``). x: 2-D float32, float16 or bfloat16 with 16-byte aligned rows."""
    (a, b), out, num_tiles, tiles_n = _tma_call(x, stages, block, out, "tma_scale")
    tma_ring_kernel[(1,)](a, b, num_tiles, tiles_n, float(alpha), STAGES=stages,
                          layout=row_layout(), num_warps=NUM_WARPS)
    return out


def ws_scale(x, alpha: float = 2.0, stages: int = STAGES, block=TMA_BLOCK, out=None):
    """``tma_scale`` with a producer warp and consumer warps (``ws_scale_kernel``)."""
    (a, b), out, num_tiles, tiles_n = _tma_call(x, stages, block, out, "ws_scale")
    ws_scale_kernel[(1,)](a, b, num_tiles, tiles_n, float(alpha), STAGES=stages,
                          layout=row_layout(), num_warps=NUM_WARPS)
    return out


# ------------------------------------------------------------------ lens specs (the catalog's)

def transpose_spec(how: str = "convert"):
    kernel, c = _transpose_kernel(how)
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "alpha": "fp32",
           **{k: "constexpr" for k in c}}
    expect = {"registers": ("ld.global.v4.b32", "st.global.b32"),
              "convert": ("ld.global.v4.b32", "st.shared", "bar.sync", "ld.shared",
                          "st.global.v4.b32")}
    return lens.KernelSpec(f"primer_transpose ({how})", kernel, sig, c, {"num_warps": NUM_WARPS},
                           expect=expect.get(how, expect["convert"]),
                           divisible=("x_ptr", "y_ptr", "M", "N"))


TMA_PTX = ("mbarrier.init", "mbarrier.arrive.expect_tx",
           "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes",
           "mbarrier.try_wait.parity", "fence.proxy.async.shared::cta",
           "cp.async.bulk.tensor.2d.global.shared::cta", "cp.async.bulk.wait_group.read")


def _tma_spec(name, kernel, stages, dtype, expect):
    validate.dtype(dtype)
    validate.count(stages, "stages", high=64)
    from .gluon.operands import descriptor_type
    layout = gl.NVMMASharedLayout.get_default_for(list(TMA_BLOCK), DTYPES[dtype].gl)
    desc = descriptor_type(dtype, TMA_BLOCK, layout)
    sig = {"in_desc": desc, "out_desc": desc, "num_tiles": "i32", "tiles_n": "i32", "alpha": "fp32",
           "STAGES": "constexpr", "layout": "constexpr"}
    return lens.KernelSpec(name, kernel, sig, {"STAGES": stages, "layout": row_layout()},
                           {"num_warps": NUM_WARPS}, expect=expect)


def tma_ring_spec(stages: int = STAGES, dtype: str = "float16"):
    return _tma_spec("primer_tma_ring", tma_ring_kernel, stages, dtype, TMA_PTX)


def ws_scale_spec(stages: int = STAGES, dtype: str = "float16"):
    return _tma_spec("primer_ws_scale", ws_scale_kernel, stages, dtype,
                     TMA_PTX + ("mbarrier.arrive.shared::cta",))
