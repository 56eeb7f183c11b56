"""Chapter 4: 2-CTA tcgen05 MMA. One MMA, two CTAs, one outer product (Blackwell only).

In 2-CTA mode the even CTA of a pair issues one ``tcgen05.mma.cta_group::2`` that reads A from both
CTAs' shared memory (A split along M, first basis (1, 0)), B from both (split along N, first basis
(0, 1)), and writes the accumulator split along M into both CTAs' tensor memory. The two kernels
below are twins: the 2-CTA one differs only where 2-CTA mode requires it.
"""
from __future__ import annotations

import re

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                                                 tcgen05_commit, tcgen05_mma, tcgen05_mma_barrier_count)
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from . import lens
from .core import validate
from .core.dtypes import DTYPES, dtype_name
from .core.hardware import TCGEN05, check_on_gpu, require
from .gluon.operands import check_operands, check_tma_tensor, descriptor_type, nvmma_layout, operand_cga_layouts
from .multicast import blackwell_multicast_mma


@gluon.jit
def one_cta_mma_kernel(a_desc, b_desc, c_desc, acc_layout: gl.constexpr):
    BM: gl.constexpr = a_desc.block_shape[0]
    BN: gl.constexpr = b_desc.block_shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    loaded = mbarrier.allocate_mbarrier()
    done = mbarrier.allocate_mbarrier()
    mbarrier.init(loaded, count=1)
    mbarrier.init(done, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, two_ctas=False))
    mbarrier.expect(loaded, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
    tma.async_load(a_desc, [0, 0], loaded, a_smem)
    tma.async_load(b_desc, [0, 0], loaded, b_smem)
    mbarrier.wait(loaded, 0, deps=[a_smem, b_smem])
    acc = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
    tcgen05_mma(a_smem, b_smem, acc, use_acc=False, mbarriers=[done])
    mbarrier.wait(done, 0, deps=[a_smem, b_smem])
    mbarrier.invalidate(loaded)                                  # c_smem may reuse the barriers' bytes
    mbarrier.invalidate(done)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_shape, c_desc.layout)
    c_smem.store(acc.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


@gluon.jit
def two_cta_mma_kernel(a_desc, b_desc, c_desc, acc_layout: gl.constexpr):
    BM: gl.constexpr = a_desc.block_shape[0]
    BN: gl.constexpr = b_desc.block_shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    loaded = mbarrier.allocate_mbarrier(two_ctas=True)           # the leader waits for both halves
    done = mbarrier.allocate_mbarrier()                          # the commit reaches both CTAs
    mbarrier.init(loaded, count=1)
    mbarrier.init(done, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, two_ctas=True))
    mbarrier.expect(loaded, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)   # still per CTA
    tma.async_load(a_desc, [0, 0], loaded, a_smem)
    tma.async_load(b_desc, [0, 0], loaded, b_smem)
    mbarrier.wait(loaded, 0, deps=[a_smem, b_smem])
    acc = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)   # acc_layout has two_ctas=True
    tcgen05_mma(a_smem, b_smem, acc, use_acc=False, mbarriers=[done])
    mbarrier.wait(done, 0, deps=[a_smem, b_smem])
    mbarrier.invalidate(loaded)                                  # c_smem may reuse the barriers' bytes
    mbarrier.invalidate(done)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_shape, c_desc.layout)
    c_smem.store(acc.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [0, 0], c_smem)
    tma.store_wait(0)


def tile_layouts(M: int, N: int, K: int, two_ctas: bool, dtype: str = "float16") -> dict:
    """Shared and tensor-memory layouts for one [M, N] tile with depth K (1 CTA, or a 2-CTA pair):
    the accumulator is split along M by the pair, A and B follow from it (chapter 3)."""
    validate.boolean(two_ctas, "two_ctas")
    for name, v in (("M", M), ("N", N), ("K", K)):
        validate.power_of_two(v, name, 16, 256)
    validate.one_of(dtype, "dtype", tuple(DTYPES))
    dt = DTYPES[dtype].gl
    acc = [(1, 0)] if two_ctas else []                      # the pair splits C along M
    a, b = operand_cga_layouts(acc, two_ctas)              # 2-CTA: A along M, B along N
    return dict(a=nvmma_layout([M, K], dt, a), b=nvmma_layout([K, N], dt, b), c=nvmma_layout([M, N], dt, acc),
                acc=TensorMemoryLayout(block=(M >> len(acc), N), col_stride=1,     # each CTA's rows of C
                                       cga_layout=[list(x) for x in acc], two_ctas=two_ctas),
                num_ctas=2 if two_ctas else 1)


