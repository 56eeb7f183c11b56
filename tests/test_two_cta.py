"""Chapter 4: the 2-CTA kernels compile for sm_100a with cta_group::2; the 1-CTA twin without;
validation; and, on Blackwell, correctness against torch.matmul."""
import pytest
import torch

from multicta_kernels import catalog, hardware, lens, two_cta
from multicta_kernels.checks import assert_matmul_close
from multicta_kernels.hardware import TCGEN05, UnsupportedHardwareError


def test_twins_differ_exactly_in_cta_group():
    two = catalog.compile("two_cta_mma", "sm_100a")
    one = catalog.compile("one_cta_mma", "sm_100a")
    assert all(two.census(["tcgen05.mma.cta_group::2", "tcgen05.alloc.cta_group::2", ".reqnctapercluster 2",
                           "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster"]).values())
    assert "cta_group::2" not in one.ptx and ".reqnctapercluster" not in one.ptx
    assert one.census(["tcgen05.mma.cta_group::1"])["tcgen05.mma.cta_group::1"] > 0


def test_two_cta_kernels_are_blackwell_only():
    with pytest.raises(ValueError, match="written for sm_100a only"):
        catalog.compile("two_cta_mma", "sm_90a")


def test_intensity_numbers():
    one = two_cta.intensity(128, 128, 64, two_ctas=False)
    two = two_cta.intensity(256, 128, 64, two_ctas=True)
    assert one["flops_per_cta"] == two["flops_per_cta"] == 2 * 128 * 128 * 64
    assert one["smem_bytes_per_cta"] == 32768 and two["smem_bytes_per_cta"] == 24576


@pytest.mark.parametrize("a_shape, b_shape, dtype, two, exc, msg", [
    ((256, 64), (64, 128), torch.float32, True, TypeError, "float16 or both bfloat16"),
    ((256, 64), (32, 128), torch.float16, True, ValueError, "\\(M, K\\) @ \\(K, N\\)"),
    ((128, 64), (64, 128), torch.float16, True, ValueError, "M = 256"),
    ((256, 64), (64, 128), torch.float16, False, ValueError, "M = 128"),
    ((256, 64), (64, 300), torch.float16, True, ValueError, "N must be"),
    ((256, 40), (40, 128), torch.float16, True, ValueError, "K must be"),
    ("a transposed", (64, 128), torch.float16, True, ValueError, "stride"),
])
def test_tile_validation(a_shape, b_shape, dtype, two, exc, msg):
    """Bad arguments are reported as such on every machine, before the hardware is asked about."""
    a = torch.randn(64, 256).to(dtype).T if a_shape == "a transposed" else torch.randn(a_shape).to(dtype)
    with pytest.raises(exc, match=msg):
        two_cta.mma_tile(a, torch.randn(b_shape).to(dtype), two_ctas=two)


def test_barriers_are_invalidated_before_their_bytes_are_reused():
    """c_smem is allocated after the MMA: the allocator may give it the barriers' bytes (the whole
    kernel's shared memory is the size of c_smem alone), and PTX requires mbarrier.inval first."""
    for name in ("two_cta_mma", "one_cta_mma"):
        k = catalog.compile(name, "sm_100a")
        assert k.census(["mbarrier.inval"])["mbarrier.inval"] == 2, name
    k = catalog.compile("two_cta_mma", "sm_100a")
    assert k.shared_bytes == 128 * 128 * 2             # c_smem alone: A, B and the barriers share its bytes


def test_looped_validation():
    with pytest.raises(ValueError, match="512 x 128"):
        two_cta.looped_mma(torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 128, dtype=torch.float16))


@pytest.mark.skipif(hardware.has(TCGEN05), reason="checks the refusal on other GPUs")
def test_other_gpus_are_refused_before_compiling(monkeypatch):
    import multicta_kernels.two_cta as m
    monkeypatch.setattr(m.two_cta_mma_kernel, "run", lambda *a, **k: pytest.fail("a kernel was launched"))
    a = torch.randn(256, 64, dtype=torch.float16)
    b = torch.randn(64, 128, dtype=torch.float16)
    for capability in ((9, 0), None):
        import contextlib
        with hardware.pretend(capability) if capability else contextlib.nullcontext():
            with pytest.raises(UnsupportedHardwareError, match="sm_100"):
                two_cta.mma_tile(a, b)
            with pytest.raises(UnsupportedHardwareError, match="sm_100"):
                two_cta.looped_mma(torch.randn(512, 128, dtype=torch.float16),
                                   torch.randn(128, 128, dtype=torch.float16))


@pytest.mark.tcgen05
@pytest.mark.parametrize("two", [True, False])
@pytest.mark.parametrize("N, K, dtype", [(128, 64, torch.float16), (256, 64, torch.float16), (64, 128, torch.bfloat16)])
def test_tile_matches_torch(two, N, K, dtype):
    M = 256 if two else 128
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = two_cta.mma_tile(a, b, two_ctas=two)
    assert_matmul_close(c, a, b)


@pytest.mark.tcgen05
@pytest.mark.parametrize("K, dtype", [(128, torch.float16), (256, torch.bfloat16), (64, torch.float16)])
def test_looped_matches_torch(K, dtype):
    a = torch.randn(512, K, device="cuda").to(dtype)
    b = torch.randn(K, 128, device="cuda").to(dtype)
    c = two_cta.looped_mma(a, b)
    assert_matmul_close(c, a, b)
