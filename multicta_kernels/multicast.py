"""Chapter 3: TMA multicast. Which CTAs receive which tile, what it saves, and the TMA -> MMA loop.

A matmul cluster whose accumulator ``C`` is split by ``cga_layout`` needs, in each CTA, the A rows and
B columns of its own piece of C. CTAs that share M bits need the same A tile; CTAs that share N bits
need the same B tile. So A's layout keeps the accumulator's M components and zeroes N, B's keeps N and
zeroes M: zero bases are broadcasts, and a broadcast tile can be fetched once and *multicast* by TMA
into every CTA that needs it.

In Gluon a multicast load is issued by every CTA of the group; each loads a slice and sends it to all
peers. So a buffer can only be reloaded once *every* peer has released it: on Hopper that release is
built by hand (a cluster barrier, or a gather on one CTA and a broadcast back); on Blackwell
``tcgen05_mma(..., multicast=True)`` signals it.
"""
from __future__ import annotations

import math

import multicta_kernels  # noqa: F401
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                                                 tcgen05_mma, tcgen05_mma_barrier_count)
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from . import lens
from .hardware import CLUSTERS, TCGEN05, WGMMA, check_on_gpu, require
from .layouts import check_cga_layout

# ------------------------------------------------------------------ operand layouts from the output


def operand_cga_layouts(acc_bases, two_ctas: bool = False):
    """(A bases, B bases) for an accumulator ``cga_layout`` over (M, N); K is never split.

    Without ``two_ctas``: A keeps each basis's M component, B its N component. With ``two_ctas`` the
    first basis must be (1, 0) (the CTA pair splits M); it becomes A's (1, 0) and B's (0, 1), the
    outer product of one 2-CTA MMA, and B's later N components double (B's N is split by the pair too).
    """
    acc = [tuple(b) for b in acc_bases]
    check_cga_layout([list(b) for b in acc], 1 << len(acc), 2)
    if not two_ctas:
        return [(m, 0) for m, _ in acc], [(0, n) for _, n in acc]
    if not acc or acc[0] != (1, 0):
        raise ValueError(f"two_ctas needs the accumulator's first basis to be (1, 0) (the CTA pair splits M), got {acc}")
    rest = acc[1:]
    return [(1, 0)] + [(m, 0) for m, _ in rest], [(0, 1)] + [(0, 2 * n) for _, n in rest]


def tile_of(bases, cta: int) -> tuple:
    """The block coordinates that CTA ``cta`` holds under ``bases`` (XOR of the selected bases)."""
    coord = [0] * (len(bases[0]) if bases else 2)
    for bit, b in enumerate(bases):
        if cta >> bit & 1:
            coord = [x ^ v for x, v in zip(coord, b)]
    return tuple(coord)


def receivers(bases, num_ctas: int) -> dict:
    """tile coordinates -> the CTAs that hold (and so can receive by multicast) that tile."""
    out = {}
    for c in range(num_ctas):
        out.setdefault(tile_of(bases, c), []).append(c)
    return out


def multicast_mask(bases, cta: int, num_ctas: int) -> int:
    """The 16-bit CTA mask of a multicast issued by ``cta``: every CTA holding the same tile."""
    t = tile_of(bases, cta)
    return sum(1 << c for c in range(num_ctas) if tile_of(bases, c) == t)


