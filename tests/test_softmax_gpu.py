"""The softmax against torch.softmax on a real GPU: fresh random data, output poisoned first, every element
checked by checks.assert_softmax_close (reference in fp64, rtol by dtype, atol = rtol / N)."""
import pytest
import torch

from multicta_kernels.checks import assert_softmax_close, poisoned
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


@pytest.mark.parametrize("two_pass", [False, True])
@pytest.mark.parametrize("num_ctas", [1, 2, 4, 8, 16])
def test_every_cluster_size(num_ctas, two_pass):
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
        multicta_softmax(x, out, config=cfg, two_pass=two_pass)
        assert_softmax_close(out, x, f"{num_ctas} CTAs x {warps} warps, two_pass={two_pass}")
        tried += 1
    assert tried >= 1, "no configuration was checked"


def test_in_place_and_extreme_values():
    x = torch.randn(16, 5000, device="cuda") * 80      # exp would overflow without the max shift
    x[3, 17] = float("-inf")
    original = x.clone()
    multicta_softmax(x, x)
    assert_softmax_close(x, original, "in place")
