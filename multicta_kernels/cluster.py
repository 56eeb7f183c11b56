"""Cluster machinery the chapters share: operand layouts and TMA descriptors, the stage ring and its
cluster-wide release, and the validated front end of the matmul wrappers.

Chapter 3 introduces each piece (who receives which tile; why a multicast stage must be released by
every CTA before it is reloaded); chapters 4 to 6 build their kernels from them.
"""
from __future__ import annotations

from dataclasses import dataclass

import multicta_kernels  # noqa: F401
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from . import lens
from .hardware import SMEM_PER_CTA, TMA_ALIGN, TMA_BOX_MAX, check_on_gpu, log2, require
from .layouts import check_cga_layout

# ------------------------------------------------------------------------- operand layouts and TMA


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


def stacked_along_m(num_ctas: int) -> list:
    """The accumulator bases of CTAs stacked along M: ((1, 0), (2, 0), ...)."""
    return [(1 << i, 0) for i in range(log2(num_ctas))]


def check_m_split(acc_bases, what: str) -> None:
    """The book's matmul clusters split the output along M only (N-splitting layouts do not compile:
    the tensor-memory accumulator would need a wider tile); refuse anything else before compiling."""
    bad = [list(b) for b in acc_bases if len(b) != 2 or b[1] != 0]
    if bad:
        raise ValueError(f"{what} splits the output tile along M only: every cga_layout basis must be (2**i, 0), "
                         f"got {[list(b) for b in acc_bases]} (bases {bad} split N); stack the CTAs along M")


def nvmma_layout(block, dtype, bases):
    """The NVMMA shared layout (what TMA and the tensor cores read) of a ``block`` split by ``bases``."""
    return gl.NVMMASharedLayout.get_default_for(list(block), dtype, cga_layout=[list(b) for b in bases])


def descriptor_type(dtype, block, layout) -> str:
    """A tensor descriptor's type in a lens signature: ``tensordesc<fp16[128,64],{layout}>``."""
    return f"tensordesc<{lens.DTYPES[lens.dtype_name(dtype)].short}[{','.join(map(str, block))}],{layout!r}>"


def gl_dtype(t):
    """The Gluon dtype of a torch tensor, for the TMA kernels (float16, bfloat16, float32)."""
    name = lens.dtype_name(t.dtype)
    if name not in lens.DTYPES:
        raise TypeError(f"TMA kernels here take float16, bfloat16 or float32 tensors, not {t.dtype}")
    return lens.DTYPES[name].gl


def check_tma_tensor(t, name, block):
    """What TMA needs of a 2-D tensor and its box (where the tensor lives is checked later, after the
    hardware: see ``hardware.check_on_gpu``)."""
    import torch
    if not isinstance(t, torch.Tensor) or t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor")
    if t.stride(1) != 1:
        raise ValueError(f"{name}.stride(1) is {t.stride(1)}: TMA needs a unit inner stride (use .contiguous())")
    if (t.stride(0) * t.element_size()) % TMA_ALIGN or t.data_ptr() % TMA_ALIGN:
        raise ValueError(f"{name}'s rows must start on {TMA_ALIGN}-byte boundaries (row stride {t.stride(0)} elements "
                         f"of {t.element_size()} bytes); pad the inner dimension to a multiple of "
                         f"{TMA_ALIGN // t.element_size()}")
    if any(b > TMA_BOX_MAX or b < 1 or b & (b - 1) for b in block):
        raise ValueError(f"TMA boxes are powers of two of at most {TMA_BOX_MAX} per dimension, got {list(block)}")
    if block[-1] * t.element_size() < TMA_ALIGN:
        raise ValueError(f"the inner box of {block[-1]} elements is under {TMA_ALIGN} bytes")


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


# ------------------------------------------------------------------ the ring and its release

# How every CTA tells the issuing CTA that a multicast stage may be reloaded (chapter 3).
RELEASE_CLUSTER_BARRIER = 0   # a cluster barrier per stage: every thread of every CTA waits
RELEASE_GATHER = 1            # every CTA arrives on one barrier in CTA 0, which then releases everyone
RELEASE_NONE = 2              # one CTA: its own wait already ordered its reads before the reload
RELEASES = {"cluster": RELEASE_CLUSTER_BARRIER, "mbarrier": RELEASE_GATHER}


def release_mode(release: str, num_ctas: int) -> int:
    if release not in RELEASES:
        raise ValueError(f"release must be one of {sorted(RELEASES)}, got {release!r}")
    return RELEASE_NONE if num_ctas == 1 else RELEASES[release]


def group_barrier_layout(num_ctas: int):
    """One barrier for the whole cluster, living in CTA 0 (every basis zero: chapter 2)."""
    return mbarrier.MBarrierLayout([[0]] * log2(num_ctas))


