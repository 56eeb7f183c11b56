"""Chapters 2 and 3 say exactly what the kernels do: each claim the prose makes about a widget, the PTX,
the SASS or a reader's copy of a kernel is checked here against the same functions and compilers.

CPU only: the lens compiles for sm_90a / sm_100a, ``ptxas`` and ``cuobjdump`` come with Triton.
"""
import ast
import json
import re
from pathlib import Path

import pytest

from multicta_kernels import barriers, catalog, lens, multicast as mc
from multicta_kernels.show import notebook, widgets
from multicta_kernels.gluon import operands
from multicta_kernels.gluon.ring import RELEASE_CLUSTER_BARRIER, RELEASE_GATHER, RELEASE_NONE, RELEASE_RELAXED

ROOT = Path(__file__).resolve().parent.parent
CH2 = ROOT / "notebooks" / "02-mbarriers.ipynb"
CH3 = ROOT / "notebooks" / "03-tma-multicast.ipynb"
CH4 = ROOT / "notebooks" / "04-two-cta-mma.ipynb"


def cells(path):
    return [("".join(c["source"]), c) for c in json.loads(path.read_text())["cells"]]


def cell_with(path, needle, kind="code"):
    found = [(i, src) for i, (src, c) in enumerate(cells(path)) if c["cell_type"] == kind and needle in src]
    assert found, f"no {kind} cell of {path.name} contains {needle!r}"
    return found[0]


def call_args(src, name):
    """The literal positional arguments of the first call of ``name`` in ``src``."""
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == name:
            return [ast.literal_eval(a) if isinstance(a, ast.Constant) else ast.unparse(a) for a in node.args]
    raise AssertionError(f"no call of {name}")


# ------------------------------------------------------------------------ the readers' copies

def reader_copy(path):
    """The reader's copy of the chapter's kernel, as the notebook ships it (between its two markers)."""
    _, src = cell_with(path, "end of your copy")
    start = src.index("# =")
    stop = src.index("end of your copy")
    return src[start:src.rindex("\n", 0, stop)]


def copy_module(tmp_path, path, name, *edits):
    """The reader's copy with ``edits`` (old, new) applied, as an importable module, so that its
    ``@gluon.jit`` function has a file that ``inspect`` can read."""
    src = reader_copy(path)
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    return lens.module_from_source(name, src, tmp_path)


@pytest.fixture(scope="module")
def ch3(tmp_path_factory):
    return copy_module(tmp_path_factory.mktemp("ch3"), CH3, "ch3_copy")


@pytest.fixture(scope="module")
def ch2(tmp_path_factory):
    return copy_module(tmp_path_factory.mktemp("ch2"), CH2, "ch2_copy")


# ------------------------------------------------------------------------------------ widgets

def test_receivers_explorer_draws_the_ctas_chapter3_names():
    i, src = cell_with(CH3, "widgets.receivers_explorer(")
    (bases,) = call_args(src, "receivers_explorer")
    assert bases == "[(1, 0), (2, 0), (0, 1)]"
    prose = cells(CH3)[i - 1][0]
    for claim in ("CTAs 0 and 4 need the same A", "1 and 5, 2 and 6, 3 and 7", "CTAs 0 to 3 share one B",
                  "CTAs 4 to 7 the other", "CTA 5 has the CTA mask `0b11110000`"):
        assert claim in prose, claim
    rows = widgets.receivers_table(bases)
    assert [r[2] for r in rows if r[0] == "A"] == ["0, 4", "1, 5", "2, 6", "3, 7"]
    assert [r[2] for r in rows if r[0] == "B"] == ["0, 1, 2, 3", "4, 5, 6, 7"]
    assert next(r[3] for r in rows if r[0] == "B" and "5" in r[2].split(", ")) == "0b11110000"
    fig = widgets.receivers_figure(bases)
    assert sorted(t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("CTA")) == \
        [f"CTA {c}" for c in range(8)]


def test_barrier_explorer_hand_off_is_what_chapter2_says():
    i, src = cell_with(CH2, "widgets.barrier_explorer(")
    assert call_args(src, "barrier_explorer") == ["[[0]]", "barriers.HAND_OFF"]
    prose = cells(CH2)[i - 1][0]
    assert "its wait\nblocks until CTA 1 arrives too" in prose and "the wait returns at once" in prose
    s = barriers.barrier_steps("[[0]]", barriers.HAND_OFF, step=3)        # init, arrive 0, wait 0 0
    assert s.waiting == [[0, 0, 0, 3]] and s.barriers[0][4] == 0
    s = barriers.barrier_steps("[[0]]", barriers.HAND_OFF, step=4)        # CTA 1 arrives: phase 0 completes
    assert s.waiting == [] and s.barriers[0][4] == 1
    s = barriers.barrier_steps("[[0]]", barriers.HAND_OFF)
    assert s.error is None and s.waiting == [] and s.barriers[0][4] == 2
    assert s.trace[-1][2:] == ["wait", "parity 1: returns"]


