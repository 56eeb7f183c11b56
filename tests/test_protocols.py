"""The protocol checker: the book's protocols pass, every seeded bug is found with a short trace of
the expected kind, and the semantics under both are PTX's (parity waits, counts, bytes, stores)."""
import pytest

from multicta_kernels import protocols as P
from multicta_kernels.gluon import operands

CLEAN = [name for name, case in P.CASES.items() if case.expect is None]
BUGS = [name for name, case in P.CASES.items() if case.expect]


@pytest.mark.parametrize("name", CLEAN)
def test_book_protocol_is_safe(name):
    case = P.CASES[name]
    r = case.run()
    assert r.ok, f"{name}: {r}\n{r.table()}"
    if case.exhaustive:
        assert r.exhaustive and 0 < r.states < 200_000         # every interleaving, within CI's budget
        assert str(r).startswith("no deadlock, no phase overrun, no overwrite before release, no arrival after exit, "
                                 "in every interleaving")
    else:
        assert r.runs == 300 and "random schedules" in str(r)


@pytest.mark.parametrize("name", BUGS)
def test_seeded_bug_is_found_with_a_trace(name):
    case = P.CASES[name]
    r = case.run()
    assert not r.ok and r.kind == case.expect, f"{name}: {r}"
    assert 0 < r.steps <= 90, r.table()
    assert [row[0] for row in r.trace] == list(range(1, r.steps + 1))
    assert r.trace[-1][4].endswith("!! " + r.message)
    assert str(r).startswith(case.expect)
    assert r.exhaustive == case.exhaustive and (r.runs == 0) == case.exhaustive   # how the trace was found


def test_one_phase_bug_is_a_wait_on_a_stale_parity():
    r = P.check(P.models.ping_pong(2, one_phase=True))
    step, cta, part, op, detail = r.trace[-1]
    assert (cta, part, op) == (0, "main", "wait arrived, phase 1 (parity 0)")
    assert "after 1 completed phase(s): parity 0 was an older phase's" in detail
    assert P.check(P.models.ping_pong(2, rounds=1, one_phase=True)).ok          # one round never flips anyway


def test_ping_pong_without_turns_fails_at_the_first_wait():
    r = P.check(P.models.hopper_matmul(2, consumers=2, turns=False))
    assert r.steps == 1 and r.trace[0][2] == "consumer 1"                # its first wait is already a lap ahead
    assert r.trace[0][3] == "wait ready[0], phase 1 (parity 1)"
    assert P.check(P.models.hopper_matmul(2, consumers=2, turns=False, k_steps=1)).ok   # never a lap ahead


def test_release_none_is_safe_only_without_peers_writing_into_my_buffers():
    bad = P.check(P.models.tile_stream(2, "none"))
    assert bad.kind == "overwrite before release" and "bufs[0] of CTA 1" in bad.message
    assert bad.trace[-1][1:3] == [0, "main"]                             # CTA 0's multicast reload
    assert P.check(P.models.tile_stream(2, "none", multicast=False)).ok
    assert P.check(P.models.tile_stream(1, "none", multicast=False)).ok


def test_per_pair_release_is_safe_when_the_pair_is_the_cluster():
    assert P.simulate(P.models.clc_matmul(release="pair", slots_only=True)).ok  # 2 CTAs: the pair is everyone
    r = P.CASES["bug: per-pair CLC slot release, 4 CTAs (upstream tutorial)"].run()
    assert "of CTA 2" in r.message or "of CTA 3" in r.message             # the other pair's slot
    assert r.failures > 30                                               # the issue's model: ~1 in 3


def test_group_release_before_the_change_was_safe_too():
    assert P.simulate(P.models.clc_matmul(release="group", slots_only=True)).ok
    assert P.check(P.models.clc_matmul(release="group", tiles=2)).ok


