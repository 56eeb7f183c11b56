"""Chapters 2 to 6 check their kernels' barrier protocols with the protocol checker: the cells are there, and
what the prose says about each verdict holds (checked here with the protocols API directly, on small
configurations, so that a change to a model or a kernel that makes the prose wrong fails a fast CPU test and
not only a notebook run). The exercises that break a count or a mask are run from their solutions' own code.
"""
import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

from multicta_kernels import barriers, clc_matmul as cm, protocols, two_cta
from multicta_kernels.cli import recorders
from multicta_kernels.show import notebook
from multicta_kernels.gluon import scope

ROOT = Path(__file__).resolve().parent.parent
NB = {n: ROOT / "notebooks" / f for n, f in {2: "02-mbarriers.ipynb", 3: "03-tma-multicast.ipynb",
                                              4: "04-two-cta-mma.ipynb", 5: "05-clc-matmul.ipynb",
                                              6: "06-hopper-cluster-matmul.ipynb"}.items()}
C4 = ((1, 0), (2, 0))          # chapter 5's 4-CTA cluster: two pairs stacked along M


def cells(ch, kind=None):
    out = [("".join(c["source"]), c) for c in json.loads(NB[ch].read_text())["cells"]]
    return [(s, c) for s, c in out if kind is None or c["cell_type"] == kind]


def code_with(ch, needle):
    found = [s for s, _ in cells(ch, "code") if needle in s]
    assert found, f"chapter {ch} has no code cell containing {needle!r}"
    return found[0]


def markdown(ch):
    return "\n".join(s for s, _ in cells(ch, "markdown"))


def solution_code(ch, label):
    """The python block of the solution of exercise ``label`` (the exercise must be there too)."""
    text = markdown(ch)
    assert "````{exercise}" in text and f":label: {label}\n" in text, f"chapter {ch} lacks exercise {label}"
    start = text.index(f"````{{solution}} {label}")
    block = text[start:text.index("\n````", start + 1)]
    return re.search(r"```python\n(.*?)```", block, re.S).group(1)


def run(code, **names):
    ns = {"protocols": protocols, "dataclasses": dataclasses, "notebook": notebook, **names}
    exec(compile(code, "<solution>", "exec"), ns)
    return ns


# ----------------------------------------------------------------------------------------- chapter 2

def test_ch2_cells_check_the_ping_pong_and_tie_it_to_the_ptx():
    code_with(2, "protocols.check(protocols.models.ping_pong(2, rounds=3, one_phase=True))")
    code_with(2, "protocols.compare(protocols.models.ping_pong(2))")
    code_with(2, "notebook.source(protocols.models.ping_pong)")
    text = markdown(2)
    # (The checker now lands a multicast in each receiver on its own: chapter 2's "lands in all its receivers
    # at once" no longer describes it, so it is not asserted here; protocols' docstring says what it does.)
    for claim in ("## Checking a protocol on the CPU", "**What it models.**", "**How it explores.**",
                  "**What it leaves out.** Memory ordering", "partial-order reduction"):
        assert claim in text


def test_ch2_one_phase_is_a_phase_overrun_at_the_first_wait_of_round_1():
    good = protocols.check(protocols.models.ping_pong(2, rounds=3))
    assert good.ok and good.exhaustive and str(good).startswith(
        "no deadlock, no phase overrun, no overwrite before release, no arrival after exit, in every interleaving (")
    bad = protocols.check(protocols.models.ping_pong(2, rounds=3, one_phase=True))
    assert bad.kind == "phase overrun"
    step, cta, part, op, detail = bad.trace[-1]
    assert (cta, op) == (0, "wait arrived, phase 1 (parity 0)") and "returns after 1 completed phase(s)" in detail
    assert all(row[3] != "arrive arrived, phase 1" for row in bad.trace if row[1] == 1)   # CTA 1 has not arrived
    assert protocols.check(protocols.models.ping_pong(2, rounds=1, one_phase=True)).ok          # one round: nothing flips


