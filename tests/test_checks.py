"""The element-wise checks (multicta_kernels.core.accuracy) on the CPU: they catch what a relative-norm bound
(bench.rel_err < 1e-2, the check they replaced) lets through, and they pass correct results.

Every corruption test first makes sure the corruption is real (and, where it makes the point, that the
norm bound would have passed it); ``pytest.raises`` fails the test if the check lets it through."""
import pytest
import torch

from multicta_kernels.measure import timing
from multicta_kernels.core.accuracy import assert_matmul_close, assert_softmax_close, one_finite_per_row, poisoned


def operands(M, N, K, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(dtype)
    b = torch.randn(K, N, generator=g).to(dtype)
    return a, b


def written(result):
    """``result`` written into a NaN-poisoned output, as a kernel writes it."""
    out = poisoned(result.shape, result.dtype, device="cpu")
    out.copy_(result)
    return out


# ------------------------------------------------------------------------------------------ matmul

@pytest.fixture(scope="module")
def wide():
    """16384 x 1024 outputs (K = 16): large enough that one zeroed row or two swapped 16 x 16 tiles move
    the relative norm by less than 1 %."""
    a, b = operands(16384, 1024, 16, torch.float16)
    return a, b, (a.float() @ b.float()).half()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (64, 48, 32), (128, 96, 1024)])
def test_matmul_correct_output_passes(M, N, K, dtype):
    a, b = operands(M, N, K, dtype)
    assert_matmul_close(written((a.float() @ b.float()).to(dtype)), a, b)


def test_matmul_zeroed_row_raises(wide):
    a, b, good = wide
    bad = good.clone()
    bad[4321] = 0
    assert timing.rel_err(bad, a.float() @ b.float()) < 1e-2          # the norm bound lets it through
    with pytest.raises(AssertionError, match="not close"):
        assert_matmul_close(written(bad), a, b)


def test_matmul_one_unwritten_element_raises():
    a, b = operands(64, 48, 32, torch.float16)
    c = written((a.float() @ b.float()).half())
    assert_matmul_close(c, a, b)                                      # passes as written ...
    c[17, 5] = float("nan")                                           # ... not with one element left NaN
    with pytest.raises(AssertionError, match="1 of 3072 output elements were never written"):
        assert_matmul_close(c, a, b)


def test_matmul_swapped_tiles_raise(wide):
    a, b, good = wide
    bad = good.clone()
    t1, t2 = (slice(16, 32), slice(32, 48)), (slice(9000, 9016), slice(512, 528))
    bad[t1], bad[t2] = good[t2], good[t1]
    assert not torch.equal(bad, good)
    assert timing.rel_err(bad, a.float() @ b.float()) < 1e-2          # the norm bound lets it through
    with pytest.raises(AssertionError, match="not close"):
        assert_matmul_close(written(bad), a, b)


# ------------------------------------------------------------------------------------------ softmax

def old_softmax_check(y, x):
    """What assert_softmax_close did before its atol scaled with 1/N: atol = rtol = 1e-5."""
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), dim=1), atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def flat_rows():
    """Rows of 524288 values of torch.rand: every softmax value lies below 1e-5 (the mean is 1/N)."""
    x = torch.rand(4, 524288, generator=torch.Generator().manual_seed(0))
    return x, torch.softmax(x, dim=1)


def test_softmax_all_zero_output_raises(flat_rows):
    x, good = flat_rows
    zeros = torch.zeros_like(good)
    assert float(good.max()) < 1e-5
    old_softmax_check(zeros, x)                                       # the hole: all zeros passed
    with pytest.raises(AssertionError, match="not close"):
        assert_softmax_close(zeros, x)


def test_softmax_one_corrupted_row_raises(flat_rows):
    x, good = flat_rows
    bad = good.clone()
    bad[2] = good[2].roll(1)                                          # the right values, one place off
    assert not torch.equal(bad, good)
    old_softmax_check(bad, x)
    with pytest.raises(AssertionError, match="not close"):
        assert_softmax_close(bad, x)


def test_softmax_unwritten_element_raises():
    x = torch.randn(3, 1000)
    y = written(torch.softmax(x, dim=1))
    y[1, 999] = float("nan")
    with pytest.raises(AssertionError, match="1 of 3000 output elements were never written"):
        assert_softmax_close(y, x)


def extreme_rows(N):
    g = torch.Generator().manual_seed(1)
    rows = [torch.randn(N, generator=g) * 80,                        # exp would overflow without the max shift
            torch.zeros(N),                                           # every value 1/N
            torch.full((N,), -1e4),                                   # one value near 1, the rest 0
            torch.randn(N, generator=g) + 1e4,                        # a large common offset
            torch.randn(N, generator=g)]
    rows[2][N // 3] = 0.0
    rows[4][3::3] = float("-inf")                                     # a third of the row has no mass
    return torch.stack(rows)


@pytest.mark.parametrize("dtype, N", [(torch.float32, 1), (torch.float32, 4096), (torch.float32, 524288),
                                      (torch.float16, 777), (torch.float16, 65536), (torch.float16, 131072),
                                      (torch.bfloat16, 777), (torch.bfloat16, 131072)])
def test_softmax_correct_output_passes(dtype, N):
    """torch.softmax in the output's dtype (a half input: softmax in fp32, rounded once, and torch's own
    half softmax), on random rows at the scales the tests use (3, and 4: torch's fp32 sum is worst there)
    and on extreme rows."""
    g = torch.Generator().manual_seed(N)
    x32 = torch.cat([torch.randn(2, N, generator=g) * 3, torch.randn(2, N, generator=g) * 4, extreme_rows(N)])
    x = x32.to(dtype)
    if dtype == torch.float32:
        assert_softmax_close(written(torch.softmax(x, dim=1)), x)
    else:
        assert_softmax_close(written(torch.softmax(x.float(), dim=1).to(dtype)), x, "rounded once")
        assert_softmax_close(written(torch.softmax(x, dim=1)), x, "torch's half softmax")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_one_finite_per_row_is_what_torch_says(dtype):
    """The staged and halves GPU tests' -inf-but-one rows: the finite value of row r at columns[r % 3], and their
    softmax exactly 1 there and 0 elsewhere, as torch computes it."""
    x, want = one_finite_per_row(7, 512, [0, 511, 200], [0.0, -95.0, 7.0, 3.0], dtype, device="cpu")
    assert x.dtype == dtype and torch.isfinite(x).sum(dim=1).tolist() == [1] * 7
    assert [int(torch.isfinite(row).nonzero()) for row in x] == [0, 511, 200] * 2 + [0]
    assert x[3, 0].item() == 3.0 and x[1, 511].item() == -95.0
    assert torch.equal(torch.softmax(x.float(), dim=1).to(dtype), want)


@pytest.mark.parametrize("kwargs, msg", [(dict(columns=[512]), "columns"), (dict(columns=[]), "at least one"),
                                         (dict(values=[float("inf")]), "values"), (dict(rows=0), "rows")])
def test_one_finite_per_row_refuses_what_it_cannot_build(kwargs, msg):
    args = dict(rows=3, N=512, columns=[0], values=[1.0], dtype=torch.float32, device="cpu") | kwargs
    with pytest.raises(ValueError, match=msg):
        one_finite_per_row(**args)