def test_lost_phase_only_in_the_phase_solution_and_it_deadlocks():
    uses = [src for src, c in cells(CH2) if "LOST_PHASE" in src]
    assert len(uses) == 2                                   # the glue cell, and the solution that shows it
    glue_cell = next(c for src, c in cells(CH2) if "LOST_PHASE" in src and c["cell_type"] == "code")
    assert "remove-cell" in glue_cell["metadata"]["tags"]
    solution = next(src for src, c in cells(CH2) if "{solution} ex-ch2-phase" in src)
    assert "```{glue} lost_phase" in solution.split("{solution} ex-ch2-phase")[1].split("````")[0]
    s = barriers.barrier_steps("[[0]]", barriers.LOST_PHASE)
    assert "deadlock" in s.error and s.waiting == [[0, 0, 0, 7]]


def test_change_a_count_solution():
    s = barriers.barrier_steps("[[0], [0]]", "init 2\narrive 0\narrive 1\narrive 2\narrive 3\nwait 0 0")
    assert s.barriers[0][2] == "4 / 8" and s.waiting == [[0, 0, 0, 6]]


# --------------------------------------------------------------- chapter 3: who issues a multicast

@pytest.mark.parametrize("name, params", [
    ("multicast_copy", dict(num_ctas=2, multicast=True)), ("multicast_copy", dict(num_ctas=16, multicast=True)),
    ("tile_stream", dict(num_ctas=4, multicast=True, release=RELEASE_GATHER)),
    ("tile_stream", dict(num_ctas=4, multicast=True, release=RELEASE_CLUSTER_BARRIER)),
    ("hopper_multicast_matmul", dict(num_ctas=2, release=RELEASE_GATHER)),
    ("hopper_multicast_matmul", dict(num_ctas=4, release=RELEASE_CLUSTER_BARRIER)),
])
def test_every_hopper_multicast_load_is_issued_by_cta_0(name, params):
    ptx = catalog.compile(name, "sm_90a", **params).ptx
    n = params["num_ctas"]
    loads = [ln for _, op, ln in lens.instructions(ptx) if op.startswith("cp.async.bulk.tensor") and "multicast" in op]
    assert loads
    for i in range(len(loads)):
        assert lens.issuing_ctas(lens.predicate_chain(ptx, "multicast::cluster", i), n) == [0]
    masks = {int(m) & 0xFFFF for m in re.findall(r"mov\.b16\s+%rs\d+, (-?\d+);", ptx)}    # 16 CTAs: -1
    assert masks == {(1 << n) - 1}                           # to every CTA of the cluster


def test_with_several_groups_each_group_leader_issues():
    ptx = catalog.compile("blackwell_multicast_mma", "sm_100a").ptx
    b_bases = operands.operand_cga_layouts(mc.UPSTREAM_BLACKWELL["acc_bases"], two_ctas=True)[1]
    leaders = sorted(g[0] for g in mc.receivers(b_bases, 4).values())
    assert lens.issuing_ctas(lens.predicate_chain(ptx, "multicast::cluster"), 4) == leaders == [0, 1]


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_the_issuing_cta_issues_the_whole_tile(tmp_path, n):
    """The ex-ch3-change solution: with multicast back, one CTA issues two loads of half the tile, whatever
    the cluster size; each CTA expects the whole tile."""
    mod = copy_module(tmp_path, CH3, f"ch3_multicast_{n}", ("multicast=False", "multicast=True"))
    ptx = lens.compile(lens.with_kernel(mc.tile_stream_spec(num_ctas=n), mod.my_tile_stream), "sm_90a").ptx
    assert lens.issuing_ctas(lens.predicate_chain(ptx, "multicast::cluster"), n) == [0]
    assert sum("multicast::cluster" in ln for ln in lens.loop_body(ptx).splitlines()) == 2
    assert {int(b) for b in re.findall(r"expect_tx\S*\s+_, \[%r\d+\], (\d+);", ptx)} == {mc.STREAM_TILE_BYTES}
    assert mc.STREAM_TILE_BYTES == 128 * 128 * 2