def test_epilogue_staging_per_tile_fails_with_an_odd_number_of_subtiles():
    assert P.check(P.models.clc_matmul(staging="per_tile", subtiles=2, tiles=2)).ok
    r = P.check(P.models.clc_matmul(staging="per_tile", subtiles=3, tiles=2))
    assert r.kind == "overwrite before release" and "tma_store released" in r.message
    assert P.check(P.models.clc_matmul(staging="across", subtiles=1, tiles=2)).ok


@pytest.mark.parametrize("build", [
    lambda: P.models.ping_pong(2), lambda: P.models.ping_pong(2, one_phase=True), lambda: P.models.tile_stream(2, "none"),
    lambda: P.models.tile_stream(2, "mbarrier"), lambda: P.models.mma_tile(), lambda: P.models.exchange(2),
    lambda: P.models.hopper_matmul(1, consumers=2, turns=False, tiles=2), lambda: P.models.hopper_matmul(1, consumers=1, tiles=2),
    lambda: P.models.hopper_matmul(1, consumers=1, release_early=True, tiles=2),
    lambda: P.models.mma_tile().move("main.write c_smem", before="main.wait done"),
    lambda: P.models.mma_tile().move("main.invalidate done", before="main.wait done"),
    lambda: _dangling(tail=False), lambda: _dangling(tail=True), lambda: _dangling(tail=False, exit="cta"),
    lambda: _late_receiver(own_wait=False), lambda: _late_receiver(own_wait=True),
    lambda: _multicast_reader(own_wait=False), lambda: _multicast_reader(own_wait=True)])
def test_partial_order_reduction_keeps_the_verdict(build):
    full, reduced = P.check(build(), reduce=False), P.check(build())
    assert (full.ok, full.kind) == (reduced.ok, reduced.kind)
    assert full.steps <= reduced.steps and reduced.states <= full.states


# -------------------------------------------------------------------------- the semantics, small


def _one(num_ctas=1, count=1, **kw):
    p = P.Protocol("test", num_ctas)
    return p, p.barrier("bar", count=count, **kw)


def test_a_wait_returns_iff_the_completed_phases_have_the_other_parity():
    p, bar = _one()
    ack = p.barrier("ack")
    a, b = p.thread(0, "a"), p.thread(0, "b")
    for k in range(3):                                  # a hand-shake: parities 0, 1, 0 tell each phase
        a.arrive(bar, k)
        a.wait(ack, k)
        b.wait(bar, k)
        b.arrive(ack, k)
    assert P.check(p).ok
    p, bar = _one()
    p.thread(0, "b").wait(bar, 1)                       # parity 1 on a fresh barrier: returns at once
    r = P.check(p)
    assert r.kind == "phase overrun" and r.steps == 1 and "older phase" in r.message


def test_a_barrier_running_past_its_waiter_is_an_overrun():
    p, bar = _one()
    a, b = p.thread(0, "a"), p.thread(0, "b")
    for k in range(2):
        a.arrive(bar, k)
    b.wait(bar, 0)
    r = P.check(p)
    assert r.kind == "phase overrun" and "cannot tell them apart" in r.message and r.steps == 2


def test_missing_arrivals_deadlock_and_the_trace_says_who_is_stuck():
    p, bar = _one(count=2)
    p.thread(0, "a").arrive(bar, 0)
    p.thread(0, "b").wait(bar, 0)
    r = P.check(p)
    assert r.kind == "deadlock" and r.trace[-1][0] == "stuck"
    assert "1 arrival(s) missing" in r.trace[-1][3]


def test_an_arrival_meant_for_the_next_phase_is_caught():
    p, bar = _one()
    p.thread(0, "a").arrive(bar, 1)
    r = P.check(p)
    assert r.kind == "phase overrun" and "meant for phase 1" in r.message


