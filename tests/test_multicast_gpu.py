"""Chapter 3 on a GPU: multicast delivers the exact tile to every CTA; the multicast wgmma loop
matches torch.matmul; the tcgen05 loop on Blackwell."""
import pytest
import torch

from multicta_kernels.core.accuracy import assert_matmul_close, poisoned
from multicta_kernels.core import hardware
from multicta_kernels import multicast as mc


@pytest.mark.clusters
@pytest.mark.parametrize("num_ctas", [2, 4, 8, 16])
@pytest.mark.parametrize("shape, dtype", [((64, 64), torch.float16), ((128, 128), torch.bfloat16), ((32, 64), torch.float32)])
@pytest.mark.parametrize("multicast", [True, False])
def test_every_cta_receives_the_tile(num_ctas, shape, dtype, multicast):
    x = torch.randn(shape, device="cuda").to(dtype)
    bad, out = mc.multicast_copy(x, num_ctas, multicast=multicast)
    assert bad.tolist() == [0] * num_ctas, f"mismatching elements per CTA: {bad.tolist()}"
    assert torch.equal(out, x)


@pytest.mark.wgmma
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("num_ctas, release", [(1, "cluster"), (2, "mbarrier"), (2, "cluster"), (4, "mbarrier"), (4, "cluster")])
@pytest.mark.parametrize("M, N, K", [(256, 256, 512), (200, 136, 72), (512, 384, 1000), (1, 128, 64), (3, 8, 8)])
def test_hopper_multicast_matmul(dtype, num_ctas, release, M, N, K):
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = poisoned((M, N), dtype)                        # what the kernel does not write stays NaN
    assert mc.hopper_multicast_matmul(a, b, num_ctas=num_ctas, release=release, out=c) is c
    assert_matmul_close(c, a, b)


@pytest.mark.clusters
@pytest.mark.parametrize("num_ctas, multicast", [(2, True), (8, True), (16, True), (4, False)])
def test_tile_stream_sees_every_tile(num_ctas, multicast):
    for release in ("cluster", "mbarrier"):
        for tiles in (64, 1):                           # 1: a size of 1 becomes a constant at launch
            launch, _ = mc.tile_stream(num_ctas, multicast=multicast, release=release, clusters=8, tiles=tiles)
            assert launch().tolist() == [tiles] * 8


@pytest.mark.clusters
@pytest.mark.parametrize("num_ctas, multicast, releases", [(2, True, ("cluster", "mbarrier")),
                                                           (8, True, ("cluster", "mbarrier")),
                                                           (16, True, ("cluster", "mbarrier")),
                                                           (4, False, ("cluster", "mbarrier", "none"))])
def test_tile_stream_reads_every_tile_intact(num_ctas, multicast, releases):
    """The data, not the count: every CTA sums each tile as it reads it, before its release; a reload that lands
    while a peer still reads (a release moved or dropped) changes that peer's sum, not the count of its waits."""
    for release in releases:
        for tiles in (64, 1):
            got, sums, expected = mc.tile_stream_sums(num_ctas, multicast=multicast, release=release, tiles=tiles)
            assert got.tolist() == [tiles] * 8, (release, tiles)
            bad = (sums != expected).nonzero().flatten().tolist()
            assert not bad, (f"{release}, {tiles} tiles: CTAs {bad[:8]} summed {sums[bad[:8]].tolist()}, "
                             f"expected {expected[bad[:8]].tolist()}")


@pytest.mark.tcgen05
@pytest.mark.parametrize("K", [64, 128, 640])
def test_blackwell_multicast_mma_seed_example(K):
    a = torch.randn(512, K, device=hardware.tensor_device(), dtype=torch.float16)
    b = torch.randn(K, 128, device=hardware.tensor_device(), dtype=torch.float16)
    assert_matmul_close(mc.blackwell_multicast_mma(a, b), a, b)