def test_reader_copy_of_the_stream_changes_what_the_prose_says(ch3):
    spec = mc.tile_stream_spec(num_ctas=4, multicast=True, release=RELEASE_GATHER)
    theirs, yours = lens.compile(spec, "sm_90a").ptx, lens.compile(lens.with_kernel(spec, ch3.my_tile_stream), "sm_90a").ptx
    diff = {r[0]: r[1:] for r in lens.census_changes(theirs, yours)}
    mcast = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
    own = "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes"
    assert diff[mcast] == [10, 0, -10] and diff[own] == [0, 10, 10]
    assert diff["mov.b16"][2] < 0 and diff["and.pred"][2] < 0
    assert set(diff) == {mcast, own, "mov.b16", "and.pred"}
    # issue 22, defect 8: own copies keep the package kernel's per-tile synchronisation (its sync_inits())
    assert lens.per_iteration(theirs) == lens.per_iteration(yours)
    assert lens.per_iteration(yours)["fence.mbarrier_init"] == (1, 0)


# ---------------------------------------------------------- chapter 3: what a release executes

def test_release_paths_in_ptx_and_sass():
    ks = {r: lens.compile(mc.tile_stream_spec(num_ctas=4, release=r), "sm_90a")
          for r in (RELEASE_NONE, RELEASE_CLUSTER_BARRIER, RELEASE_GATHER)}
    marks = ["bar.sync", "mbarrier.arrive.shared::cluster", "mbarrier.try_wait", "barrier.cluster.arrive",
             "barrier.cluster.wait"]
    loop = {r: lens.census(lens.loop_body(k.ptx), marks) for r, k in ks.items()}
    added = {r: [loop[r][m] - loop[RELEASE_NONE][m] for m in marks] for r in ks}
    assert added[RELEASE_CLUSTER_BARRIER] == [0, 0, 0, 1, 1]
    assert added[RELEASE_GATHER] == [4, 2, 2, 0, 0]
    sass = {r: lens.sass_census(k.ptx) for r, k in ks.items()}
    more = {r: {op: sass[r][op] - sass[RELEASE_NONE][op] for op in ("MEMBAR.ALL.GPU", "MEMBAR.ALL.CTA", "CCTL.IVALL",
                                                                    "UCGABAR_ARV")} for r in ks}
    assert more[RELEASE_CLUSTER_BARRIER] == {"MEMBAR.ALL.GPU": 1, "MEMBAR.ALL.CTA": 1, "CCTL.IVALL": 1,
                                             "UCGABAR_ARV": 1}
    assert more[RELEASE_GATHER] == {"MEMBAR.ALL.GPU": 0, "MEMBAR.ALL.CTA": 0, "CCTL.IVALL": 0, "UCGABAR_ARV": 0}
    fan_out = lens.predicate_chain(ks[RELEASE_GATHER].ptx, "mbarrier.arrive.shared::cluster", 1)
    assert any(re.search(r"setp\.lt\.u32\s+%p\d+, %r\d+, 4;", t) for _, t in fan_out)
    assert lens.issuing_ctas(fan_out, 4) == [0]


# ============ chapter 3, issue 22 (defects 2, 3, 7, 8, 9, 10): tests written with the chapter-3 rewrite ============

def _function_body(fn):
    """The AST of a @gluon.jit function's body without its docstring (formatting and comments do not count)."""
    import inspect
    import textwrap
    body = ast.parse(textwrap.dedent(inspect.getsource(getattr(fn, "fn", fn)))).body[0].body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def test_ch3_reader_copy_is_the_package_kernel_but_its_loads(ch3):
    """The reader's copy is the package's tile stream with `multicast=False` on its two loads and nothing else:
    a copy that drifts (the one shipped before sync_inits() had none) teaches another kernel than the benchmark's."""
    class Back(ast.NodeTransformer):
        def visit_keyword(self, node):
            if node.arg == "multicast" and isinstance(node.value, ast.Constant) and node.value.value is False:
                node.value = ast.Name("MULTICAST", ast.Load())
            return node
    copy = [ast.dump(Back().visit(n)) for n in _function_body(ch3.my_tile_stream)]
    assert copy == [ast.dump(n) for n in _function_body(mc.tile_stream_kernel)]
    assert reader_copy(CH3).count("multicast=False") == 2


def test_ch3_change_it_and_see_shows_the_per_tile_synchronisation():
    """Defect 8: the section says, and shows with lens.per_iteration, that switching to own copies leaves the
    per-tile synchronisation alone; the GPU cell prints whether the two kernels it times synchronise alike."""
    prose = cell_with(CH3, "## Change it and see", kind="markdown")[1]
    assert "What does *not* change is the synchronisation of each tile" in prose and "lens.per_iteration" in prose
    assert "lens.per_iteration(yours.ptx)" in cell_with(CH3, "lens.per_iteration(theirs.ptx)")[1]
    live = cell_with(CH3, "if gpu.has(CLUSTERS):\n    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor")[1]
    assert "same_sync" in live


