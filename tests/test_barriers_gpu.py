"""Chapter 2's kernels on a real GPU: results checked element by element, many rounds."""
import pytest
import torch

from multicta_kernels import barriers

pytestmark = pytest.mark.clusters


@pytest.mark.parametrize("num_ctas", [2, 4, 8, 16])
@pytest.mark.parametrize("width", [32, 128, 1024])
def test_cluster_exchange(num_ctas, width):
    x = torch.randint(-1000, 1000, (num_ctas, width), device="cuda", dtype=torch.int32)
    for _ in range(20):                     # repeat: an ordering bug shows up as an occasional wrong row
        out = barriers.cluster_exchange(x)
        torch.testing.assert_close(out, (x + x.sum(0, keepdim=True)).to(torch.int32), rtol=0, atol=0)


@pytest.mark.parametrize("num_ctas", [2, 4, 8, 16])
def test_ping_pong_many_rounds(num_ctas):
    errors = barriers.ping_pong(num_ctas, 2000)
    assert errors.tolist() == [0] * num_ctas


def test_pair_barriers():
    for _ in range(50):
        x = torch.randint(-10**6, 10**6, (8,), device="cuda", dtype=torch.int32)
        out = barriers.pair_sums(x)
        assert out.tolist() == (x[0::2] + x[1::2]).tolist()


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_cost_kernel_completes_every_mode(num_ctas):
    """Every mode of the cost benchmark runs its 101 rounds to the end (a hang would time out). This checks
    completion only: the kernel hands off no data, so what its barriers order is checked on the CPU, where every
    dropped wait, arrive or release and every flipped parity of barrier_cost_kernel is killed by the ties
    (results/mutation_cpu.json)."""
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    group_all = barriers.cluster_layouts(num_ctas)["group_all"]
    for mode in barriers.MODES:
        barriers.barrier_cost_kernel[(1,)](out, 101, MODE=mode, group_all=group_all, num_warps=1, num_ctas=num_ctas)
        torch.cuda.synchronize()
        assert out.item() == 1               # 101 phase flips end on parity 1


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_cluster_barrier_inside_warp_specialize_completes(num_ctas):
    """Every CTA's default partition reports that its worker passed the cluster barrier, within 60 s."""
    from multicta_kernels.show.notebook import run_live
    out = run_live("cluster_barrier_in_partition", lambda: barriers.cluster_barrier_in_partition(num_ctas), 60)
    assert out.tolist() == [1] * num_ctas