def test_bytes_may_land_before_their_expect():
    p, bar = _one()
    t = p.thread(0, "t")
    t.tma_load(bar, [("x", 0, 1, [], 64)], 0)
    t.expect(bar, 64, 0)
    t.wait(bar, 0)
    t.read("x", 0, 1)
    m = P.Model(p)
    st, _ = m.fire(m.start, 0)                           # the load is issued ...
    st, _ = m.fire(st, m.T + 0)                          # ... and lands before the expect
    assert st[m.BAR:m.BAR + 3] == (1, -64, 0)            # one arrival missing, 64 bytes early, phase 0 open
    st, _ = m.fire(st, 0)                                # the expect: both reach zero
    assert st[m.BAR:m.BAR + 3] == (1, 0, 1)
    assert P.check(p).ok


def test_a_shared_barrier_counts_the_group_and_only_the_leader_waits():
    p, bar = _one(num_ctas=4, bases=P.all_ctas(4))
    for c in range(4):
        t = p.thread(c, "main")
        t.arrive(bar, 0)
        t.wait(bar, 0)
    m = P.Model(p)
    assert m.init_count == [4] and [s.wait for s in m.code[1]] == [-1, -1]   # no wait outside CTA 0
    assert P.check(p).ok


def test_a_broadcast_arrival_reaches_every_cta_that_shares_the_kept_bits():
    p, go = _one(num_ctas=8)
    for c in range(8):
        t = p.thread(c, "main")
        t.arrive(go, 0, from_cta=0b110)                  # chapter 2's pair release
        t.wait(go, 0)
    assert [t.ops[0].targets for t in p.threads[:4]] == [(0, 1), (), (2, 3), ()]
    assert P.check(p).ok


def test_store_wait_bounds_the_stores_in_flight():
    for n, ok in ((1, False), (0, True)):
        p = P.Protocol("staging", 1)
        t = p.thread(0, "epilogue")
        for v in (1, 2):
            t.store_wait(n)
            t.write("c", 0, v)
            t.tma_store("c", 0, v)
        t.store_wait(0)                                  # the kernels' last wait: see the exit tests
        r = P.check(p)
        assert r.ok == ok and (ok or "tma_store released version 1" in r.message)


def test_a_read_of_a_version_not_landed_is_a_read_before_write():
    p, bar = _one()
    t = p.thread(0, "t")
    t.expect(bar, 64, 0)
    t.tma_load(bar, [("x", 0, 1, [], 64)], 0)
    t.read("x", 0, 1)                                    # forgot to wait
    r = P.check(p)
    assert r.kind == "read before write" and r.steps == 3


@pytest.mark.parametrize("acc, two_ctas", [
    (((1, 0),), True), (((1, 0), (2, 0)), True), (((1, 0), (2, 0), (4, 0)), True), (((1, 0), (0, 1)), True),
    (((1, 0), (0, 1), (2, 0)), True), (((1, 0),), False), (((1, 0), (2, 0)), False), (((1, 0), (0, 1)), False)])
@pytest.mark.parametrize("multicast", [True, False])
def test_commits_reach_each_cta_as_often_as_triton_counts(acc, two_ctas, multicast):
    bases = operands.operand_cga_layouts(acc, two_ctas)
    C = 1 << len(acc)
    leaders = range(0, C, 2) if two_ctas else range(C)
    got = [sum(x in P.commit_targets(L, bases, C, multicast, two_ctas) for L in leaders) for x in range(C)]
    assert got == [P.commit_count(bases, multicast, two_ctas)] * C


# ------------------------------------------------ the exit, skew between receivers, aliasing


def _dangling(tail, exit="cluster"):
    """Chapter 5's load ring, small: a pair's producers fill a one-stage ring twice (each its own half,
    on the leader's barrier); CTA 0's MMA reads both halves and its commit frees the stage in both
    CTAs. Nobody waits for the last commit unless ``tail``."""
    p = P.Protocol(f"dangling commit, tail {tail}", 2, exit=exit)
    ready, empty, done = p.barrier("ready", two_ctas=True), p.barrier("empty"), p.barrier("done")
    producers, mma = [p.thread(c, "producer") for c in (0, 1)], p.thread(0, "mma")
    for k in range(2):
        for c, t in enumerate(producers):
            t.wait(empty, k - 1, parity=(k & 1) ^ 1)
            t.expect(ready, 64, k)
            t.tma_load(ready, [("x", 0, k + 1, [], 64)], k, multicast=False)
        mma.wait(ready, k)
        mma.mma([(c, "x", 0, k + 1) for c in (0, 1)], [(empty, (0, 1), k)] + ([(done, (0, 1), 0)] if k == 1 else []))
    for t in producers:
        if tail:
            t.wait(empty, 1)                             # the tail: the phase still owed
        t.wait(done, 0)
    return p