def draw_receivers(acc_bases, two_ctas=False, ax=None):
    """CTAs laid out by the C tile they own; each labelled with the A and B tile it needs."""
    import matplotlib.pyplot as plt
    from .layouts import PALETTE
    a_b, b_b = operand_cga_layouts(acc_bases, two_ctas)
    n = 1 << len(acc_bases)
    ax = ax or plt.subplots(figsize=(3, 3))[1]
    c_tiles = {c: tile_of([tuple(b) for b in acc_bases], c) for c in range(n)}
    a_groups = {t: i for i, t in enumerate(receivers(a_b, n))}
    b_groups = {t: i for i, t in enumerate(receivers(b_b, n))}
    rows = 1 + max(t[0] for t in c_tiles.values())
    cols = 1 + max(t[1] for t in c_tiles.values())
    for c, (m, k) in c_tiles.items():
        ax.add_patch(plt.Rectangle((k, m), 0.96, 0.96, fc=PALETTE[a_groups[tile_of(a_b, c)] % 8], ec="black", lw=0.5))
        ax.add_patch(plt.Rectangle((k + 0.55, m + 0.55), 0.38, 0.38, fc=PALETTE[8 + b_groups[tile_of(b_b, c)] % 8],
                                   ec="black", lw=0.5))
        ax.text(k + 0.3, m + 0.3, f"CTA {c}", fontsize=7, ha="center", va="center")
        ax.text(k + 0.3, m + 0.72, f"A{a_groups[tile_of(a_b, c)]}", fontsize=6, ha="center")
        ax.text(k + 0.74, m + 0.78, f"B{b_groups[tile_of(b_b, c)]}", fontsize=6, ha="center")
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([i + 0.5 for i in range(cols)], [f"n{i}" for i in range(cols)], fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(rows)], [f"m{i}" for i in range(rows)], fontsize=7)
    ax.set_title(f"C bases {[list(b) for b in acc_bases]}" + (" (2-CTA)" if two_ctas else ""), fontsize=8)
    return ax


# ------------------------------------------------------------------------------------- kernels

@gluon.jit
def cta_rank():
    # Gluon has no "which CTA am I" builtin on purpose (ownership lives in layouts); when a kernel
    # needs the number itself, e.g. to address its own output, it reads the special register.
    return gl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r", [], dtype=gl.int32,
                                     is_pure=True, pack=1)


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


@gluon.jit
def _release(slot, empty, go, phase, RELEASE: gl.constexpr):
    # Every CTA of the cluster must be done with `slot` before anyone reloads it (peers write into it).
    # RELEASE 2: a single CTA, whose own wait already ordered its reads before the reload.
    if RELEASE == 0:
        hopper.cluster.barrier()
    elif RELEASE == 1:
        mbarrier.arrive(empty.index(slot))             # lands on CTA 0 (group barrier)
        mbarrier.wait(empty.index(slot), phase)        # CTA 0: everyone released the slot
        mbarrier.arrive(go.index(slot), from_cta=0)    # CTA 0 tells every CTA
        mbarrier.wait(go.index(slot), phase)


@gluon.jit
def _ring_barriers(STAGES: gl.constexpr, RELEASE: gl.constexpr, group_all: gl.constexpr):
    # `ready[s]`: stage s has landed in this CTA. For the gather/broadcast release, `empty[s]` is one
    # barrier in CTA 0 that every CTA arrives on, `go[s]` each CTA's own barrier that CTA 0 releases.
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
    if RELEASE == 1:
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], group_all)
        go = mbarrier.allocate_mbarrier(batch=STAGES)
        for s in gl.static_range(STAGES):
            mbarrier.init(empty.index(s), count=1)
            mbarrier.init(go.index(s), count=1)
    else:                                   # not used by the other release modes
        empty = ready
        go = ready
    return ready, empty, go


