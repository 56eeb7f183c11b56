"""The softmax against torch.softmax on a real GPU: fresh random data, output poisoned first, every element
checked by checks.assert_softmax_close (reference in fp64, rtol by dtype, atol = rtol / N)."""
import pytest
import torch

from multicta_kernels.core.accuracy import assert_softmax_close, poisoned
from multicta_kernels.softmax import make_config, multicta_softmax

pytestmark = pytest.mark.clusters

SHAPES = [(1, 1), (7, 1), (3, 2), (64, 256), (33, 1000), (128, 1024), (5, 3000), (17, 4096), (16, 16385),
          (4, 32768), (3, 50000), (8, 65536), (2, 131072), (2, 200000), (3, 262144), (1, 524288)]


@pytest.mark.parametrize("M, N", SHAPES)
def test_matches_torch_fp32(M, N):
    x = torch.randn(M, N, device="cuda") * 3
    out = poisoned((M, N), torch.float32)
    multicta_softmax(x, out)
    assert_softmax_close(out, x)


@pytest.mark.parametrize("N", [100, 4096, 70000])
def test_strided_rows(N):
    wide = torch.randn(9, N + 37, device="cuda")
    x = wide[:, 5:5 + N]                      # row stride N + 37, misaligned start
    out_wide = poisoned((9, N + 11), torch.float32)
    out = out_wide[:, :N]
    multicta_softmax(x, out)
    assert_softmax_close(out, x)
    assert torch.isnan(out_wide[:, N:]).all(), "wrote outside the output view"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M, N", [(31, 777), (4, 65536)])
def test_half_precision(dtype, M, N):
    x = torch.randn(M, N, device="cuda").to(dtype)
    out = poisoned((M, N), dtype)
    multicta_softmax(x, out)
    assert_softmax_close(out, x)


@pytest.mark.parametrize("two_pass, exchange", [(False, "compiler"), (True, "compiler"), (False, "one_round")])
@pytest.mark.parametrize("num_ctas", [1, 2, 4, 8, 16])
def test_every_cluster_size(num_ctas, two_pass, exchange):
    """Same rows, every cluster size, both kernels: the cross-CTA reductions must agree with torch.
    N = 40000 leaves the last CTAs of a 16-CTA cluster with no valid column at all; one CTA gets a
    narrower row, since 40000 columns do not fit one CTA's registers."""
    N = 40000 if num_ctas > 1 else 12000
    x = torch.randn(6, N, device="cuda")
    tried = 0
    for warps in (4, 8, 16):
        try:
            cfg = make_config(N, num_ctas, warps, 1)
        except ValueError:                   # too many values per thread for this warp count
            continue
        out = poisoned(x.shape, x.dtype)
        multicta_softmax(x, out, config=cfg, two_pass=two_pass, exchange=exchange)
        assert_softmax_close(out, x, f"{num_ctas} CTAs x {warps} warps, two_pass={two_pass}, {exchange}")
        tried += 1
    assert tried >= 1, "no configuration was checked"


def test_in_place_and_extreme_values():
    x = torch.randn(16, 5000, device="cuda") * 80      # exp would overflow without the max shift
    x[3, 17] = float("-inf")
    original = x.clone()
    multicta_softmax(x, x)
    assert_softmax_close(x, original, "in place")