def test_a_commit_that_lands_after_the_exit_is_an_error_and_tails_wait_it_out():
    bad = P.check(_dangling(tail=False))
    assert bad.kind == "arrival after exit" and "commit lands on CTA" in bad.message and "empty" in bad.message
    assert bad.trace[-1][2] == "tensor core" and "after every thread of the cluster has finished" in bad.message
    landed = [row[3] for row in bad.trace if row[2] == "tensor core"]
    assert "commit to done lands" in landed and landed[-1] == "commit to empty lands"   # commits land apart
    assert P.check(_dangling(tail=True)).ok
    cta = P.check(_dangling(tail=False, exit="cta"))     # without the cluster barrier: CTA 1 leaves on its own
    assert cta.kind == "arrival after exit" and "every thread of CTA" in cta.message
    with pytest.raises(ValueError, match="exit must be one of"):
        P.Protocol("x", 2, exit="never")


def test_a_thread_arrival_on_a_cta_that_left_is_an_error_without_the_exit_barrier():
    def remote(exit):
        p = P.Protocol("remote arrive", 2, exit=exit)
        bar = p.barrier("bar", bases=P.all_ctas(2))      # lives in CTA 0; CTA 0 does not wait for CTA 1
        p.thread(0, "main").arrive(bar, 0)
        p.thread(1, "main").arrive(bar, 0)
        return p
    assert P.check(remote("cluster")).ok                 # the exit cluster barrier keeps CTA 0 until CTA 1 is done
    r = P.check(remote("cta"))
    assert r.kind == "arrival after exit" and r.trace[-1][1:3] == [1, "main"] and "CTA 1 main's arrival" in r.message


def test_a_store_still_reading_at_exit_is_an_error():
    p = P.Protocol("store at exit", 1)
    t = p.thread(0, "epilogue")
    t.write("c", 0, 1)
    t.tma_store("c", 0, 1)
    r = P.check(p)
    assert r.kind == "arrival after exit" and "TMA store" in r.message


def _late_receiver(own_wait):
    """CTA 0 asks CLC; the answer lands in both CTAs, each on its own barrier. CTA 1 reads its copy
    after CTA 0 tells it to (``go``), with or without waiting on its own barrier first."""
    p = P.Protocol("late receiver", 2)
    ready, go = p.barrier("ready"), p.barrier("go")
    t0, t1 = p.thread(0, "main"), p.thread(1, "main")
    t0.expect(ready, 16, 0)
    t0.try_cancel("answer", 0, 1, ready, 0)
    t0.wait(ready, 0)
    t0.read("answer", 0, 1)
    t0.arrive(go, 0, from_cta=0)                         # CTA 0 tells every CTA its answer is in
    t0.wait(go, 0)
    t1.expect(ready, 16, 0)
    t1.try_cancel("answer", 0, 1, ready, 0, issue=False)
    t1.wait(go, 0)
    if own_wait:
        t1.wait(ready, 0)
    t1.read("answer", 0, 1)
    return p


def _multicast_reader(own_wait):
    """CTA 0 multicasts a tile into both CTAs, waits for its own copy and tells CTA 1; CTA 1 reads."""
    p = P.Protocol("multicast reader", 2)
    ready, go = p.barrier("ready"), p.barrier("go")
    for c in (0, 1):
        t = p.thread(c, "main")
        t.expect(ready, 64, 0)
        t.tma_load(ready, [("tile", 0, 1, [[0, 0]], 64)], 0)
        if c == 0:
            t.wait(ready, 0)
            t.arrive(go, 0, from_cta=0)
        t.wait(go, 0)
        if c == 1 and own_wait:
            t.wait(ready, 0)
        t.read("tile", 0, 1)
    return p