# A count of 1 must not become a constant: the release barriers would look unused, and fail to compile.
@gluon.jit(do_not_specialize=["TILES", "SRC_TILES"])
def tile_stream_kernel(desc, out_ptr, TILES, SRC_TILES, MULTICAST: gl.constexpr, STAGES: gl.constexpr,
                       RELEASE: gl.constexpr, group_all: gl.constexpr):
    """Stream TILES tiles into every CTA of the cluster through a ring of STAGES buffers; the
    cluster's CTAs all need the same tiles. MULTICAST: each CTA fetches 1/C of each tile and
    multicasts it, instead of fetching the whole tile itself."""
    BR: gl.constexpr = desc.block_shape[0]
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_shape, desc.layout)
    ready, empty, go = _ring_barriers(STAGES, RELEASE, group_all)
    first = gl.program_id(0) * 13                      # clusters start at different tiles of the source
    for s in gl.static_range(STAGES):                  # prologue: fill the ring
        mbarrier.expect(ready.index(s), desc.nbytes_per_cta)
        tma.async_load(desc, [(first + s) % SRC_TILES * BR, 0], ready.index(s), bufs.index(s), multicast=MULTICAST)
    got = 0
    for t in range(TILES):
        slot = t % STAGES
        phase = (t // STAGES) & 1
        mbarrier.wait(ready.index(slot), phase, deps=[bufs])
        got += 1
        if t + STAGES < TILES:
            _release(slot, empty, go, phase, RELEASE)
            mbarrier.expect(ready.index(slot), desc.nbytes_per_cta)
            tma.async_load(desc, [(first + t + STAGES) % SRC_TILES * BR, 0], ready.index(slot), bufs.index(slot),
                           multicast=MULTICAST)
    gl.store(out_ptr + gl.program_id(0), got)


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
    ready, empty, go = _ring_barriers(STAGES, RELEASE, group_all)
    nbytes: gl.constexpr = a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
    k_tiles = gl.cdiv(K, BK)
    for s in gl.static_range(STAGES):                  # prologue (TMA zero-fills past K)
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_load(a_desc, [off_m, s * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [s * BK, off_n], ready.index(s), b_bufs.index(s), multicast=True)
    acc = gl.zeros([BM_ALL, BN], gl.float32, acc_layout)
    steps = gl.maximum(k_tiles, STAGES)               # every loaded stage is consumed, even zero-filled ones
    for t in range(steps):
        slot = t % STAGES
        phase = (t // STAGES) & 1
        mbarrier.wait(ready.index(slot), phase)
        acc = hopper.warpgroup_mma(a_bufs.index(slot), b_bufs.index(slot), acc, is_async=True)
        acc, _, _ = hopper.warpgroup_mma_wait(0, deps=[acc, a_bufs.index(slot), b_bufs.index(slot)])
        if t + STAGES < steps:
            _release(slot, empty, go, phase, RELEASE)
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


SEED_BLACKWELL = dict(acc_bases=((1, 0), (2, 0)), two_ctas=True, BM=512, BN=128, BK=64, K_TILES=2)


def _blackwell_layouts(acc_bases, two_ctas, BM, BN, BK, dtype=gl.float16):
    check_m_split(acc_bases, "blackwell_multicast_mma")
    a_b, b_b = operand_cga_layouts(acc_bases, two_ctas)
    num_ctas = 1 << len(acc_bases)
    cta_m = BM // (1 << sum(1 for m, _ in acc_bases if m))
    if cta_m * (1 << sum(1 for m, _ in acc_bases if m)) != BM or cta_m not in ((128,) if two_ctas else (64, 128)):
        raise ValueError(f"BM = {BM} over {num_ctas} CTAs stacked along M gives {BM / num_ctas:g} rows per CTA; "
                         f"tcgen05 needs {'128 (2-CTA)' if two_ctas else '64 or 128'}")
    if BN % 16 or not 16 <= BN <= 256:
        raise ValueError(f"BN must be a multiple of 16 from 16 to 256 (tensor-memory columns), got {BN}")
    return dict(a=_layout([BM, BK], dtype, a_b), b=_layout([BK, BN], dtype, b_b), c=_layout([BM, BN], dtype, acc_bases),
                acc=TensorMemoryLayout(block=(cta_m, BN), col_stride=1, cga_layout=[list(b) for b in acc_bases],
                                       two_ctas=two_ctas), num_ctas=num_ctas)


def check_m_split(acc_bases, what: str) -> None:
    """The book's matmul clusters split the output along M only (N-splitting layouts do not compile:
    the tensor-memory accumulator would need a wider tile); refuse anything else before compiling."""
    bad = [list(b) for b in acc_bases if len(b) != 2 or b[1] != 0]
    if bad:
        raise ValueError(f"{what} splits the output tile along M only: every cga_layout basis must be (2**i, 0), "
                         f"got {[list(b) for b in acc_bases]} (bases {bad} split N); stack the CTAs along M")


def blackwell_multicast_mma(a, b, *, acc_bases=((1, 0), (2, 0)), two_ctas=True, bk=64):
    """One output tile C = A @ B computed by a cluster (Blackwell only): A is (BM, K), B is (K, BN)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    BM, BN, K = check_operands(a, b)
    if K % bk or K < 1:
        raise ValueError(f"K must be a positive multiple of {bk}, got {K}")
    L = _blackwell_layouts(acc_bases, two_ctas, BM, BN, bk, _gl_dtype(a))
    check_tma_tensor(a, "a", [min(BM, 256), bk])
    check_tma_tensor(b, "b", [bk, BN])
    require(TCGEN05, "blackwell_multicast_mma")
    check_on_gpu(a, "a")
    check_on_gpu(b, "b")
    c = torch.empty((BM, BN), device=a.device, dtype=a.dtype)
    blackwell_multicast_mma_kernel[(1,)](TensorDescriptor.from_tensor(a, [BM, bk], L["a"]),
                                         TensorDescriptor.from_tensor(b, [bk, BN], L["b"]),
                                         TensorDescriptor.from_tensor(c, [BM, BN], L["c"]), K // bk, L["acc"],
                                         num_warps=4, num_ctas=L["num_ctas"])
    return c


# -------------------------------------------------------------------------------- host wrappers

_RELEASES = {"cluster": 0, "mbarrier": 1, "none": 2}


def _release_mode(release: str, num_ctas: int) -> int:
    if release not in ("cluster", "mbarrier"):
        raise ValueError(f"release must be 'mbarrier' or 'cluster', got {release!r}")
    return _RELEASES["none"] if num_ctas == 1 else _RELEASES[release]


_TORCH_TO_GL = {"float16": gl.float16, "bfloat16": gl.bfloat16, "float32": gl.float32}


def _gl_dtype(t):
    name = str(t.dtype).replace("torch.", "")
    if name not in _TORCH_TO_GL:
        raise TypeError(f"TMA kernels here take float16, bfloat16 or float32 tensors, not {t.dtype}")
    return _TORCH_TO_GL[name]


def check_cluster(num_ctas):
    if not isinstance(num_ctas, int) or num_ctas < 1 or num_ctas > 16 or num_ctas & (num_ctas - 1):
        raise ValueError(f"the cluster size must be a power of two from 1 to 16, got {num_ctas!r}")


def check_tma_tensor(t, name, block):
    """What TMA needs of a 2-D tensor and its box (where the tensor lives is checked later, after the
    hardware: see ``hardware.check_on_gpu``)."""
    import torch
    if not isinstance(t, torch.Tensor) or t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor")
    if t.stride(1) != 1:
        raise ValueError(f"{name}.stride(1) is {t.stride(1)}: TMA needs a unit inner stride (use .contiguous())")
    if (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
        raise ValueError(f"{name}'s rows must start on 16-byte boundaries (row stride {t.stride(0)} elements of "
                         f"{t.element_size()} bytes); pad the inner dimension to a multiple of {16 // t.element_size()}")
    if any(b > 256 or b < 1 or b & (b - 1) for b in block):
        raise ValueError(f"TMA boxes are powers of two of at most 256 per dimension, got {list(block)}")
    if block[-1] * t.element_size() < 16:
        raise ValueError(f"the inner box of {block[-1]} elements is under 16 bytes")


def check_operands(a, b):
    """A and B for C = A @ B: torch tensors, both float16 or both bfloat16, (M, K) and (K, N)."""
    import torch
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError("a and b must be torch tensors")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"a and b must both be float16 or both bfloat16, got {a.dtype} and {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.shape[0] < 1 or b.shape[1] < 1:
        raise ValueError(f"M and N must be at least 1, got {tuple(a.shape)} @ {tuple(b.shape)}")
    return a.shape[0], b.shape[1], a.shape[1]


def prepare_matmul(a, b, out, config: dict, defaults: dict, plan_fn, feature, what: str):
    """The shared front of the persistent matmul wrappers. Arguments first (known options, operands,
    the plan, which validates the configuration, TMA constraints, the output), then the hardware
    ``feature``, then where the tensors live. Returns (cfg, plan, out, descriptors of A, B and out,
    M, N, K); ``plan_fn(M, N, K, gl_dtype, **cfg)`` returns ``tile_m`` and the shared layouts ``a``,
    ``b``, ``c``."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    unknown = set(config) - set(defaults)
    if unknown:
        raise TypeError(f"unknown options {sorted(unknown)}; known: {sorted(defaults)}")
    cfg = {**defaults, **config}
    M, N, K = check_operands(a, b)
    plan = plan_fn(M, N, K, _gl_dtype(a), **cfg)
    check_tma_tensor(a, "a", [min(plan["tile_m"], 256), cfg["block_k"]])
    check_tma_tensor(b, "b", [cfg["block_k"], cfg["block_n"]])
    out_cols = cfg.get("epilogue_n") or cfg["block_n"]
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N) or out.dtype != a.dtype:
            got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"out must be a ({M}, {N}) {a.dtype} tensor, got {got}")
        check_tma_tensor(out, "out", [min(plan["tile_m"], 256), out_cols])
    require(feature, what)
    for t, name in ((a, "a"), (b, "b")) + (((out, "out"),) if out is not None else ()):
        check_on_gpu(t, name)
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    descs = (TensorDescriptor.from_tensor(a, [plan["tile_m"], cfg["block_k"]], plan["a"]),
             TensorDescriptor.from_tensor(b, [cfg["block_k"], cfg["block_n"]], plan["b"]),
             TensorDescriptor.from_tensor(out, [plan["tile_m"], out_cols], plan["c"]))
    return cfg, plan, out, descs, M, N, K


def _layout(block, dtype, bases):
    return gl.NVMMASharedLayout.get_default_for(list(block), dtype, cga_layout=[list(b) for b in bases])


def _copy_layouts(num_ctas):
    n = num_ctas.bit_length() - 1
    return dict(everyone=gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0], cga_layout=[[0, 0]] * n),
                slot=gl.BlockedLayout([1], [32], [4], [0], cga_layout=[[1 << i] for i in range(n)]))