def test_ch2_model_and_ptx_agree_with_the_init_counts_the_prose_explains():
    rows = {kind: (model, ptx, equal) for kind, model, ptx, equal in protocols.compare(protocols.models.ping_pong(2))}
    assert all(equal for *_, equal in rows.values())
    assert rows["init counts"][0] == [1, 1, 2, 2]           # go, freed_go per CTA; arrived, freed 1 x 2 on CTA 0
    assert rows["arrive"][0] == rows["wait"][0] == 4


def test_ch2_mask_exercise():
    ns = run(solution_code(2, "ex-ch2-mask"))
    model = ns["exchange_model"]
    assert protocols.sites(model(0)) == protocols.sites(protocols.models.exchange(4))          # the package's model
    assert protocols.check(model(0)).ok
    for mask in (0b11, 0b01):
        r = protocols.check(model(mask))
        assert r.kind == "read before write" and r.steps == 6
    r = protocols.check(model(0b11))
    assert {row[1] for row in r.trace} == {1} and "pub[0] of CTA 0" in r.message         # CTA 1 reads CTA 0's row


# ----------------------------------------------------------------------------------------- chapter 3

def test_ch3_releases_safe_and_no_release_with_multicast_found():
    code_with(3, "protocols.models.tile_stream(n, release, multicast=multicast)")
    for release in ("cluster", "mbarrier"):
        assert protocols.check(protocols.models.tile_stream(4, release)).ok
    for n in (2, 4):
        assert protocols.check(protocols.models.tile_stream(n, "none")).kind == "overwrite before release"
    assert protocols.check(protocols.models.tile_stream(2, "none", multicast=False)).ok
    assert protocols.check(protocols.models.tile_stream(1, "none", multicast=False)).ok
    steps = [protocols.check(protocols.models.tile_stream(2, "none", stages=s)).steps for s in (2, 3, 4)]
    assert steps == [9, 11, 13]                                        # a deeper ring only postpones it
    r = protocols.check(protocols.models.tile_stream(2, "none"))
    assert r.trace[-1][1:4] == [0, "main", "tma_load -> ready[0]"] and "of CTA 1" in r.message   # CTA 0's reload
    assert "CTA 1 main released" in r.message


def test_ch3_count_exercise():
    r = protocols.check(run(solution_code(3, "ex-ch3-count"))["model"])
    assert r.kind == "overwrite before release" and r.steps == 13   # the MMA completes, then its commit lands
    assert "b[0] of CTA 2" in r.message and "CTA 2 main's mma" in r.message
    assert {row[1] for row in r.trace} == {0, 1}                          # pair 1 has not taken a step


# ----------------------------------------------------------------------------------------- chapter 4

def tile_model_source():
    return code_with(4, "def tile_model(")


def test_ch4_tile_model_is_the_package_model_and_finds_the_race():
    ns = run(tile_model_source().split("\n\n\nalloc =")[0], two_cta=two_cta)
    tile_model = ns["tile_model"]
    assert protocols.sites(tile_model()) == protocols.sites(protocols.models.mma_tile())
    assert protocols.check(tile_model()).ok and protocols.check(protocols.models.mma_tile(two_ctas=False)).ok
    race = protocols.check(tile_model(loaded_two_ctas=False))
    assert race.kind == "read before write" and race.steps == 5
    assert race.trace[-1][1:4] == [0, "main", "mma -> done"] and "of CTA 1" in race.message
    assert "read before write" in tile_model_source()


def test_ch4_expect_exercise():
    src = tile_model_source().split("\n\n\nalloc =")[0]
    line = "t.expect(loaded, a_bytes + b_bytes, 0)"
    assert line in src and "t.expect(loaded, 2 * (a_bytes + b_bytes), 0)" in solution_code(4, "ex-ch4-expect")
    tile_model = run(src.replace(line, "t.expect(loaded, 2 * (a_bytes + b_bytes), 0)"), two_cta=two_cta)["tile_model"]
    r = protocols.check(tile_model())
    assert r.kind == "deadlock" and r.steps == 8
    stuck = {row[1]: row[3] for row in r.trace if row[0] == "stuck"}
    assert stuck[0].startswith("wait loaded") and "0 arrival(s) and 49152 B missing" in stuck[0]
    assert stuck[1].startswith("wait done") and "1 arrival(s) missing" in stuck[1]


