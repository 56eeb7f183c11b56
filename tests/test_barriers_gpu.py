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
    """Every mode of the cost benchmark runs its 101 rounds to the end (a hang would time out), the benchmark's
    kernel as it is timed (no check compiled in)."""
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    group_all = barriers.cluster_layouts(num_ctas)["group_all"]
    for mode in barriers.MODES:
        barriers.barrier_cost_kernel[(1,)](out, 101, MODE=mode, group_all=group_all, num_warps=1, num_ctas=num_ctas)
        torch.cuda.synchronize()
        assert out.item() == 1               # 101 phase flips end on parity 1


@pytest.mark.parametrize("num_ctas", [2, 16])
@pytest.mark.parametrize("mode", [1, 2, 3, 4, 5])
def test_cost_kernel_holds_every_cta_until_all_entered(num_ctas, mode):
    """The cost kernel's hand-offs, observed: with ``seen_ptr`` each CTA adds itself to round r's count before
    the round's hand-off and reads the count after it, with relaxed atomics at GPU scope (Triton 3.9 puts a
    cluster barrier before and after an acq_rel atomic in a multi-CTA kernel, which would hold the CTAs itself).
    A hand-off that holds every CTA until all have entered leaves every record at num_ctas; with a wait or a
    barrier dropped, a CTA can leave early and then reads less (results/h200/cost_kernel_check.json: mode 2
    without its cluster barrier failed at 16 CTAs and passed at 2). Modes 2 and 4 order the counts by the memory
    model (barrier.cluster's default release and acquire; release and acquire at cluster scope); modes 1, 3 and
    5 order nothing across CTAs (CTA scope, or relaxed), so there the check reads what the hardware did."""
    rounds = 101
    layouts = barriers.cluster_layouts(num_ctas)
    seen = torch.full((rounds + rounds * num_ctas,), -1, device="cuda", dtype=torch.int32)   # poisoned
    seen[:rounds] = 0
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    barriers.barrier_cost_kernel[(1,)](out, rounds, MODE=mode, group_all=layouts["group_all"], seen_ptr=seen,
                                       slot=layouts["slot"], num_warps=1, num_ctas=num_ctas)
    torch.cuda.synchronize()
    assert seen[:rounds].tolist() == [num_ctas] * rounds, "every CTA entered every round once"
    early = (seen[rounds:].view(rounds, num_ctas) != num_ctas).nonzero().tolist()
    assert not early, f"(round, CTA) that left a round before every CTA had entered it: {early[:8]}"


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_cluster_barrier_inside_warp_specialize_completes(num_ctas):
    """Every CTA's default partition reports that its worker passed the cluster barrier, within 60 s."""
    from multicta_kernels.show.notebook import run_live
    out = run_live("cluster_barrier_in_partition", lambda: barriers.cluster_barrier_in_partition(num_ctas), 60)
    assert out.tolist() == [1] * num_ctas