def _check_tile(a, b, two_ctas):
    validate.boolean(two_ctas, "two_ctas")
    M, N, K = check_operands(a, b)
    want_m = 256 if two_ctas else 128
    if M != want_m:
        raise ValueError(f"a {'2-CTA' if two_ctas else '1-CTA'} tile has M = {want_m} "
                         f"({'128 rows per CTA of the pair' if two_ctas else 'the instruction M'}), got {M}")
    # N and K are TMA boxes too (B is one [K, N] box, A one [M, K] box): powers of two, as Triton's
    # TensorDescriptor and operands.check_tma_tensor require.
    if N & (N - 1) or not 16 <= N <= 256:
        raise ValueError(f"N must be a power of two from 16 to 256 (tensor-memory columns; a TMA box), got {N}")
    if K & (K - 1) or not 16 <= K <= 128:
        raise ValueError(f"K must be a power of two from 16 to 128 (one tile in shared memory; a TMA box), got {K}")


def mma_tile(a, b, *, two_ctas: bool = True, out=None, kernel=None):
    """C = A @ B for one tile, by one CTA (M = 128) or by a 2-CTA pair (M = 256), on Blackwell. ``out``: where C
    goes (an (M, N) tensor of A's dtype; by default a new one). ``kernel`` launches another ``@gluon.jit`` function
    with the twin's parameters instead (a copy you changed, as in chapter 4's "Change it and see")."""
    import torch
    from triton.experimental.gluon._runtime import GluonJITFunction
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    twin = two_cta_mma_kernel if two_ctas else one_cta_mma_kernel
    kernel = twin if kernel is None else kernel
    if not isinstance(kernel, GluonJITFunction):
        raise TypeError(f"kernel must be a @gluon.jit function, got {type(kernel).__name__}")
    if kernel.arg_names != twin.arg_names:
        raise ValueError(f"kernel must take {twin.fn.__name__}'s parameters {twin.arg_names}, got {kernel.arg_names}")
    _check_tile(a, b, two_ctas)
    check_tma_tensor(a, "a", [min(a.shape[0], 256), a.shape[1]])
    check_tma_tensor(b, "b", list(b.shape))
    M, K = a.shape
    N = b.shape[1]
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N) or out.dtype != a.dtype:
            got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"out must be a ({M}, {N}) {a.dtype} tensor, got {got}")
        check_tma_tensor(out, "out", [M, N])
    require(TCGEN05, "mma_tile")
    check_on_gpu(a, "a")
    check_on_gpu(b, "b")
    lay = tile_layouts(M, N, K, two_ctas, dtype_name(a.dtype))
    c = torch.empty((M, N), device=a.device, dtype=a.dtype) if out is None else out
    kernel[(1,)](TensorDescriptor.from_tensor(a, [M, K], lay["a"]), TensorDescriptor.from_tensor(b, [K, N], lay["b"]),
                 TensorDescriptor.from_tensor(c, [M, N], lay["c"]), lay["acc"], num_warps=4, num_ctas=lay["num_ctas"])
    return c


def looped_mma(a, b):
    """The 4-CTA (2 pairs) looped kernel with TMA multicast, from chapter 3, with chapter 4's checks:
    A is (512, K), B is (K, 128), K a multiple of 64."""
    check_operands(a, b)
    if a.shape[0] != 512 or b.shape[1] != 128 or a.shape[1] % 64:
        raise ValueError(f"the looped example computes a 512 x 128 tile with K a multiple of 64, "
                         f"got {tuple(a.shape)} @ {tuple(b.shape)}")
    return blackwell_multicast_mma(a, b)


def intensity(tile_m: int, tile_n: int, k: int, two_ctas: bool, elem_bytes: int = 2) -> dict:
    """FLOPs per byte of shared memory each CTA reads for one MMA of a tile_m x tile_n x k tile
    (in 2-CTA mode the tile belongs to the pair: each CTA holds half of A and half of B)."""
    for name, v in (("tile_m", tile_m), ("tile_n", tile_n), ("k", k), ("elem_bytes", elem_bytes)):
        validate.count(v, name)
    validate.boolean(two_ctas, "two_ctas")
    ctas = 2 if two_ctas else 1
    a_bytes = tile_m * k * elem_bytes // ctas
    b_bytes = k * tile_n * elem_bytes // ctas
    flops = 2 * tile_m * tile_n * k // ctas
    return {"smem_bytes_per_cta": a_bytes + b_bytes, "flops_per_cta": flops,
            "flops_per_byte": flops / (a_bytes + b_bytes)}


