"""The protocol checker: the book's protocols pass, every seeded bug is found with a short trace of
the expected kind, and the semantics under both are PTX's (parity waits, counts, bytes, stores)."""
import pytest

from multicta_kernels import protocols as P

CLEAN = [name for name, case in P.CASES.items() if case.expect is None]
BUGS = [name for name, case in P.CASES.items() if case.expect]


@pytest.mark.parametrize("name", CLEAN)
def test_book_protocol_is_safe(name):
    case = P.CASES[name]
    r = case.run()
    assert r.ok, f"{name}: {r}\n{r.table()}"
    if case.exhaustive:
        assert r.exhaustive and 0 < r.states < 200_000         # every interleaving, within CI's budget
        assert str(r).startswith("no deadlock, no phase overrun, no overwrite before release, in every interleaving")
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
    r = P.check(P.ping_pong(2, one_phase=True))
    step, cta, part, op, detail = r.trace[-1]
    assert (cta, part, op) == (0, "main", "wait arrived, phase 1 (parity 0)")
    assert "after 1 completed phase(s): parity 0 was an older phase's" in detail
    assert P.check(P.ping_pong(2, rounds=1, one_phase=True)).ok          # one round never flips anyway


def test_ping_pong_without_turns_fails_at_the_first_wait():
    r = P.check(P.hopper_matmul(2, consumers=2, turns=False))
    assert r.steps == 1 and r.trace[0][2] == "consumer 1"                # its first wait is already a lap ahead
    assert r.trace[0][3] == "wait ready[0], phase 1 (parity 1)"
    assert P.check(P.hopper_matmul(2, consumers=2, turns=False, k_steps=1)).ok   # never a lap ahead


def test_release_none_is_safe_only_without_peers_writing_into_my_buffers():
    bad = P.check(P.tile_stream(2, "none"))
    assert bad.kind == "overwrite before release" and "bufs[0] of CTA 1" in bad.message
    assert bad.trace[-1][1:3] == [0, "main"]                             # CTA 0's multicast reload
    assert P.check(P.tile_stream(2, "none", multicast=False)).ok
    assert P.check(P.tile_stream(1, "none", multicast=False)).ok


def test_per_pair_release_is_safe_when_the_pair_is_the_cluster():
    assert P.simulate(P.clc_matmul(release="pair", slots_only=True)).ok  # 2 CTAs: the pair is everyone
    r = P.CASES["bug: per-pair CLC slot release, 4 CTAs (upstream tutorial)"].run()
    assert "of CTA 2" in r.message or "of CTA 3" in r.message             # the other pair's slot
    assert r.failures > 30                                               # the model: ~1 in 3


def test_group_release_before_the_change_was_safe_too():
    assert P.simulate(P.clc_matmul(release="group", slots_only=True)).ok
    assert P.check(P.clc_matmul(release="group", tiles=2)).ok


def test_epilogue_staging_per_tile_fails_with_an_odd_number_of_subtiles():
    assert P.check(P.clc_matmul(staging="per_tile", subtiles=2, tiles=2)).ok
    r = P.check(P.clc_matmul(staging="per_tile", subtiles=3, tiles=2))
    assert r.kind == "overwrite before release" and "tma_store released" in r.message
    assert P.check(P.clc_matmul(staging="across", subtiles=1, tiles=2)).ok


@pytest.mark.parametrize("build", [
    lambda: P.ping_pong(2), lambda: P.ping_pong(2, one_phase=True), lambda: P.tile_stream(2, "none"),
    lambda: P.tile_stream(2, "mbarrier"), lambda: P.mma_tile(), lambda: P.exchange(2),
    lambda: P.hopper_matmul(1, consumers=2, turns=False, tiles=2), lambda: P.hopper_matmul(1, consumers=1, tiles=2),
    lambda: P.hopper_matmul(1, consumers=1, release_early=True, tiles=2)])
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
    bases = P.cluster.operand_cga_layouts(acc, two_ctas)
    C = 1 << len(acc)
    leaders = range(0, C, 2) if two_ctas else range(C)
    got = [sum(x in P.commit_targets(L, bases, C, multicast, two_ctas) for L in leaders) for x in range(C)]
    assert got == [P.commit_count(bases, multicast, two_ctas)] * C