@pytest.mark.parametrize("build", [_late_receiver, _multicast_reader])
def test_a_multicast_lands_in_each_receiver_on_its_own(build):
    """A receiver that takes another CTA's wait for its own reads too early: the copy in CTA 1 may
    land later than CTA 0's (a CLC answer, a multicast TMA load). Waiting on its own barrier is safe.
    (Were a multicast to land in all its receivers at once, the first would pass too.)"""
    bad = P.check(build(own_wait=False))
    assert bad.kind == "read before write" and "of CTA 1" in bad.message and bad.trace[-1][1] == 1
    landed = [row[4] for row in bad.trace if row[2] in ("CLC", "TMA")]
    assert len(landed) == 1 and "in CTA 0" in landed[0]                   # only CTA 0's copy has landed
    assert P.check(build(own_wait=True)).ok


def test_commits_on_one_barrier_are_interchangeable_but_a_lone_commit_is_not():
    """Two pairs' commits on one barrier (count 2) may complete a phase in either order; with count 1
    a commit meant for the next phase is still a phase overrun."""
    assert P.check(P.models.multicast_mma()).ok                 # 4 CTAs: each CTA's `consumed` counts two pairs' commits
    p, bar = _one()
    t = p.thread(0, "t")
    t.mma([], [(bar, (0,), 1)])                          # a commit meant for phase 1 of a fresh barrier
    t.wait(bar, 0)
    assert P.check(p).kind == "phase overrun"


def test_a_buffer_over_others_writes_them_and_an_invalidated_barrier_takes_nothing():
    early = P.check(P.models.mma_tile().move("main.write c_smem", before="main.wait done"))
    assert early.kind == "overwrite before release" and "before CTA 0 main's mma released version 1" in early.message
    assert P.check(P.models.mma_tile()).ok and P.check(P.models.mma_tile(False)).ok
    op = next(op for op in P.models.mma_tile().threads[1].ops if op.kind == "write")
    assert {(buf, v) for _, buf, _, v in op.writes} == {("c_smem", 1), ("a", 2), ("b", 2)}
    gone = P.check(P.models.mma_tile().move("main.invalidate done", before="main.wait done"))
    assert gone.kind == "arrival after invalidate" and "done after it was invalidated" in gone.message
    p, bar = _one()
    t = p.thread(0, "t")
    t.invalidate(bar)
    t.wait(bar, -1)
    assert P.check(p).kind == "arrival after invalidate"


def test_move_and_drop_make_one_change_and_refuse_what_is_not_there():
    moved = P.models.mma_tile().move("main.write c_smem", before="main.wait done")
    kinds = [op.kind for op in moved.threads[0].ops]
    assert moved.kernel is None and "write c_smem before wait done" in moved.name
    assert kinds.index("write") < kinds.index("wait", kinds.index("mma"))
    dropped = P.models.clc_matmul(tiles=1).drop("loader.wait load_empty (tail)")
    assert not any(op.site.startswith("loader.wait load_empty (tail)") for t in dropped.threads for op in t.ops)
    assert P.check(dropped).kind == "arrival after exit"
    with pytest.raises(ValueError, match="no thread of .* has 'main.nope'"):
        P.models.mma_tile().move("main.nope", before="main.wait done")
    with pytest.raises(ValueError, match="no op of .* starting with 'nope'"):
        P.models.mma_tile().drop("nope")


# ------------------------------------------------------------------------------- the interface


def test_result_reads_well():
    r = P.check(P.models.ping_pong(2, one_phase=True))
    assert r.table().splitlines()[0].split() == ["step", "CTA", "partition", "op", "detail"]
    assert len(r.table().splitlines()) == r.steps + 2
    assert "phase overrun" in r._repr_html_() and "<table>" in r._repr_html_()
    ok = P.check(P.models.ping_pong(2), depth=5)
    assert ok.ok and "up to depth 5" in str(ok)
    cut = P.check(P.models.ping_pong(4), max_states=20)
    assert cut.ok and not cut.exhaustive and "not every interleaving" in str(cut)


