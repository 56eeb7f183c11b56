"""What runs every iteration: no kernel of the book executes an init fence (or the relaxed cluster barrier the
compiler pairs with it) inside a loop. Triton 3.9 places both at the first use of a barrier that crosses CTAs;
a first use inside a loop runs them every iteration, which a static census cannot show. The kernels call
``sync.sync_inits()`` after their inits; these tests read the compiled PTX, loop by loop."""
import collections

import pytest

from multicta_kernels import barriers, catalog, lens, multicast
from nbcells import variant

# No kernel re-initialises a barrier on purpose; one that did would be listed here, with its reason.
REINITIALISES = {}

CASES = [(name, params, target) for name, sets in catalog.registered().items() for params in sets
         for target in catalog.spec(name, **params).targets if name not in REINITIALISES]


USES = ("mbarrier.arrive", "mbarrier.try_wait", "mbarrier.test_wait", "cp.async.bulk", "tcgen05.commit",
        "clusterlaunchcontrol.try_cancel")


def _paired(rows):
    """The init fences, and the relaxed cluster barrier that completes each (the next relaxed barrier after it):
    a relaxed barrier of a kernel's own (one it times, or a release of the tile stream) is not the compiler's."""
    out, want_barrier = [], False
    for r in rows:
        if r["op"] == "fence.mbarrier_init":
            out.append(r)
            want_barrier = True
        elif want_barrier:
            out.append(r)
            want_barrier = False
    return out


@pytest.mark.parametrize("name, params, target", CASES, ids=[f"{n}-{t}-{p}" for n, p, t in CASES])
def test_no_init_fence_runs_per_iteration(name, params, target):
    ptx = catalog.compile(name, target, **params).ptx
    rows = _paired(lens.schedule(ptx, ("fence.mbarrier_init", "barrier.cluster.arrive.relaxed")))
    looped = [(r["op"], r["source"], r["loop"].source) for r in rows if r["loop"] is not None]
    assert not looped, f"{name} {params} {target}: runs every iteration {looped}"
    # an unrolled loop leaves no loop in the PTX, only copies: one init fence per source line
    fences = collections.Counter(r["source"] for r in rows if r["op"] == "fence.mbarrier_init")
    assert all(n == 1 for n in fences.values()), f"{name} {params} {target}: init fence copies {dict(fences)}"
    # ... and the fence comes before the first use of a barrier (the compiler cannot see uses in inline asm)
    if fences:
        first_fence = min(r["line"] for r in rows if r["op"] == "fence.mbarrier_init")
        first_use = min((no for no, _, text in lens.instructions(ptx) if any(u in text for u in USES)), default=None)
        assert first_use is None or first_fence < first_use, f"{name} {params} {target}: a barrier is used before its init fence"


def test_without_sync_inits_the_fence_runs_every_round(tmp_path):
    """The lens sees the defect: the cross-CTA round of barrier_cost (a user's arrive and wait) without its
    sync_inits() executes the init fence and a relaxed cluster barrier in every round: the compiler puts them at
    the barriers' first use, inside the loop."""
    mod = variant(tmp_path, "cost_no_sync", barriers.barrier_cost_kernel, drop="sync_inits()")
    ptx = lens.compile(lens.with_kernel(barriers.barrier_cost_spec(4, 1), mod.barrier_cost_kernel), "sm_90a").ptx
    assert lens.per_iteration(ptx, ("fence.mbarrier_init",))["fence.mbarrier_init"] == (0, 1)
    good = lens.compile(barriers.barrier_cost_spec(4, 1), "sm_90a").ptx
    assert lens.per_iteration(good, ("fence.mbarrier_init",))["fence.mbarrier_init"] == (1, 0)


def test_without_sync_inits_inline_asm_races_the_init(tmp_path):
    """The cluster-scoped arrive and wait are inline assembly, which the compiler does not see as uses of the
    barrier: without sync_inits() it places the init fence after the loop, at the first use it sees (the
    invalidates), so a peer may arrive on a barrier that is not yet initialised. The catalog test above
    catches it (a use before the fence)."""
    mod = variant(tmp_path, "pp_no_sync", barriers.ping_pong_kernel, drop="sync_inits()")
    ptx = lens.compile(lens.with_kernel(barriers.ping_pong_spec(4), mod.ping_pong_kernel), "sm_90a").ptx
    fence = next(r["line"] for r in lens.schedule(ptx, ("fence.mbarrier_init",)))
    first_arrive = next(no for no, _, text in lens.instructions(ptx) if "mbarrier.arrive" in text)
    assert first_arrive < fence


def test_an_unrolled_loop_copies_the_fence(tmp_path):
    """blackwell_multicast_mma's K loop (constexpr bound) is unrolled: without sync_inits() the fence is
    copied into every step."""
    mod = variant(tmp_path, "bw_no_sync", multicast.blackwell_multicast_mma_kernel, drop="sync_inits()")
    ptx = lens.compile(lens.with_kernel(multicast.blackwell_multicast_mma_spec(), mod.blackwell_multicast_mma_kernel),
                       "sm_100a").ptx
    sites = collections.Counter(r["source"] for r in lens.schedule(ptx, ("fence.mbarrier_init",)))
    assert max(sites.values()) > 1


def test_worker_dispatch_loop_is_not_an_iteration():
    """In a warp-specialised kernel the worker warps wait in a dispatch loop (a jump table) for the default
    warps' requests; what one request runs there runs once, and the lens does not call it per iteration."""
    ptx = catalog.compile("hopper_matmul", "sm_90a", num_ctas=2).ptx
    assert any(lp.dispatch for lp in lens.loops(ptx))
    rows = lens.schedule(ptx, ("barrier.cluster.arrive.relaxed",))
    assert len(rows) >= 2 and all(r["loop"] is None for r in rows)
