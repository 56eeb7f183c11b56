"""Element-wise checks against PyTorch, shared by the tests, the doctor and the notebooks.

A relative-norm bound (||c - ref|| / ||ref||) lets a few corrupted rows through: one wrong tile of a
large matmul moves the norm by less than a percent. Every check here compares element by element,
with tolerances set by the output dtype (its rounding) and, for matmuls, the reduction length K (the
typical magnitude of an output element grows like sqrt(K) for random inputs). Outputs are poisoned
with NaN first, so an element the kernel never wrote fails the check.
"""
from __future__ import annotations

import math

from .lens import DTYPES, dtype_name


def matmul_tolerances(dtype, K: int) -> tuple[float, float]:
    """(rtol, atol) for an fp32-accumulated matmul stored in ``dtype``: two units of output rounding
    relative, and the same times sqrt(K) absolute (outputs near zero; a wrong value is O(sqrt(K)))."""
    rtol = 4 * DTYPES[dtype_name(dtype)].eps
    return rtol, rtol * math.sqrt(max(K, 1))


def poisoned(shape, dtype, device="cuda"):
    """A tensor full of NaN: what the kernel does not write stays NaN and fails the check."""
    import torch
    return torch.full(tuple(shape), float("nan"), dtype=dtype, device=device)


def assert_matmul_close(c, a, b, what: str = "matmul") -> None:
    """``c`` equals ``a @ b`` (computed in fp32) element by element, every element written."""
    import torch
    ref = a.float() @ b.float()
    unwritten = int(torch.isnan(c).sum())
    if unwritten:
        raise AssertionError(f"{what}: {unwritten} of {c.numel()} output elements were never written (still NaN)")
    rtol, atol = matmul_tolerances(c.dtype, a.shape[1])
    torch.testing.assert_close(c.float(), ref, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def assert_softmax_close(y, x, what: str = "softmax") -> None:
    """``y`` equals ``torch.softmax(x, dim=1)`` (in fp32) element by element."""
    import torch
    unwritten = int(torch.isnan(y).sum())
    if unwritten:
        raise AssertionError(f"{what}: {unwritten} of {y.numel()} output elements were never written (still NaN)")
    ref = torch.softmax(x.float(), dim=1)
    tol = 1e-5 if y.dtype == torch.float32 else 4 * DTYPES[dtype_name(y.dtype)].eps
    torch.testing.assert_close(y.float(), ref, rtol=tol, atol=tol, msg=lambda m: f"{what}: {m}")


def assert_equal(got, want, what: str) -> None:
    """Exact equality (copies, integer hand-offs), saying how many elements differ."""
    import torch
    if got.shape != want.shape or not torch.equal(got, want):
        bad = "shape" if got.shape != want.shape else f"{int((got != want).sum())} of {want.numel()} elements"
        raise AssertionError(f"{what}: {bad} differ")