def multicast_copy(x, num_ctas: int, multicast: bool = True):
    """Deliver the 2-D tile ``x`` into the shared memory of each of ``num_ctas`` CTAs (one multicast,
    or one load per CTA). Returns (per-CTA mismatch counts against ``x``, the tile stored back)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    check_cluster(num_ctas)
    if num_ctas < 2:
        raise ValueError("multicast needs a cluster of at least 2 CTAs")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    dtype = _gl_dtype(x)
    check_tma_tensor(x, "x", x.shape)
    if x.shape[0] < 4 or x.shape[1] < 32 or x.stride(0) != x.shape[1]:
        raise ValueError("multicast_copy takes a contiguous tile of at least 4 x 32 elements")
    require(CLUSTERS, "multicast_copy")
    check_on_gpu(x, "x")
    M, N = x.shape
    layout = _layout([M, N], dtype, [[0, 0]] * (num_ctas.bit_length() - 1))
    out = torch.full_like(x, float("nan"))
    bad = torch.full((num_ctas,), -1, device=x.device, dtype=torch.int32)
    multicast_copy_kernel[(1,)](TensorDescriptor.from_tensor(x, [M, N], layout), x,
                                TensorDescriptor.from_tensor(out, [M, N], layout), bad, MULTICAST=multicast,
                                **_copy_layouts(num_ctas), num_warps=4, num_ctas=num_ctas)
    return bad, out


def hopper_multicast_matmul(a, b, *, num_ctas: int = 2, bm: int = 64, bn: int = 128, bk: int = 64,
                            stages: int = 3, release: str = "mbarrier"):
    """C = A @ B (fp16 or bf16, fp32 accumulation) on clusters of ``num_ctas`` CTAs stacked along M,
    B multicast to all of them. ``release``: "mbarrier" (gather on CTA 0, broadcast back) or
    "cluster" (a cluster barrier per K step). Hopper only: wgmma does not exist on Blackwell."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    check_cluster(num_ctas)
    mode = _release_mode(release, num_ctas)
    M, N, K = check_operands(a, b)
    if K % 8:
        raise ValueError(f"K must be a multiple of 8 (16-byte aligned rows of A for TMA), got {K}")
    if bm != 64 or (bn % 8) or bn > 256:
        raise ValueError("this kernel uses one warpgroup per CTA: bm must be 64 and bn a multiple of 8 up to 256")
    check_tma_tensor(a, "a", [bm * num_ctas, bk])
    check_tma_tensor(b, "b", [bk, bn])
    smem = stages * (bm * bk + bk * bn) * 2 + bm * bn * 2          # per CTA: A rows, all of B, C staging
    if smem > 200 * 1024:
        raise ValueError(f"{stages} stages need {smem // 1024} KiB of shared memory per CTA (at most ~200 KiB "
                         "on Hopper); use fewer stages or smaller tiles")
    require(WGMMA, "hopper_multicast_matmul")
    check_on_gpu(a, "a")
    check_on_gpu(b, "b")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    check_tma_tensor(c, "c", [bm * num_ctas, bn])
    dt = _gl_dtype(a)
    n = num_ctas.bit_length() - 1
    split = [[1 << i, 0] for i in range(n)]
    bcast = [[0, 0]] * n
    a_desc = TensorDescriptor.from_tensor(a, [bm * num_ctas, bk], _layout([bm * num_ctas, bk], dt, split))
    b_desc = TensorDescriptor.from_tensor(b, [bk, bn], _layout([bk, bn], dt, bcast))
    c_desc = TensorDescriptor.from_tensor(c, [bm * num_ctas, bn], _layout([bm * num_ctas, bn], dt, split))
    acc_layout = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, bn, 16],
                                           cga_layout=split)
    grid = (math.ceil(M / (bm * num_ctas)), math.ceil(N / bn))
    hopper_multicast_matmul_kernel[grid](a_desc, b_desc, c_desc, K, STAGES=stages, RELEASE=mode, acc_layout=acc_layout,
                                         group_all=mbarrier.MBarrierLayout([[0]] * n),
                                         num_warps=4, num_ctas=num_ctas)
    return c