def tile_spec(name, kernel, two_ctas, M, N, K, dtype="float16"):
    """The lens spec of either twin for one M x N x K tile."""
    lay = tile_layouts(M, N, K, two_ctas, dtype)
    dt = DTYPES[dtype].gl
    sig = {"a_desc": descriptor_type(dt, [M, K], lay["a"]), "b_desc": descriptor_type(dt, [K, N], lay["b"]),
           "c_desc": descriptor_type(dt, [M, N], lay["c"]), "acc_layout": "constexpr"}
    expect = ("tcgen05.mma.cta_group::2", "tcgen05.alloc.cta_group::2", "tcgen05.commit.cta_group::2",
              ".reqnctapercluster 2") if two_ctas else ("tcgen05.mma.cta_group::1", "tcgen05.alloc.cta_group::1")
    return lens.KernelSpec(name, kernel, sig, {"acc_layout": lay["acc"]}, {"num_warps": 4, "num_ctas": lay["num_ctas"]},
                           targets=("sm_100a",), expect=expect)


def two_cta_mma_spec(N: int = 128, K: int = 64, dtype: str = "float16"):
    return tile_spec("two_cta_mma", two_cta_mma_kernel, True, 256, N, K, dtype)


def one_cta_mma_spec(N: int = 128, K: int = 64, dtype: str = "float16"):
    return tile_spec("one_cta_mma", one_cta_mma_kernel, False, 128, N, K, dtype)


# ---------------------------------------------------- tcgen05_commit(descs=...): lens only, never launched

COMMIT_WAYS = ("tcgen05_mma(..., multicast=True, mbarriers=[bar])", "tcgen05_mma(..., mbarriers=[bar])",
               "tcgen05_mma(...); tcgen05_commit(bar, descs=[a, b])", "tcgen05_mma(...); tcgen05_commit(bar)")
COMMIT_ACC_BASES = ((1, 0), (2, 0))      # the looped kernel's 4 CTAs: 2 pairs, A split over both, B shared


@gluon.jit
def commit_demo_kernel(a_layout: gl.constexpr, b_layout: gl.constexpr, acc_layout: gl.constexpr, HOW: gl.constexpr):
    """One 2-CTA MMA whose completion is committed in one of the four ``COMMIT_WAYS`` (HOW = 0 to 3). Its
    barrier counts 1: the kernel only shows the commit's CTA mask in the PTX, and is never launched."""
    a = gl.allocate_shared_memory(gl.float16, [512, 64], a_layout)
    b = gl.allocate_shared_memory(gl.float16, [64, 128], b_layout)
    acc = allocate_tensor_memory(gl.float32, [512, 128], acc_layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    if HOW == 0:
        tcgen05_mma(a, b, acc, use_acc=False, multicast=True, mbarriers=[bar])
    elif HOW == 1:
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
    elif HOW == 2:
        tcgen05_mma(a, b, acc, use_acc=False)
        tcgen05_commit(bar, descs=[a, b])
    else:
        tcgen05_mma(a, b, acc, use_acc=False)
        tcgen05_commit(bar)
    mbarrier.wait(bar, 0)


def commit_demo_spec(how: int = 0) -> lens.KernelSpec:
    """The lens spec of ``commit_demo_kernel`` committing the ``how``-th of ``COMMIT_WAYS``, on 4 CTAs."""
    if how not in range(len(COMMIT_WAYS)):
        raise ValueError(f"how is 0 to {len(COMMIT_WAYS) - 1} (one of COMMIT_WAYS), got {how!r}")
    a_bases, b_bases = operand_cga_layouts(COMMIT_ACC_BASES, two_ctas=True)
    lay = dict(a_layout=nvmma_layout([512, 64], gl.float16, a_bases),
               b_layout=nvmma_layout([64, 128], gl.float16, b_bases),
               acc_layout=TensorMemoryLayout(block=(128, 128), col_stride=1,
                                             cga_layout=[list(x) for x in COMMIT_ACC_BASES], two_ctas=True))
    return lens.KernelSpec("commit_demo", commit_demo_kernel, {k: "constexpr" for k in [*lay, "HOW"]},
                           {**lay, "HOW": how}, {"num_warps": 4, "num_ctas": 4}, targets=("sm_100a",),
                           expect=("tcgen05.commit",))


def commit_mask(ptx: str) -> tuple[str, int]:
    """The PTX line that sets the 16-bit CTA mask of the kernel's one ``tcgen05.commit``, and the mask CTA 0's
    commit gets (a run-time mask is a constant shifted by the issuing pair's first rank: 0 for CTA 0)."""
    lines = ptx.splitlines()
    at = [i for i, ln in enumerate(lines) if "tcgen05.commit" in ln]
    if len(at) != 1:
        raise ValueError(f"expected one tcgen05.commit, found {len(at)}")

    def setter(reg):
        # the last instruction before the commit whose destination (first operand) is reg
        return next(ln.strip() for ln in reversed(lines[:at[0]]) if re.match(rf"\s*[\w.:]+\s+{re.escape(reg)},", ln))
    line = setter(lines[at[0]].rsplit(",", 1)[1].strip(" ;"))
    if line.startswith("shl"):
        return line, int(setter(line.split(",")[1].strip()).rstrip(";").split(",")[1])
    return line, int(line.rstrip(";").split(",")[1])
