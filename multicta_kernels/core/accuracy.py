"""Element-wise checks against PyTorch, shared by the tests, the doctor and the notebooks.

A relative-norm bound (||c - ref|| / ||ref||) lets a few corrupted rows through: one wrong tile of a
large matmul moves the norm by less than a percent. Every check here compares element by element,
with tolerances set by the output dtype (its rounding) and, for matmuls, the reduction length K (the
typical magnitude of an output element grows like sqrt(K) for random inputs). Outputs are poisoned
with NaN first, so an element the kernel never wrote fails the check.

Inside a dry run or the doctor's compile phase (:mod:`multicta_kernels.core.dryrun`) nothing was computed:
the checks then compare nothing and the session counts them as skipped.
"""
from __future__ import annotations

import math

from .dtypes import DTYPES, dtype_name
from . import validate


def matmul_tolerances(dtype, K: int) -> tuple[float, float]:
    """(rtol, atol) for an fp32-accumulated matmul stored in ``dtype``: two units of output rounding
    relative, and the same times sqrt(K) absolute (outputs near zero; a wrong value is O(sqrt(K)))."""
    validate.dtype(dtype)
    validate.count(K, "K", high=1 << 31)
    rtol = 4 * DTYPES[dtype_name(dtype)].eps
    return rtol, rtol * math.sqrt(max(K, 1))


def poisoned(shape, dtype, device=None):
    """A tensor full of NaN: what the kernel does not write stays NaN and fails the check. ``device``: by
    default the GPU (the CPU while one is pretended: see ``hardware.tensor_device``)."""
    import torch
    from .hardware import tensor_device
    return torch.full(tuple(shape), float("nan"), dtype=dtype, device=device or tensor_device())


def one_finite_per_row(rows: int, N: int, columns, values, dtype, device=None) -> tuple:
    """(x, want): rows of -inf but one finite value each (row r: ``values[r % len(values)]`` at column
    ``columns[r % len(columns)]``) and their exact softmax, 1 there and 0 elsewhere."""
    import torch
    from .hardware import tensor_device
    rows = validate.count(rows, "rows", high=1 << 20)
    N = validate.count(N, "N", high=1 << 31)
    if not columns or not values:
        raise ValueError("columns and values must each hold at least one entry")
    columns = [validate.index(c, "columns", N) for c in columns]
    values = [validate.finite(v, "values") for v in values]
    device = device or tensor_device()
    r = torch.arange(rows)
    where = torch.tensor([columns[i % len(columns)] for i in range(rows)])
    x = torch.full((rows, N), float("-inf"), device=device, dtype=dtype)
    x[r, where] = torch.tensor([values[i % len(values)] for i in range(rows)], device=device).to(dtype)
    want = torch.zeros_like(x)
    want[r, where] = 1
    return x, want


def _skipped(what: str) -> bool:
    from .dryrun import skip_compare
    return skip_compare(what)


def assert_matmul_close(c, a, b, what: str = "matmul") -> None:
    """``c`` equals ``a @ b`` (computed in fp32) element by element, every element written."""
    import torch
    if _skipped(what):
        return
    ref = a.float() @ b.float()
    unwritten = int(torch.isnan(c).sum())
    if unwritten:
        raise AssertionError(f"{what}: {unwritten} of {c.numel()} output elements were never written (still NaN)")
    rtol, atol = matmul_tolerances(c.dtype, a.shape[1])
    torch.testing.assert_close(c.float(), ref, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def softmax_tolerances(dtype, N: int) -> tuple[float, float]:
    """(rtol, atol) for a softmax over rows of ``N`` elements stored in ``dtype``.

    ``rtol`` is four units of output rounding for the half types and 1e-4 for fp32. For fp32 1e-5 would
    do for the book's kernels (fp32 sums of at most 128 terms per thread, then a tree: off by 1.4e-6 in a
    CPU emulation at N = 524288), but not for torch's own fp32 softmax on a CPU: it sums each vector
    lane's share of the row in sequence, and once the running sum is large the small terms lose their low
    bits, so the whole row comes out too large by one factor, up to 5.8e-5 measured at N = 524288
    (randn * 4, the worst of scales 1 to 15). 1e-4 accepts what torch computes; a kernel bug is off by
    far more.

    ``atol`` is ``rtol / N``: the values of a row sum to 1, so their mean is 1/N, and a fixed atol stops
    meaning anything for wide rows (with atol = 1e-5, a row of 524288 values of ``torch.rand`` has every
    true value below atol, and an all-zero output passed). With ``rtol / N`` an element may be off by
    ``rtol`` times the mean row value at least, and by ``rtol`` relative above the mean. fp16 adds
    ``2**-24``, its smallest subnormal: a value below fp16's normal range (6.1e-5) is stored with an
    absolute error of up to half that spacing, more than ``rtol / N`` once N exceeds 65536 (bf16 and fp32
    share fp32's exponent range, so their subnormals lie far below ``rtol / N``)."""
    validate.dtype(dtype)
    validate.count(N, "N", high=1 << 31)
    name = dtype_name(dtype)
    rtol = 1e-4 if name == "float32" else 4 * DTYPES[name].eps
    atol = rtol / max(N, 1) + (2.0 ** -24 if name == "float16" else 0.0)
    return rtol, atol


def assert_softmax_close(y, x, what: str = "softmax") -> None:
    """``y`` equals ``torch.softmax(x, dim=1)`` (computed in fp64) element by element, every element
    written, with :func:`softmax_tolerances` for ``y``'s dtype and the row length ``x.shape[1]``."""
    import torch
    if _skipped(what):
        return
    unwritten = int(torch.isnan(y).sum())
    if unwritten:
        raise AssertionError(f"{what}: {unwritten} of {y.numel()} output elements were never written (still NaN)")
    ref = torch.softmax(x.double(), dim=1)
    rtol, atol = softmax_tolerances(y.dtype, x.shape[1])
    torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def expect(ok, what: str) -> None:
    """``assert ok, what`` for a result of a kernel (skipped, like the comparisons, where nothing ran)."""
    if not _skipped(what) and not ok:
        raise AssertionError(what)


def assert_equal(got, want, what: str) -> None:
    """Exact equality (copies, integer hand-offs), saying how many elements differ."""
    import torch
    if _skipped(what):
        return
    if got.shape != want.shape or not torch.equal(got, want):
        bad = "shape" if got.shape != want.shape else f"{int((got != want).sum())} of {want.numel()} elements"
        raise AssertionError(f"{what}: {bad} differ")