# Rows whose maximum is far below zero. At these widths the picked cluster leaves whole CTAs with no
# valid column (their slice is entirely past N): their max is -inf and must be exchanged as -inf, not
# as a substitute 0 (with 0 exchanged, a row max below about -87 underflowed every partial sum: 0/0).
FAR_BELOW = [40000, 100000, 200000, 1000, 65536]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("exchange", ["compiler", "one_round", "pipelined"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shift", [-50.0, -90.0, -200.0])
@pytest.mark.parametrize("N", FAR_BELOW)
def test_rows_far_below_zero(N, shift, dtype, exchange):
    x = (torch.randn(3, N, device="cuda") + shift).to(dtype)
    out = poisoned(x.shape, dtype)
    cfg = _pipelined_config(N, dtype) if exchange == "pipelined" else None
    if exchange == "pipelined" and cfg is None:
        pytest.skip(f"no pipelined configuration holds rows of {N} {dtype}")
    multicta_softmax(x, out, config=cfg, exchange=exchange)
    assert_softmax_close(out, x, f"randn {shift:+g}, N = {N}, {dtype}, {exchange}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", FAR_BELOW)
def test_rows_of_minus_inf_but_one(N, dtype):
    """Every element -inf but one finite value per row (anywhere, far below zero too): that element is 1."""
    x = torch.full((4, N), float("-inf"), device="cuda", dtype=dtype)
    where = torch.tensor([0, N // 3, N - 1, N // 2])
    x[torch.arange(4), where] = torch.tensor([0.0, -300.0, 7.0, -95.0], device="cuda").to(dtype)
    for two_pass, exchange in ((False, "compiler"), (True, "compiler"), (False, "one_round"), (False, "pipelined")):
        cfg = _pipelined_config(N, dtype) if exchange == "pipelined" else None
        if exchange == "pipelined" and cfg is None:
            continue
        out = poisoned(x.shape, dtype)
        multicta_softmax(x, out, config=cfg, two_pass=two_pass, exchange=exchange)
        want = torch.zeros_like(out)
        want[torch.arange(4), where] = 1
        assert torch.equal(out, want), f"two_pass={two_pass}, {exchange}: {int((out != want).sum())} elements differ"


@pytest.mark.parametrize("N", [40000, 200000])
def test_fused_as_accurate_as_two_pass(N):
    """Shifted rows: the fused kernel's largest relative error stays within 3x the two-pass kernel's
    (exchanging a substitute 0 for a masked slice's max made it about 20x worse at shifts -50 and -90)."""
    for shift in (-50.0, -90.0):
        x = torch.randn(8, N, device="cuda") + shift
        ref = torch.softmax(x.double(), dim=1)
        err = {}
        for two_pass in (False, True):
            out = poisoned(x.shape, x.dtype)
            multicta_softmax(x, out, two_pass=two_pass)
            err[two_pass] = ((out.double() - ref).abs() / ref).max().item()
        assert err[False] <= 3 * err[True] + 1e-7, f"shift {shift}: fused {err[False]:.2e}, two-pass {err[True]:.2e}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M, N", [(1, 4097), (5, 40000), (33, 65536), (7, 131072), (2, 200000), (3, 262144),
                                  (1, 524288)])
def test_one_round_exchange(M, N, dtype):
    """The hand-written exchange (st.async into every CTA's shared memory, one wait) against torch, with
    strided rows, at the picked cluster and at every other cluster size that holds the row."""
    x = torch.randn(M, N + 3, device="cuda").to(dtype)[:, :N] * 3
    name = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype]
    tried = 0
    for ctas in (2, 4, 8, 16):
        for warps in (4, 8, 16):
            try:
                cfg = make_config(N, ctas, warps, 1, dtype=name)
            except ValueError:               # does not fit this cluster's registers, or too few columns
                continue
            out = poisoned((M, N), dtype)
            multicta_softmax(x, out, config=cfg, exchange="one_round")
            assert_softmax_close(out, x, f"one round, {ctas} CTAs x {warps} warps, {M}x{N} {dtype}")
            tried += 1
            break
    assert tried >= 1, "no configuration was checked"


def _pipelined_config(N, dtype, ctas=None):
    """The first cluster (from the fewest CTAs, 4 warps first) that the pipelined kernel can run rows of N on."""
    name = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype]
    for c in (ctas,) if ctas else (2, 4, 8, 16):
        for warps in (4, 8, 16):
            try:
                return make_config(N, c, warps, 1, dtype=name, exchange="pipelined")
            except ValueError:               # too many values per thread, or too few columns per CTA
                continue
    return None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M, N", [(1, 8192), (13, 40000), (64, 65536), (301, 65536), (45, 100000), (29, 131072),
                                  (37, 200000), (31, 262144)])
def test_pipelined_exchange(M, N, dtype):
    """The persistent kernel at every cluster size that holds the row: as many programs as fit, each walking its
    row blocks through the two exchange slots (M > programs: several blocks each, a last pair half past M), with
    strided rows, into a poisoned output, and in place."""
    x = torch.randn(M, N + 3, device="cuda").to(dtype)[:, :N] * 3
    tried = 0
    for ctas in (2, 4, 8, 16):
        cfg = _pipelined_config(N, dtype, ctas)
        if cfg is None:
            continue
        out = poisoned((M, N), dtype)
        multicta_softmax(x, out, config=cfg)
        assert_softmax_close(out, x, f"pipelined, {ctas} CTAs x {cfg.num_warps} warps, {M}x{N} {dtype}")
        tried += 1
    assert tried >= 1, "no configuration was checked"
    inplace = x.clone()
    multicta_softmax(inplace, inplace, config=cfg)
    assert_softmax_close(inplace, x, f"pipelined in place, {M}x{N} {dtype}")


@pytest.mark.parametrize("exchange", ["one_round", "pipelined"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("N", [17, 999, 4097, 40001, 65535, 100003, 131071, 200000])
def test_widths_that_are_not_powers_of_two_at_every_cluster_size(N, dtype, exchange):
    """The hand-written exchanges on rows that fill a power-of-two tile only in part (the last CTAs may hold a short
    share, or none), at every cluster size that holds the row, contiguous (vector loads) and strided by an odd step
    (scalar ones), every element checked in a poisoned output."""
    name = {torch.float32: "float32", torch.float16: "float16"}[dtype]
    x = (torch.randn(5, N + 1, device="cuda") * 3).to(dtype)
    tried, refused = 0, []
    for ctas in (2, 4, 8, 16):
        for warps in (4, 8, 16):
            try:
                cfg = make_config(N, ctas, warps, 1, dtype=name, exchange=exchange)
            except ValueError as e:          # too many values per thread, too few columns, or it would spill
                refused.append(str(e))
                continue
            for rows in (x[:, :N].contiguous(), x[:, :N]):
                out = poisoned((5, N), dtype)
                multicta_softmax(rows, out, config=cfg)
                assert_softmax_close(out, rows, f"{exchange}, {ctas} CTAs x {warps} warps, N={N} {dtype}, "
                                                f"stride {rows.stride(0)}")
            tried += 1
            break
    if not tried and exchange == "pipelined" and all("too short" in r for r in refused):
        pytest.skip(f"one row per program: every layout stacks rows this short ({refused[0]})")
    assert tried >= 1, f"no configuration was checked: {refused[:2]}"