def _ch3_claims(recs):
    """What chapter 3's benchmark section claims of results/h200/multicast.json: the names of the claims that fail."""
    got = {(r["num_ctas"], r["multicast"], r["release"]): r["delivered_gbps"] for r in recs}
    sizes = (2, 4, 8, 16)
    both = [(n, m) for n in sizes for m in (False, True)]
    variants = [(m, r) for m in (False, True) for r in mc.STREAM_VARIANTS[m]]
    g = lambda n, m, r: got[(n, m, r)]
    top3 = sorted(((g(2, m, r), m, r) for m, r in variants), reverse=True)[:3]
    claims = {
        "relaxed > gather > cluster barrier everywhere":
            all(g(n, m, "relaxed") > g(n, m, "mbarrier") > g(n, m, "cluster") for n, m in both),
        "the cluster barrier delivers under 60 % of the relaxed one":
            all(g(n, m, "cluster") / g(n, m, "relaxed") < 0.6 for n, m in both),
        "relaxed within 5 % of no release":
            all(abs(g(n, False, "relaxed") / g(n, False, "none") - 1) < 0.05 for n in sizes),
        "multicast no more than 2 % above own copies at a cheap release":
            all(g(n, True, r) / g(n, False, r) - 1 < 0.02 for n in sizes for r in ("relaxed", "mbarrier")),
        "multicast ahead with the cluster barrier": all(g(n, True, "cluster") > g(n, False, "cluster") for n in sizes),
        "own copies without a release fastest from 4 CTAs up":
            all(max((g(n, m, r), m, r) for m, r in variants)[1:] == (False, "none") for n in (4, 8, 16)),
        "at 2 CTAs the three fastest within 5 %, own copies without a release among them":
            (g(2, False, "none"), False, "none") in top3 and top3[0][0] / top3[2][0] - 1 < 0.05,
    }
    return [claim for claim, holds in claims.items() if not holds]


def test_ch3_headline_follows_the_recording():
    """Defect 3: the headline is what the recorded numbers say, and the prose says it, not the old one."""
    from multicta_kernels import results
    assert _ch3_claims(results.records(results.load("h200/multicast.json"))) == []
    text = "\n".join(src for src, c in cells(CH3) if c["cell_type"] == "markdown")
    assert "as much bandwidth or more" not in text and "rel_ratio" not in text and "st_gap_share" not in text
    assert "**Multicast delivers no more than own copies.**" in text
    assert "multicast delivered no more than own copies at the same release" in text          # the summary
    assert "own copies need no release at all" in text


def _scaled(where, factor):
    return lambda r: r["delivered_gbps"] * (factor if where(r) else 1)


@pytest.mark.parametrize("change, broken", [
    (_scaled(lambda r: (r["num_ctas"], r["multicast"], r["release"]) == (4, True, "mbarrier"), 1.10),
     "multicast no more than 2 % above own copies at a cheap release"),
    (_scaled(lambda r: r["release"] == "cluster", 3), "relaxed > gather > cluster barrier everywhere"),
    (_scaled(lambda r: (r["num_ctas"], r["release"]) == (8, "relaxed"), 0.9), "relaxed within 5 % of no release"),
    (_scaled(lambda r: (r["num_ctas"], r["multicast"], r["release"]) == (16, True, "relaxed"), 1.05),
     "own copies without a release fastest from 4 CTAs up"),
])
def test_ch3_claims_fail_on_other_numbers(change, broken):
    """The claim checker is not vacuous: numbers that contradict a claim are caught, by name."""
    from multicta_kernels import results
    recs = [dict(r, delivered_gbps=change(r)) for r in results.records(results.load("h200/multicast.json"))]
    assert broken in _ch3_claims(recs)


