"""The mbarrier model, checked against what Triton compiles, and its error messages."""
import random

import pytest
from random_layouts import random_cga_bases

from multicta_kernels import barriers, catalog, lens
from multicta_kernels.barriers import BarrierLayoutModel, BarrierSim


def test_seed_example_pairs_of_eight():
    m = BarrierLayoutModel.of([[0], [1], [2]], 8)
    assert m.num_barriers == 4 and m.group_size == 2
    assert m.groups() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [m.leader(c) for c in range(8)] == [0, 0, 2, 2, 4, 4, 6, 6]
    assert m.init_count(3) == 6 and m.expect_bytes(1024) == 2048


def test_identity_is_one_barrier_per_cta():
    m = BarrierLayoutModel.of([[1], [2], [4], [8]], 16)
    assert m.num_barriers == 16 and all(m.leader(c) == c for c in range(16))


def test_interleaved_zeros():
    m = BarrierLayoutModel.of([[1], [0], [2]], 8)          # bit 1 is broadcast: CTAs c and c^2 share
    assert m.groups() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert m.leader(7) == 5


CASES = [([[0], [1], [2]], 8), ([[1], [2], [4]], 8), ([[0], [0]], 4), ([[0]], 2), ([[1], [0], [2], [0]], 16)]
CASES += [(random_cga_bases(random.Random(s), n, 1, zero=0.5), 1 << n) for s, n in zip(range(8), [1, 2, 3, 4, 2, 3, 4, 4])]


@pytest.mark.parametrize("bases, num_ctas", CASES, ids=str)
def test_model_matches_compiled_code(bases, num_ctas):
    m = BarrierLayoutModel.of(bases, num_ctas)
    facts = barriers.compiled_facts(bases, num_ctas, count=3)
    assert facts["init_count"] == m.init_count(3)                     # rule 1: count x group size
    shared = m.group_size > 1
    assert facts["remote_arrive"] == shared                           # rule 3: arrivals go to the leader
    assert facts["init_fence"] == shared == facts["relaxed_cluster_barrier"]


@pytest.mark.parametrize("bases, ctas, msg", [
    ([[1]], 4, "exactly 2 bases"),
    ([[2], [1]], 4, "expected \\[1\\]"),
    ([[1, 0]], 2, "one entry"),
    ([[1]], 3, "power of two"),
])
def test_invalid_layouts_are_explained(bases, ctas, msg):
    with pytest.raises(ValueError, match=msg):
        BarrierLayoutModel.of(bases, ctas)


def test_two_ctas_needs_a_zero_first_basis():
    with pytest.raises(ValueError, match="basis 0 must be"):
        barriers.check_barrier_layout([[1], [0]], 4, two_ctas=True)
    assert barriers.check_barrier_layout([[0], [1]], 4, two_ctas=True) == [[0], [1]]


def test_broadcast_arrive_targets():
    assert barriers.broadcast_targets(0, 4) == {0: [0, 1, 2, 3]}
    assert barriers.broadcast_targets(0b110, 8) == {0: [0, 1], 2: [2, 3], 4: [4, 5], 6: [6, 7]}
    assert barriers.broadcast_targets(3, 4) == {c: [c] for c in range(4)}       # the default: to itself
    with pytest.raises(ValueError, match="mask"):
        barriers.broadcast_targets(8, 8)


def test_sim_phases_and_parity():
    sim = BarrierSim(BarrierLayoutModel.of([[0]], 2))
    sim.init(1)                                   # leader CTA 0, count 2
    assert not sim.wait(0, 0)                     # nobody arrived: the wait for phase 0 blocks
    sim.arrive(1)
    assert not sim.wait(0, 0)
    sim.arrive(0)
    assert sim.wait(0, 0)                         # phase 0 complete
    assert not sim.wait(0, 1)
    sim.arrive(0); sim.arrive(1)
    assert sim.wait(0, 1) and not sim.wait(0, 0)  # the one-phase bug: waiting on parity 0 again blocks
    assert any("remote" in row[3] for row in barriers.trace_table(sim))