@gluon.jit
def stage_of(it, STAGES: gl.constexpr):
    """Step ``it`` of a ring of STAGES buffers: its slot, and the parity of the phase its barrier completes."""
    return it % STAGES, (it // STAGES) & 1


@gluon.jit
def release(slot, empty, go, phase, RELEASE: gl.constexpr):
    """Every CTA of the cluster must be done with ``slot`` before anyone reloads it (peers write into it)."""
    if RELEASE == 0:                                   # RELEASE_CLUSTER_BARRIER
        hopper.cluster.barrier()
    elif RELEASE == 1:                                 # RELEASE_GATHER
        mbarrier.arrive(empty.index(slot))             # lands on CTA 0 (group barrier)
        mbarrier.wait(empty.index(slot), phase)        # CTA 0: everyone released the slot
        mbarrier.arrive(go.index(slot), from_cta=0)    # CTA 0 tells every CTA
        mbarrier.wait(go.index(slot), phase)


@gluon.jit
def ring_barriers(STAGES: gl.constexpr, RELEASE: gl.constexpr, group_all: gl.constexpr):
    """``ready[s]``: stage s has landed in this CTA. With the gather release, ``empty[s]`` is one barrier in
    CTA 0 that every CTA arrives on, and ``go[s]`` each CTA's own barrier that CTA 0 releases."""
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


# ------------------------------------------------------------------------ clusters resident at once

def max_clusters(compiled, num_ctas: int) -> int:
    """How many clusters of a compiled kernel can be resident at once (CUDA's occupancy calculator, with
    the kernel's real shared memory). A cluster must fit in one GPC, so this can be less than
    SMs / num_ctas (on the H200, 30 clusters of 4, not 33): a persistent grid larger than this runs its
    last clusters as a second wave. Triton 3.9's binding asks with 128 threads per CTA whatever the
    kernel's warps: exact for 4-warp CTAs and for kernels whose shared memory allows one CTA per SM (the
    matmuls); for others it can overestimate (see :func:`resident_clusters_known`)."""
    import triton
    return triton.runtime.driver.active.utils.cuOccupancyMaxActiveClusters(
        _loaded(compiled).function, compiled.metadata.shared, num_ctas)


def resident_clusters_known(num_warps: int, shared_bytes: int) -> bool:
    """Whether :func:`max_clusters` is exact for such a kernel (see its docstring)."""
    return num_warps == 4 or shared_bytes > SMEM_PER_CTA // 2


def _loaded(compiled):
    """A compiled kernel gets its CUfunction when first launched; the occupancy calculator needs it before.
    Triton 3.9 has no public call for that, so this is the one place that uses the private one."""
    compiled._init_handles()
    return compiled


# -------------------------------------------------------------------------- the matmul front end

def matmul_spec(name, kernel, plan, num_warps: int, targets: tuple, expect: tuple) -> lens.KernelSpec:
    """The lens spec of a persistent matmul from its plan (an 8192 x 8192 x 4096 problem's descriptors)."""
    sig = {"a_desc": descriptor_type(plan.dtype, [plan.tile_m, plan.block_k], plan.a),
           "b_desc": descriptor_type(plan.dtype, [plan.block_k, plan.block_n], plan.b),
           "c_desc": descriptor_type(plan.dtype, [plan.tile_m, plan.epilogue_n], plan.c),
           "M": "i32", "N": "i32", "K": "i32", **{k: "constexpr" for k in plan.constexprs()}}
    return lens.KernelSpec(name, kernel, sig, plan.constexprs(), {"num_warps": num_warps, "num_ctas": plan.num_ctas},
                           targets=targets, expect=expect)


@dataclass(frozen=True)
class MatmulCall:
    """One validated call of a persistent matmul wrapper: its options, plan, output and descriptors."""
    config: dict
    plan: object
    out: object
    a_desc: object
    b_desc: object
    c_desc: object
    M: int
    N: int
    K: int


def prepare_matmul(a, b, out, config: dict, defaults: dict, plan_fn, feature, what: str) -> MatmulCall:
    """The shared front of the persistent matmul wrappers. Arguments first (known options, operands, the
    plan, which validates the configuration, TMA constraints, the output), then the hardware ``feature``,
    then where the tensors live. ``plan_fn(M, N, K, gl_dtype, **config)`` returns a plan with ``tile_m``,
    ``block_k``, ``block_n``, ``epilogue_n`` and the shared layouts ``a``, ``b``, ``c``."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    unknown = set(config) - set(defaults)
    if unknown:
        raise TypeError(f"unknown options {sorted(unknown)}; known: {sorted(defaults)}")
    cfg = {**defaults, **config}
    M, N, K = check_operands(a, b)
    plan = plan_fn(M, N, K, gl_dtype(a), **cfg)
    a_box = [plan.tile_m, plan.block_k]
    b_box = [plan.block_k, plan.block_n]
    c_box = [plan.tile_m, plan.epilogue_n]
    check_tma_tensor(a, "a", [min(plan.tile_m, TMA_BOX_MAX), plan.block_k])
    check_tma_tensor(b, "b", b_box)
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N) or out.dtype != a.dtype:
            got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"out must be a ({M}, {N}) {a.dtype} tensor, got {got}")
        check_tma_tensor(out, "out", [min(plan.tile_m, TMA_BOX_MAX), plan.epilogue_n])
    require(feature, what)
    for t, name in ((a, "a"), (b, "b")) + (((out, "out"),) if out is not None else ()):
        check_on_gpu(t, name)
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    return MatmulCall(cfg, plan, out, TensorDescriptor.from_tensor(a, a_box, plan.a),
                      TensorDescriptor.from_tensor(b, b_box, plan.b), TensorDescriptor.from_tensor(out, c_box, plan.c),
                      M, N, K)