# ----------------------------------------------------------------------------------------- chapter 5

def test_ch5_upstream_per_pair_release_overwrites_at_4_ctas_only():
    code_with(5, 'protocols.models.clc_matmul(C4, "pair", slots_only=True)')
    r = protocols.simulate(protocols.models.clc_matmul(C4, "pair", slots_only=True), runs=300, seed=0)
    assert r.kind == "overwrite before release" and 0 < r.failures < r.runs
    assert "clc_result[0] of CTA 2" in r.message
    assert {row[1] for row in r.trace} == {0, 1}                          # CTAs 2 and 3 take no step
    assert r.trace[-1][1:4] == [0, "scheduler", "try_cancel -> slot 0"]  # CTA 0 asks into slot 0 again
    assert "7 arrival(s) to go" in " ".join(row[4] for row in r.trace)   # the pair barrier counts 2 x 4 readers
    assert protocols.simulate(protocols.models.clc_matmul(release="pair", slots_only=True), runs=100).ok   # 2 CTAs


def test_ch5_our_release_and_the_one_before_pass():
    whole = protocols.check(protocols.models.clc_matmul(tiles=2))
    assert whole.ok and whole.exhaustive and not whole.runs
    for release in ("cluster", "group"):
        r = protocols.simulate(protocols.models.clc_matmul(C4, release, slots_only=True), runs=100)
        assert r.ok and r.runs == 100 and "evidence, not proof" in str(r)
    text = markdown(5)
    assert "evidence, not proof" in text and "every interleaving" in text


def test_ch5_staging_pitfall_is_checked_next_to_it():
    pitfalls = next(s for s, _ in cells(5, "markdown") if s.startswith("## Pitfalls"))
    assert "Alternate the epilogue's staging buffers across tiles" in pitfalls
    assert "## Exercises" not in pitfalls                                   # the check follows the pitfall
    code_with(5, 'protocols.models.clc_matmul(staging=index, subtiles=n, tiles=2)')
    for n, fails in ((1, True), (2, False), (3, True)):
        per_tile = protocols.check(protocols.models.clc_matmul(staging="per_tile", subtiles=n, tiles=2))
        assert (per_tile.kind == "overwrite before release") == fails and per_tile.ok != fails
        assert protocols.check(protocols.models.clc_matmul(staging="across", subtiles=n, tiles=2)).ok
    r = protocols.check(protocols.models.clc_matmul(staging="per_tile", subtiles=1, tiles=2))
    assert r.trace[-1][2:4] == ["epilogue", "write c_smem[0] v2"] and "tma_store released version 1" in r.message


def test_ch5_timeline_scopes_section():
    src = code_with(5, 'cm.clc_matmul_spec(instrument=True), "sm_100a", fits=False')
    assert "kernel.census([\"%clock\"])" in src and "lens.same_code(quiet.ptx, kernel.ptx)" in src
    scopes = {name: scope.scope_names(fn) for name, fn in {"scheduler": cm.scheduler_partition, "loader": cm.load_partition,
                               "mma": cm.mma_partition, "epilogue": cm.epilogue_partition}.items()}
    assert scopes == {"scheduler": ["ask", "answer"], "loader": ["wait_free", "load"],
                      "mma": ["wait_acc", "wait_ready", "mma"], "epilogue": ["wait_acc", "store"]}
    text = markdown(5)
    assert "`python -m multicta_kernels.cli.doctor --record --bench`" in text
    assert "timeline_clc_matmul_k512.json" in text
    assert inspect.signature(recorders.record_clc_timeline).parameters["K"].default == 512   # the file it writes
    assert "is a schematic" in text


# ----------------------------------------------------------------------------------------- chapter 6

