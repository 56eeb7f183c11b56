"""Operands of the book's TMA kernels: their CGA layouts, shared layouts and descriptors, and the checks a
tensor must pass before TMA reads it.

Chapter 3 introduces the pieces (who receives which tile); chapters 4 to 6 build their kernels from them.
"""
from __future__ import annotations

from triton.experimental.gluon import language as gl

from ..core import validate
from ..core.dtypes import DTYPES, dtype_name
from ..core.hardware import TMA_ALIGN, TMA_BOX_MAX, log2
from ..core.layouts import check_cga_layout


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
    num_ctas = validate.cluster_size(num_ctas)
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
    return f"tensordesc<{DTYPES[dtype_name(dtype)].short}[{','.join(map(str, block))}],{layout!r}>"


def gl_dtype(t):
    """The Gluon dtype of a torch tensor, for the TMA kernels (float16, bfloat16, float32)."""
    name = dtype_name(t.dtype)
    if name not in DTYPES:
        raise TypeError(f"TMA kernels here take float16, bfloat16 or float32 tensors, not {t.dtype}")
    return DTYPES[name].gl


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