def test_simulate_reports_how_often_and_a_shortened_trace():
    r = P.simulate(P.models.tile_stream(2, "none"), runs=50)
    assert r.kind == "overwrite before release" and 0 < r.failures <= 50
    assert r.steps <= P.check(P.models.tile_stream(2, "none"), reduce=False).steps + 2
    assert P.simulate(P.models.ping_pong(2), runs=20).ok


def test_check_book_rows():
    names = ["ch2 exchange, 4 CTAs", "bug: one-phase barrier (ch2 ONE_PHASE)", "ch5 CLC matmul, 2 CTAs, 3 tiles"]
    rows = {r[0]: r for r in P.check_book(runs=20, names=names)}
    assert sorted(rows) == sorted(names) and all(r[1] == r[2] for r in rows.values())
    assert rows[names[1]][3] == 20 and rows[names[2]][4] == "20 runs"


def test_recount_and_rebroadcast_change_one_thing_and_refuse_unknown_names():
    base = P.models.multicast_mma()
    counts = {b.name: b.count for b in base.barriers}
    model = P.models.multicast_mma().recount("consumed", 1)
    assert {b.name: b.count for b in model.barriers} == {**counts, "consumed": 1}
    assert P.check(model).kind == "overwrite before release"
    assert P.check(P.models.hopper_matmul(2, consumers=1).rebroadcast("go", 0)).ok        # the kernel's own mask
    broken = P.models.hopper_matmul(2, consumers=1).rebroadcast("go", 0b1)
    assert {op.targets for t in broken.threads for op in t.ops if op.kind == "arrive" and op.bar[0].name == "go"} \
        == {(0,), (1,)}                                                            # each CTA releases itself
    assert P.check(broken).kind == "phase overrun"
    with pytest.raises(ValueError, match="no barrier 'nope'"):
        P.models.hopper_matmul(2).recount("nope", 1)
    with pytest.raises(ValueError, match="no arrive on 'ready' broadcasts"):
        P.models.hopper_matmul(2).rebroadcast("ready", 0)


def test_models_refuse_what_their_kernels_cannot_be():
    with pytest.raises(ValueError, match="num_ctas must be a power of two"):
        P.models.tile_stream(3)
    with pytest.raises(ValueError, match="release must be one of"):
        P.models.tile_stream(2, "foo")
    with pytest.raises(ValueError, match="release must be one of"):
        P.models.clc_matmul(release="x")
    with pytest.raises(ValueError, match="staging 'across' or 'per_tile'"):
        P.models.clc_matmul(staging="x")
    with pytest.raises(ValueError, match="1, 2 or 4 CTAs"):
        P.models.hopper_matmul(8)
    with pytest.raises(ValueError, match="knows the pipelined kernel 'clc_matmul' only"):
        P.kernel_depths("softmax")
    assert P.all_ctas(8) == [[0], [0], [0]] and P.all_ctas(1) == []


@pytest.mark.parametrize("bar", ["load_empty", "acc_empty"])
def test_only_rings_that_wrap_catch_a_parity_that_never_flips(bar):
    """A kernel whose "empty" waits pass a constant parity (the phase never tracked) is right on a ring's
    first lap and wrong from the second: the 2-tile model with 2-deep rings never wraps and misses it;
    with rings one deep every tile wraps them, and the checker finds it."""
    def stuck(p):
        for t in p.threads:
            for op in t.ops:
                if op.kind == "wait" and op.bar[0].name == bar and "tail" not in op.site:
                    op.parity = 1
        return p
    assert P.check(stuck(P.models.clc_matmul(tiles=2))).ok
    r = P.check(stuck(P.models.clc_matmul(tiles=2, stages=1, acc_stages=1)))
    assert r.kind == "phase overrun" and bar in r.message and "older phase" in r.message