def test_ch6_ring_and_ping_pong_with_turns_pass_without_turns_is_the_parity_trap():
    code_with(6, "protocols.models.hopper_matmul(2, consumers=2, turns=False)")
    assert protocols.check(protocols.models.hopper_matmul(2, consumers=1)).ok
    assert protocols.check(protocols.models.hopper_matmul(2, consumers=2)).ok
    r = protocols.check(protocols.models.hopper_matmul(2, consumers=2, turns=False))
    assert r.kind == "phase overrun" and r.steps == 1
    assert r.trace[0][2:4] == ["consumer 1", "wait ready[0], phase 1 (parity 1)"]
    assert "returns: 0 phase(s) completed" in r.trace[0][4]
    early = protocols.check(protocols.models.hopper_matmul(2, consumers=1, release_early=True))
    assert early.kind == "overwrite before release" and "consumer 0 released" in early.message
    assert "`empty`" in markdown(6) and "`freed`" not in markdown(6)        # the kernel's (and traces') name


def test_ch6_mask_exercise():
    r = protocols.check(run(solution_code(6, "ex-ch6-mask"), barriers=barriers)["model"])
    assert r.kind == "phase overrun" and r.steps == 8
    assert {(row[1], row[2]) for row in r.trace} == {(1, "producer")}
    assert "meant for phase 1 of CTA 1's ready[0] lands while it is in phase 0" in r.message


# ------------------------------------------------------------------------------------------ all

@pytest.mark.parametrize("ch", sorted(NB))
def test_protocol_cells_end_without_glue(ch):
    for s, c in cells(ch, "code"):
        if "protocols." not in s and "traces.instrumented" not in s:
            continue
        last = ast.parse(s).body[-1]
        assert not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                    and getattr(last.value.func, "attr", None) == "glue"), f"chapter {ch} cell {c['id']} ends with glue"


# ------------------------------------------------------------------ chapters 4 and 5: exit, aliasing, tails

def test_ch4_tile_model_is_the_package_model_op_for_op_with_c_smem_over_a_and_b():
    src = tile_model_source()
    tile_model = run(src.split("\n\n\nalloc =")[0], two_cta=two_cta)["tile_model"]
    assert [t.ops for t in tile_model().threads] == [t.ops for t in protocols.models.mma_tile().threads]
    assert 'over=[("a", 0, 2), ("b", 0, 2)]' in src and "protocols.allocation(package)" in src
    assert "t.invalidate(loaded)" in src and "t.invalidate(done)" in src


def test_ch5_teardown_section_checks_the_tails():
    code_with(5, 'protocols.models.clc_matmul(tiles=1, tails=False)')
    text = markdown(5)
    assert "### Teardown: what is owed before exit" in text and "arrival after exit" in text
    assert "producer tail" in text and "pitfall 25" in text
    before = protocols.check(protocols.models.clc_matmul(tiles=1, tails=False))
    assert before.kind == "arrival after exit" and "commit lands on CTA 0's load_empty[0]" in before.message
    assert before.trace[-1][2] == "tensor core" and before.steps == 80   # a read per sub-tile of the accumulator
    assert protocols.check(protocols.models.clc_matmul(tiles=1)).ok
    # only the loader's tail matters with the exit cluster barrier; without it (a per-CTA exit) both do
    assert protocols.check(protocols.models.clc_matmul(tiles=1).drop("mma.wait acc_empty (tail)")).ok
    assert protocols.check(protocols.models.clc_matmul(tiles=1).drop("loader.wait load_empty (tail)")).kind == \
        "arrival after exit"
    lone = protocols.models.clc_matmul(tiles=1).drop("mma.wait acc_empty (tail)")
    lone.exit = "cta"
    r = protocols.check(lone)
    assert r.kind == "arrival after exit" and "CTA 1 epilogue's arrival lands on CTA 0's acc_empty[0]" in r.message
    both = protocols.models.clc_matmul(tiles=1)
    both.exit = "cta"
    assert protocols.check(both).ok
    assert "only the loader's tail is needed" in text and "{solution} ex-ch5-tails" in text


def test_ch5_rings_one_deep_are_exhaustive():
    code_with(5, "protocols.models.clc_matmul(tiles=2, stages=1, acc_stages=1)")
    r = protocols.check(protocols.models.clc_matmul(tiles=2, stages=1, acc_stages=1))
    assert r.ok and r.exhaustive and r.states < 20_000
    assert "rings one deep" in code_with(5, "rings one deep") and "{glue:text}`ch5_deep1_states`" in markdown(5)