def tile_stream(num_ctas: int, *, multicast: bool, release: str = "mbarrier", clusters: int | None = None,
                tiles: int = 64, src_tiles: int = 256, stages: int = 4):
    """Launch the tile stream; returns (launch function, delivered bytes per launch). The source is
    ``src_tiles`` tiles of 128 x 128 fp16 (8 MiB by default: it stays in L2)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    check_cluster(num_ctas)
    if multicast and num_ctas < 2:
        raise ValueError("multicast needs a cluster of at least 2 CTAs")
    mode = _release_mode(release, num_ctas)
    require(CLUSTERS, "tile_stream")
    clusters = clusters or max(1, 128 // num_ctas)
    src = torch.randn(src_tiles * 128, 128, device="cuda", dtype=torch.float16)
    desc = TensorDescriptor.from_tensor(src, [128, 128], _stream_layout(num_ctas))
    out = torch.zeros(clusters, device="cuda", dtype=torch.int32)
    group_all = mbarrier.MBarrierLayout([[0]] * (num_ctas.bit_length() - 1))

    def launch():
        tile_stream_kernel[(clusters,)](desc, out, tiles, src_tiles, MULTICAST=multicast, STAGES=stages,
                                        RELEASE=mode, group_all=group_all,
                                        num_warps=1, num_ctas=num_ctas)
        return out
    return launch, clusters * num_ctas * tiles * 128 * 128 * 2


def benchmark(quick: bool = False, log=print) -> dict:
    """Delivered bandwidth into shared memory when every CTA of a cluster needs the same tiles:
    each CTA loading its own copy vs one multicast per tile, for clusters of 1 to 16 CTAs."""
    from . import bench
    require(CLUSTERS, "the multicast benchmark")
    copy = bench.copy_ceiling_gbps()
    rows = []
    for num_ctas in (1, 2, 4, 8, 16):
        for multicast in ((False,) if num_ctas == 1 else (False, True)):
            for release in (("none",) if num_ctas == 1 else ("cluster", "mbarrier")):
                launch, nbytes = tile_stream(num_ctas, multicast=multicast, release=release if num_ctas > 1 else "cluster")
                got = launch()
                ms = bench.time_ms(launch, cudagraph=False)
                g = bench.gbps(nbytes, ms)
                l2 = g / num_ctas if multicast else g
                ok = bool((got == 64).all().item())
                rows.append([num_ctas, multicast, release, 128 // num_ctas, round(g, 1), round(l2, 1), ok])
                log(f"[multicast] {num_ctas:>2} CTAs, multicast={multicast!s:5}, release={release:8}: delivered "
                    f"{g:.0f} GB/s (L2 -> SM {l2:.0f} GB/s), all tiles seen: {ok}")
    return {"method": {"timer": "do_bench", "statistic": "median",
                       "workload": "each cluster streams 64 tiles of 128x128 fp16 (32 KiB) through a 4-stage ring; "
                                   "the 8 MiB source stays in L2; 128 CTAs in all; 1 warp per CTA",
                       "delivered": "bytes landing in shared memory, all CTAs counted",
                       "l2_to_sm": "delivered / cluster size with multicast, delivered without"},
            "ceilings": {"copy_gbps": round(copy, 1)},
            "columns": ["num_ctas", "multicast", "release", "clusters", "delivered_gbps", "l2_to_sm_gbps", "all_tiles_seen"],
            "rows": rows}


# ------------------------------------------------------------------------------------------ lens

def _desc(dtype, block, layout):
    return f"tensordesc<{dtype}[{','.join(map(str, block))}],{layout!r}>"


@lens.register("multicast_copy", examples=[{"num_ctas": c, "multicast": m} for c in (2, 16) for m in (True, False)])
def multicast_copy_spec(num_ctas: int = 2, multicast: bool = True, M: int = 128, N: int = 64):
    layout = _layout([M, N], gl.float16, [[0, 0]] * (num_ctas.bit_length() - 1))
    d = _desc("fp16", [M, N], layout)
    expect = ("cp.async.bulk.tensor", ".multicast::cluster") if multicast else ("cp.async.bulk.tensor",)
    return lens.KernelSpec("multicast_copy", multicast_copy_kernel,
                           {"in_desc": d, "in_ptr": "*fp16", "out_desc": d, "bad_ptr": "*i32", "MULTICAST": "constexpr",
                            "everyone": "constexpr", "slot": "constexpr"},
                           {"MULTICAST": multicast, **_copy_layouts(num_ctas)}, {"num_warps": 4, "num_ctas": num_ctas},
                           expect=expect)


def _stream_layout(num_ctas, rows=128, cols=128):
    return _layout([rows, cols], gl.float16, [[0, 0]] * (num_ctas.bit_length() - 1))


@lens.register("tile_stream", examples=[{"num_ctas": 4, "multicast": m, "release": r} for m in (True, False) for r in (0, 1)])
def tile_stream_spec(num_ctas: int = 4, multicast: bool = True, release: int = 1, stages: int = 4):
    d = _desc("fp16", [128, 128], _stream_layout(num_ctas))
    return lens.KernelSpec("tile_stream", tile_stream_kernel,
                           {"desc": d, "out_ptr": "*i32", "TILES": "i32", "SRC_TILES": "i32", "MULTICAST": "constexpr",
                            "STAGES": "constexpr",
                            "RELEASE": "constexpr", "group_all": "constexpr"},
                           {"MULTICAST": multicast, "STAGES": stages, "RELEASE": release,
                            "group_all": mbarrier.MBarrierLayout([[0]] * (num_ctas.bit_length() - 1))},
                           {"num_warps": 1, "num_ctas": num_ctas}, expect=("cp.async.bulk.tensor",))


@lens.register("hopper_multicast_matmul", examples=[{"num_ctas": c, "release": r} for c in (2, 4) for r in (0, 1)])
def hopper_multicast_matmul_spec(num_ctas: int = 2, release: int = 1, bm: int = 64, bn: int = 128, bk: int = 64,
                                 stages: int = 3):
    n = num_ctas.bit_length() - 1
    split, bcast = [[1 << i, 0] for i in range(n)], [[0, 0]] * n
    sig = {"a_desc": _desc("fp16", [bm * num_ctas, bk], _layout([bm * num_ctas, bk], gl.float16, split)),
           "b_desc": _desc("fp16", [bk, bn], _layout([bk, bn], gl.float16, bcast)),
           "c_desc": _desc("fp16", [bm * num_ctas, bn], _layout([bm * num_ctas, bn], gl.float16, split)),
           "K": "i32", "STAGES": "constexpr", "RELEASE": "constexpr", "acc_layout": "constexpr", "group_all": "constexpr"}
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, bn, 16], cga_layout=split)
    return lens.KernelSpec("hopper_multicast_matmul", hopper_multicast_matmul_kernel, sig,
                           {"STAGES": stages, "RELEASE": release, "acc_layout": acc,
                            "group_all": mbarrier.MBarrierLayout([[0]] * n)},
                           {"num_warps": 4, "num_ctas": num_ctas}, targets=("sm_90a",),
                           expect=(".multicast::cluster", "wgmma.mma_async", ".reqnctapercluster"))


@lens.register("blackwell_multicast_mma", examples=[{}, {"two_ctas": False, "acc_bases": ((1, 0),), "BM": 256}])
def blackwell_multicast_mma_spec(acc_bases=SEED_BLACKWELL["acc_bases"], two_ctas=SEED_BLACKWELL["two_ctas"],
                                 BM=SEED_BLACKWELL["BM"], BN=SEED_BLACKWELL["BN"], BK=SEED_BLACKWELL["BK"],
                                 K_TILES=SEED_BLACKWELL["K_TILES"]):
    L = _blackwell_layouts(acc_bases, two_ctas, BM, BN, BK)
    sig = {"a_desc": _desc("fp16", [BM, BK], L["a"]), "b_desc": _desc("fp16", [BK, BN], L["b"]),
           "c_desc": _desc("fp16", [BM, BN], L["c"]), "K_TILES": "constexpr", "acc_layout": "constexpr"}
    expect = ("tcgen05.mma", ".multicast::cluster", "tcgen05.commit") + (("cta_group::2",) if two_ctas else ())
    return lens.KernelSpec("blackwell_multicast_mma", blackwell_multicast_mma_kernel, sig,
                           {"K_TILES": K_TILES, "acc_layout": L["acc"]}, {"num_warps": 4, "num_ctas": L["num_ctas"]},
                           targets=("sm_100a",), expect=expect)