# ------------------------------------------------------------------------------- the interface


def test_result_reads_well():
    r = P.check(P.ping_pong(2, one_phase=True))
    assert r.table().splitlines()[0].split() == ["step", "CTA", "partition", "op", "detail"]
    assert len(r.table().splitlines()) == r.steps + 2
    assert "phase overrun" in r._repr_html_() and "<table>" in r._repr_html_()
    ok = P.check(P.ping_pong(2), depth=5)
    assert ok.ok and "up to depth 5" in str(ok)
    cut = P.check(P.ping_pong(4), max_states=20)
    assert cut.ok and not cut.exhaustive and "not every interleaving" in str(cut)


def test_simulate_reports_how_often_and_a_shortened_trace():
    r = P.simulate(P.tile_stream(2, "none"), runs=50)
    assert r.kind == "overwrite before release" and 0 < r.failures <= 50
    assert r.steps <= P.check(P.tile_stream(2, "none"), reduce=False).steps + 2
    assert P.simulate(P.ping_pong(2), runs=20).ok


def test_check_book_rows():
    names = ["ch2 exchange, 4 CTAs", "bug: one-phase barrier (ch2 ONE_PHASE)", "ch5 CLC matmul, 2 CTAs, 3 tiles"]
    rows = {r[0]: r for r in P.check_book(runs=20, names=names)}
    assert sorted(rows) == sorted(names) and all(r[1] == r[2] for r in rows.values())
    assert rows[names[1]][3] == 20 and rows[names[2]][4] == "20 runs"


def test_recount_and_rebroadcast_change_one_thing_and_refuse_unknown_names():
    base = P.multicast_mma()
    counts = {b.name: b.count for b in base.barriers}
    model = P.multicast_mma().recount("consumed", 1)
    assert {b.name: b.count for b in model.barriers} == {**counts, "consumed": 1}
    assert P.check(model).kind == "overwrite before release"
    assert P.check(P.hopper_matmul(2, consumers=1).rebroadcast("go", 0)).ok        # the kernel's own mask
    broken = P.hopper_matmul(2, consumers=1).rebroadcast("go", 0b1)
    assert {op.targets for t in broken.threads for op in t.ops if op.kind == "arrive" and op.bar[0].name == "go"} \
        == {(0,), (1,)}                                                            # each CTA releases itself
    assert P.check(broken).kind == "phase overrun"
    with pytest.raises(ValueError, match="no barrier 'nope'"):
        P.hopper_matmul(2).recount("nope", 1)
    with pytest.raises(ValueError, match="no arrive on 'ready' broadcasts"):
        P.hopper_matmul(2).rebroadcast("ready", 0)


def test_models_refuse_what_their_kernels_cannot_be():
    with pytest.raises(ValueError, match="num_ctas must be a power of two"):
        P.tile_stream(3)
    with pytest.raises(ValueError, match="release must be one of"):
        P.tile_stream(2, "foo")
    with pytest.raises(ValueError, match="release must be one of"):
        P.clc_matmul(release="x")
    with pytest.raises(ValueError, match="staging 'across' or 'per_tile'"):
        P.clc_matmul(staging="x")
    with pytest.raises(ValueError, match="1, 2 or 4 CTAs"):
        P.hopper_matmul(8)
    with pytest.raises(ValueError, match="knows the pipelined kernel 'clc_matmul' only"):
        P.kernel_depths("softmax")
    assert P.all_ctas(8) == [[0], [0], [0]] and P.all_ctas(1) == []