def test_ch3_release_experiment_in_ptx_and_sass():
    """Defect 3's experiment: a relaxed and an ordinary cluster barrier differ only by the arrive's release
    (MEMBAR.ALL.CTA, MEMBAR.ALL.GPU and the ERRBAR/CGAERRBAR ptxas puts after them); both waits keep their acquire
    (CCTL.IVALL). What the chapter's SASS table and its prose say; the stream's loop reads no tile."""
    ks = {r: lens.compile(mc.tile_stream_spec(num_ctas=4, multicast=False, release=r), "sm_90a")
          for r in (RELEASE_NONE, RELEASE_RELAXED, RELEASE_CLUSTER_BARRIER, RELEASE_GATHER)}
    body = {r: lens.loop_body(k.ptx) for r, k in ks.items()}
    assert "barrier.cluster.arrive.relaxed.aligned" in body[RELEASE_RELAXED]
    assert "barrier.cluster.arrive.aligned" in body[RELEASE_CLUSTER_BARRIER]
    assert "ld.shared" not in body[RELEASE_RELAXED]
    sass = {r: lens.sass_census(k.ptx) for r, k in ks.items()}
    ops = ("MEMBAR.ALL.CTA", "MEMBAR.ALL.GPU", "ERRBAR", "CGAERRBAR", "UCGABAR_ARV", "UCGABAR_WAIT", "CCTL.IVALL")
    delta = lambda a, b: {op: sass[a][op] - sass[b][op] for op in ops if sass[a][op] != sass[b][op]}
    assert delta(RELEASE_RELAXED, RELEASE_NONE) == {"UCGABAR_ARV": 1, "UCGABAR_WAIT": 1, "CCTL.IVALL": 1}
    assert delta(RELEASE_CLUSTER_BARRIER, RELEASE_RELAXED) == {"MEMBAR.ALL.CTA": 1, "MEMBAR.ALL.GPU": 1,
                                                                 "ERRBAR": 1, "CGAERRBAR": 1}
    assert sass[RELEASE_GATHER]["MEMBAR.ALL.GPU"] == sass[RELEASE_NONE]["MEMBAR.ALL.GPU"]
    prose = cell_with(CH3, "The two barriers are the same hardware rendezvous", kind="markdown")[1]
    assert "What the relaxed arrive drops is the release" in prose and "both waits end with\n`CCTL.IVALL`" in prose
    legal = cell_with(CH3, "**When a relaxed barrier is legal.**", kind="markdown")[1]
    assert "§9.7.13.3" in legal and "no thread reads the slot before it is reloaded" in legal


@pytest.mark.source_text
def test_ch3_schedule_table_names_the_kernel_lines():
    """The chapter's schedule table: every wait comes from the line of its call (the lens once took the line numbers
    Triton leaves inside a wait's inline assembly, a few lines off), and the init fence's relaxed barrier from the
    line of `sync_inits()`."""
    import inspect
    for kernel, spec, target, waits in [
            (mc.tile_stream_kernel, mc.tile_stream_spec(num_ctas=4, multicast=False, release=RELEASE_GATHER), "sm_90a",
             ["mbarrier.wait(ready", "release(slot"]),
            (mc.blackwell_multicast_mma_kernel, mc.blackwell_multicast_mma_spec(), "sm_100a",
             ["mbarrier.wait(loaded", "mbarrier.wait(consumed"])]:
        lines, first = inspect.getsourcelines(kernel.fn)
        where = lambda needle: f"multicast.py:{first + next(i for i, ln in enumerate(lines) if needle in ln)}"
        rows = lens.schedule(lens.compile(spec, target).ptx)
        assert {r["source"] for r in rows if r["op"] == "mbarrier.try_wait"} == {where(w) for w in waits}
        assert next(r for r in rows if r["op"] == "barrier.cluster.arrive.relaxed")["source"] == where("sync_inits()")


def test_ch3_without_sync_inits_own_copies_fence_every_tile(tmp_path):
    """Defect 2 in chapter 3: the own-copy stream with the gather release ran the init fence and a relaxed cluster
    barrier at every tile before sync_inits(); with multicast the first cross-CTA use is the prologue, so they ran
    once. What the chapter's 'before' table says."""
    from nbcells import variant
    mod = variant(tmp_path, "stream_no_sync", mc.tile_stream_kernel, edits={"sync_inits()": "pass"})
    pats = ("fence.mbarrier_init", "barrier.cluster.arrive.relaxed")
    for multicast, before in ((False, (0, 1)), (True, (1, 0))):
        spec = mc.tile_stream_spec(num_ctas=4, multicast=multicast, release=RELEASE_GATHER)
        without = lens.compile(lens.with_kernel(spec, mod.tile_stream_kernel), "sm_90a").ptx
        assert lens.per_iteration(without, pats) == {p: before for p in pats}
        assert lens.per_iteration(lens.compile(spec, "sm_90a").ptx, pats) == {p: (1, 0) for p in pats}
    text = cell_with(CH3, "It was not so before `sync_inits()`", kind="markdown")[1]
    assert "ran at **every tile**" in text and "With multicast the first such use is the prologue" in text