def test_sim_expect_and_bytes():
    sim = BarrierSim(BarrierLayoutModel.of([[0], [1]], 4))     # pairs {0, 1} and {2, 3}
    sim.init(1)
    sim.expect(0, 100)                            # each CTA: one arrival on CTA 0, its own 100 bytes
    sim.expect(1, 100)
    assert not sim.wait(0, 0)
    sim.bytes_arrive(0, 100); sim.bytes_arrive(1, 100)
    assert sim.wait(0, 0)
    for cta in (0, 1):                            # the next phase needs a fresh set of arrivals
        assert not sim.wait(0, 1)
        sim.arrive(cta)
    assert sim.wait(0, 1)
    with pytest.raises(RuntimeError, match="more bytes"):
        sim.bytes_arrive(2, 1)


@pytest.mark.parametrize("bases, num_ctas", [([[0]], 2), ([[0], [0]], 4), ([[0], [1]], 4), ([[1]], 2)])
def test_expect_lowering_matches_the_model(bases, num_ctas):
    """Rule 2, checked against the PTX: every CTA of a group expects its own bytes on the leader's barrier."""
    m = BarrierLayoutModel.of(bases, num_ctas)
    facts = barriers.expect_facts(bases, num_ctas, 1024)
    assert facts["init_count"] == m.init_count(1)
    assert facts["bytes_per_arrival"] == 1024 and facts["remote"] == (m.group_size > 1)
    sim = BarrierSim(m)
    sim.init(1)
    for cta in range(num_ctas):
        sim.expect(cta, 1024)
    for cta in range(num_ctas):
        sim.bytes_arrive(cta, 1024)
    assert all(b.phase == 1 for b in sim.barriers.values())      # every group's phase completed once


def test_warp_specialize_rules():
    with pytest.raises(lens.LensCompileError, match="cannot be used inside `ttg.warp_specialize`"):
        lens.compile(barriers.warp_specialize_spec("init_inside"), "sm_90a")
    for target in ("sm_90a", "sm_100a"):
        k = lens.compile(barriers.warp_specialize_spec("cluster_barrier_inside"), target)
        counts = k.census(["mbarrier.arrive.release.cluster.shared::cluster", "mbarrier.try_wait.parity.acquire.cluster"])
        assert all(counts.values()), counts        # 3.9 lowers it to a cross-CTA mbarrier hand-shake


@pytest.mark.parametrize("name, params", [("cluster_exchange", {"num_ctas": 4}), ("ping_pong", {"num_ctas": 4}),
                                          ("pair_sum", {})])
def test_data_hand_offs_release_and_acquire_at_cluster_scope(name, params):
    """A user's arrive and wait order memory at CTA scope only; a DSMEM hand-off needs a release and an acquire
    at cluster scope (PTX ISA memory model: morally strong operations). In the PTX, every arrive that follows
    shared-memory traffic is ``mbarrier.arrive.release.cluster`` after a CTA barrier (one thread arrives for
    all), and every read of a peer's shared memory comes after a ``try_wait...acquire.cluster``."""
    from multicta_kernels import lens
    ptx = catalog.compile(name, "sm_90a", **params).ptx
    dirty, synced, acquired, arrives = False, False, False, 0
    for _, op, line in lens.instructions(ptx):
        if op.startswith(("st.shared", "stmatrix", "ld.shared")) and "mbarrier" not in line:
            assert not op.startswith("ld.shared::cluster") or acquired, f"{name}: a peer's data read without an acquire"
            dirty, synced = True, False
        elif op in ("bar.sync", "barrier.sync"):
            synced = True
        elif op.startswith("mbarrier.arrive"):
            assert ".release.cluster" in op, f"{name}: {op} is not a release at cluster scope"
            assert not dirty or synced, f"{name}: an arrive releases other threads' writes without a CTA barrier"
            dirty, arrives = False, arrives + 1
        elif "mbarrier.try_wait" in line:
            assert ".acquire.cluster" in line, f"{name}: a wait that is not an acquire at cluster scope"
            acquired = True
    assert arrives >= 2