def test_ch3_hopper_slot_release_is_completion_not_a_release():
    """Item 8: the Hopper slot release is a CTA-scoped arrive after wgmma.wait_group, with no fence, and the prose
    says why that is sound (completion), citing the PTX ISA."""
    loop = lens.loop_body(catalog.compile("hopper_multicast_matmul", "sm_90a", num_ctas=4, release=RELEASE_GATHER).ptx)
    assert loop.index("wgmma.wait_group") < loop.index("mbarrier.arrive.shared::cluster")
    assert "mbarrier.arrive.release" not in loop and "fence.acq_rel" not in loop
    prose = cell_with(CH3, "**Why this release needs no cluster scope.**", kind="markdown")[1]
    for cited in ("§8.7", "§8.9.4", "§9.7.13.15.13", "§9.7.15.7.3", "§9.7.9.27.1.2", "ClusterBarrier::arrive",
                  "the argument is completion, not a release/acquire pair", "The PTX\nISA has no sentence"):
        assert cited in prose, cited


def test_ch3_hopper_vs_blackwell_says_what_the_examples_are():
    """Defect 7: the Blackwell example is single-buffered (each K step waits on `consumed` before the next load),
    the Hopper kernel is pipelined, and no cluster barrier runs between K steps any more."""
    import inspect
    bw = lens.schedule(catalog.compile("blackwell_multicast_mma", "sm_100a").ptx,
                       ("mbarrier.arrive.expect_tx", "mbarrier.try_wait", "tcgen05.commit", "barrier.cluster"))
    lines, first = inspect.getsourcelines(mc.blackwell_multicast_mma_kernel.fn)
    lo, hi = [first + i for i, ln in enumerate(lines) if "for k in range" in ln or "mbarrier.wait(consumed" in ln]
    in_loop = [r["op"] for r in bw if lo <= int(r["source"].split(":")[1]) <= hi]
    step = ["mbarrier.arrive.expect_tx", "mbarrier.try_wait", "tcgen05.commit", "mbarrier.try_wait"]
    assert in_loop == step * mc.UPSTREAM_BLACKWELL["K_TILES"]
    assert mc.hopper_multicast_matmul.__kwdefaults__["stages"] > 1
    prose = cell_with(CH3, "**Hopper vs Blackwell.**", kind="markdown")[1]
    assert "**single-buffered**" in prose and "waits on `consumed` before the next load may start" in prose
    assert "not built to" in prose and "nothing runs between two K steps but its waits" in prose


def test_ch3_one_commit_short_predicts_what_the_kernel_would_do():
    """Defect 7's exercise: the GPU prediction is about the kernel as compiled (no rendezvous between K steps) and
    includes what the checker's first failure hides: each step's second commit completes the next step's phase, so
    the last wait can return before the last MMA (with one K step: the epilogue reads an unfinished accumulator)."""
    from multicta_kernels import protocols
    assert protocols.check(protocols.models.multicast_mma(k_tiles=1).recount("consumed", 1)).kind == "read before write"
    solution = next(src for src, c in cells(CH3) if "{solution} ex-ch3-count" in src)
    solution = solution.split("{solution} ex-ch3-count")[1].split("````")[0]
    assert "{glue:text}`short_steps` steps" in solution and "in 12 steps" not in solution
    for claim in ("between two\nK steps the compiled loop runs nothing but its waits", "the epilogue may read an accumulator",
                  'recount("consumed", 1)`, no reload at all', "{glue:text}`one_step_kind`"):
        assert claim in solution, claim


def test_ch3_says_only_what_the_records_show_of_placement():
    """Defect 9: Triton's launcher asks for CU_CLUSTER_SCHEDULING_POLICY_SPREAD on cluster launches (the installed
    driver.c), and the recorded stream timelines put every kept CTA on an SM of its own; the chapter says that and
    no more."""
    import triton.backends.nvidia
    from multicta_kernels import results
    from multicta_kernels.measure import traces
    launcher = (Path(triton.backends.nvidia.__file__).parent / "driver.c").read_text()
    at = launcher.index("CU_CLUSTER_SCHEDULING_POLICY_SPREAD")
    assert at - launcher.rindex("if (num_ctas != 1)", 0, at) < 1000
    for rel in ("cluster", "mbarrier"):
        sms = {}
        for r in traces.load(results.RESULTS / "h200" / f"timeline_tile_stream_{rel}.json").records():
            sms.setdefault((r["cluster"], r["rank"]), set()).add(r["sm"])
        assert all(len(s) == 1 for s in sms.values()) and len(set().union(*sms.values())) == len(sms)
    text = "\n".join(src for src, c in cells(CH3) if c["cell_type"] == "markdown")
    said = "whether the CTAs of one cluster ever share an SM, they do not say"
    assert said in text and "share an SM" not in text.replace(said, "")
    assert "CU_CLUSTER_SCHEDULING_POLICY_SPREAD" in text


def test_ch3_prerequisites_name_what_exists():
    """Defect 10: no 'Part 0' mbarrier (Part 0 has none, and no Gluon); chapter 2, and the primer's TMA ring."""
    first = cells(CH3)[0][0]
    prereq = first[first.index("**Prerequisites:**"):]
    assert "Part 0" not in prereq and "chapter 2" in prereq and "00b-gluon-primer" in prereq


# ------------------------------------------------------------- chapter 2: what a round executes

@pytest.mark.parametrize("n", [2, 16])
def test_a_measured_round_runs_no_init_fence(n):
    """With sync_inits() before the loop, a round is the hand-off and nothing else: no init fence and no relaxed
    cluster barrier per round (before the fix both ran in every measured round)."""
    body = {m: lens.loop_body(catalog.compile("barrier_cost", "sm_90a", num_ctas=n, mode=m).ptx) for m in (1, 2)}
    round_ = lens.census(body[1], ["fence.mbarrier_init", "barrier.cluster.arrive.relaxed", "barrier.cluster.wait",
                                   "mbarrier.arrive.shared::cluster", "bar.sync"])
    assert round_ == {"fence.mbarrier_init": 0, "barrier.cluster.arrive.relaxed": 0, "barrier.cluster.wait": 0,
                      "mbarrier.arrive.shared::cluster": 2, "bar.sync": 4}
    assert lens.census(body[2], ["barrier.cluster.arrive.aligned", "mbarrier.try_wait"]) == \
        {"barrier.cluster.arrive.aligned": 1, "mbarrier.try_wait": 0}
    ptx = catalog.compile("barrier_cost", "sm_90a", num_ctas=n, mode=1).ptx
    fan_out = lens.predicate_chain(ptx, "mbarrier.arrive.shared::cluster", 1)
    assert any(re.search(rf"setp\.lt\.u32\s+%p\d+, %r\d+, {n};", t) for _, t in fan_out)   # lanes 0 to n-1


def test_reader_copy_of_the_exchange_changes_what_the_prose_says(ch2):
    """*Change it and see*: the copy without CTA 0's wait for the gather loses one cluster-scoped wait, and the
    test on CTA 0 that guarded it."""
    spec = catalog.spec("cluster_exchange", num_ctas=4)
    yours = lens.compile(lens.with_kernel(spec, ch2.my_exchange_kernel), "sm_90a")
    diff = {r[0]: r[1:] for r in lens.census_changes(lens.compile(spec, "sm_90a").ptx, yours.ptx)}
    assert diff["mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"] == [2, 1, -1]
    assert diff["selp.b32"] == [1, 0, -1]
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" not in diff      # the arrivals are unchanged


def test_census_diff_sees_a_count(tmp_path):
    """The exercise *Change a count*: count=2 on a barrier shared by 4 CTAs programs 8; the chapters' table
    (``notebook.census_diff``) shows it."""
    mod = copy_module(tmp_path, CH2, "ch2_count", ("# acquire_wait(arrived, 0, me == 0)   # CHANGED: removed",
                                                   "acquire_wait(arrived, 0, me == 0)   #"),
                      ("mbarrier.init(arrived, count=1)", "mbarrier.init(arrived, count=2)"))
    spec = catalog.spec("cluster_exchange", num_ctas=4)
    theirs, yours = lens.compile(spec, "sm_90a"), lens.compile(lens.with_kernel(spec, mod.my_exchange_kernel), "sm_90a")
    diff = {r[0]: r[1:] for r in lens.census_changes(theirs.ptx, yours.ptx)}
    assert diff == {"mbarrier.init.shared::cta.b64 (count 4)": [1, 0, -1],
                    "mbarrier.init.shared::cta.b64 (count 8)": [0, 1, 1]}
    table = notebook.census_diff(theirs, yours).data
    assert "mbarrier.init.shared::cta.b64 (count 8)</td><td>0</td><td>1</td><td>1" in table
    solution = next(src for src, c in cells(CH2) if "{solution} ex-ch2-change" in src)
    assert "`mbarrier.init.shared::cta.b64 (count 4)` going from 1 to 0 and `(count 8)` from 0\nto 1" in solution


# ----------------------------------------------------------------------------------- the text

def test_no_slice_per_cta_claim_left():
    text = "\n".join(src for src, c in cells(CH3) if c["cell_type"] == "markdown")
    text += (ROOT / "book" / "glossary.md").read_text()
    assert "issues one TMA load for its slice" not in text
    assert "each CTA of the group loads a slice" not in text
    assert "stops every warp of every CTA, the mbarrier hand-off only" not in text
    assert "seed" not in text.lower()
    ch2_text = "\n".join(src for src, c in cells(CH2) if c["cell_type"] == "markdown")
    assert "because the leader waits for the slowest" not in ch2_text


@pytest.mark.parametrize("path", [CH2, CH3])
def test_no_glue_value_shown_by_accident(path):
    for src, c in cells(path):
        if c["cell_type"] != "code":
            continue
        last = ast.parse(src).body[-1]
        assert not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                    and getattr(last.value.func, "attr", None) == "glue"), src


@pytest.mark.parametrize("path", [CH2, CH3])
def test_plot_cells_are_folded(path):
    for src, c in cells(path):
        if c["cell_type"] == "code" and "plt.show()" in src:
            assert "hide-input" in c["metadata"].get("tags", []), src


# ------------------------------------------------------------------ one copy of each helper: the package's

PACKAGE_HELPERS = ["predicate_chain", "loop_body", "issuing_ctas", "sass", "sass_census", "census_diff", "_counted",
                   "reader_spec", "init_counts", "barrier_count", "code_lines", "commit_demo", "commit_mask"]


@pytest.mark.parametrize("path", [CH2, CH3, CH4])
def test_chapters_use_the_package_helpers_not_copies(path):
    """The PTX readers live in ``lens``, the census diff in ``notebook``, the commit demo in ``two_cta``: a
    notebook that defines its own again can drift from what the tests check."""
    defined = {node.name for src, c in cells(path) if c["cell_type"] == "code"
               for node in ast.walk(ast.parse(src)) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert not defined & set(PACKAGE_HELPERS), defined & set(PACKAGE_HELPERS)


@pytest.mark.parametrize("path", [CH2, CH3, CH4])
def test_change_it_and_see_ends_with_the_census_diff(path):
    """Every "Change it and see" compiles the reader's copy with the package's spec and ends with the one
    census diff the book has (``notebook.census_diff``, an mbarrier.init also by its count)."""
    compiling = [src for src, c in cells(path) if c["cell_type"] == "code" and "lens.with_kernel(" in src
                 and "lens.compile(" in src and "lens.variant(" not in src]      # a variant is the chapter's, not yours
    assert len(compiling) == 1, compiling
    last = ast.parse(compiling[0]).body[-1]
    assert isinstance(last, ast.Expr) and ast.unparse(last.value.func) == "notebook.census_diff"


@pytest.mark.parametrize("mode", [1, 2, 3, 4, 5])
def test_the_cost_kernels_check_adds_no_barrier_to_its_loop(mode):
    """The counting check of test_cost_kernel_holds_every_cta_until_all_entered must not synchronise the CTAs
    itself: with seen_ptr, the loop body holds the mode's own hand-off and, of the check, one relaxed red and one
    relaxed atom, nothing more (an acq_rel atomic there brought a cluster barrier before and after it), the red
    before the hand-off and the atom after it (read before the barrier, the count says nothing of the barrier).
    Without seen_ptr, the benchmark's loop holds no atomic at all."""
    import dataclasses
    from multicta_kernels import barriers, lens
    s = barriers.barrier_cost_spec(4, mode)
    constexprs = {**s.constexprs, "slot": barriers.cluster_layouts(4)["slot"]}
    del constexprs["seen_ptr"]
    checked = lens.compile(dataclasses.replace(s, signature={**s.signature, "seen_ptr": "*i32"},
                                               constexprs=constexprs), "sm_90a")
    plain = lens.compile(s, "sm_90a")

    def body(k):
        return lens.census(lens.loop_body(k.ptx), ["barrier.cluster.arrive", "bar.sync", "atom.", "red.",
                                                   "mbarrier.arrive", "mbarrier.try_wait"])
    got, want = body(checked), body(plain)
    assert want["atom."] == want["red."] == 0
    assert got["red."] == got["atom."] == 1 and "relaxed" in lens.excerpt(checked.ptx, "atom.global", 0)
    assert {k: v for k, v in got.items() if k not in ("atom.", "red.")} == \
        {k: v for k, v in want.items() if k not in ("atom.", "red.")}, (got, want)
    # and in that order: the count goes in before the hand-off's first operation and is read after its last wait
    ops = ("red.", "atom.", "barrier.cluster.arrive", "barrier.cluster.wait", "mbarrier.arrive", "mbarrier.try_wait")
    seq = [next(p for p in ops if op.startswith(p)) for _, op, _ in lens.instructions(lens.loop_body(checked.ptx))
           if op.startswith(ops)]
    assert seq[0] == "red." and seq[-1] == "atom." and seq.count("atom.") == 1, f"the loop's order: {seq}"

