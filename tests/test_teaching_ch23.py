"""Chapters 2 and 3 say exactly what the kernels do: each claim the prose makes about a widget, the PTX,
the SASS or a reader's copy of a kernel is checked here against the same functions and compilers.

CPU only: the lens compiles for sm_90a / sm_100a, ``ptxas`` and ``cuobjdump`` come with Triton.
"""
import ast
import json
import re
from pathlib import Path

import pytest

from multicta_kernels import catalog, cluster, lens, multicast as mc, notebook, widgets
from multicta_kernels.cluster import RELEASE_CLUSTER_BARRIER, RELEASE_GATHER, RELEASE_NONE

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
    assert call_args(src, "barrier_explorer") == ["[[0]]", "widgets.HAND_OFF"]
    prose = cells(CH2)[i - 1][0]
    assert "its wait\nblocks until CTA 1 arrives too" in prose and "the wait returns at once" in prose
    s = widgets.barrier_steps("[[0]]", widgets.HAND_OFF, step=3)        # init, arrive 0, wait 0 0
    assert s.waiting == [[0, 0, 0, 3]] and s.barriers[0][4] == 0
    s = widgets.barrier_steps("[[0]]", widgets.HAND_OFF, step=4)        # CTA 1 arrives: phase 0 completes
    assert s.waiting == [] and s.barriers[0][4] == 1
    s = widgets.barrier_steps("[[0]]", widgets.HAND_OFF)
    assert s.error is None and s.waiting == [] and s.barriers[0][4] == 2
    assert s.trace[-1][2:] == ["wait", "parity 1: returns"]


def test_lost_phase_only_in_the_phase_solution_and_it_deadlocks():
    uses = [src for src, c in cells(CH2) if "LOST_PHASE" in src]
    assert len(uses) == 2                                   # the glue cell, and the solution that shows it
    glue_cell = next(c for src, c in cells(CH2) if "LOST_PHASE" in src and c["cell_type"] == "code")
    assert "remove-cell" in glue_cell["metadata"]["tags"]
    solution = next(src for src, c in cells(CH2) if "{solution} ex-ch2-phase" in src)
    assert "```{glue} lost_phase" in solution.split("{solution} ex-ch2-phase")[1].split("````")[0]
    s = widgets.barrier_steps("[[0]]", widgets.LOST_PHASE)
    assert "deadlock" in s.error and s.waiting == [[0, 0, 0, 7]]


def test_change_a_count_solution():
    s = widgets.barrier_steps("[[0], [0]]", "init 2\narrive 0\narrive 1\narrive 2\narrive 3\nwait 0 0")
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
    b_bases = cluster.operand_cga_layouts(mc.SEED_BLACKWELL["acc_bases"], two_ctas=True)[1]
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
    diff = {r[0]: r[1:] for r in lens.census_changes(lens.compile(spec, "sm_90a").ptx,
                                                     lens.compile(lens.with_kernel(spec, ch3.my_tile_stream), "sm_90a").ptx)}
    mcast = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
    own = "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes"
    assert diff[mcast] == [10, 0, -10] and diff[own] == [0, 10, 10]
    assert diff["mov.b16"][2] < 0 and diff["and.pred"][2] < 0
    assert set(diff) == {mcast, own, "mov.b16", "and.pred"}


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


# ------------------------------------------------------------- chapter 2: what a round executes

@pytest.mark.parametrize("n", [2, 16])
def test_each_measured_round_also_runs_the_init_fence_and_a_relaxed_cluster_barrier(n):
    body = {m: lens.loop_body(catalog.compile("barrier_cost", "sm_90a", num_ctas=n, mode=m).ptx) for m in (1, 2)}
    round_ = lens.census(body[1], ["fence.mbarrier_init", "barrier.cluster.arrive.relaxed", "barrier.cluster.wait",
                                   "mbarrier.arrive.shared::cluster", "bar.sync"])
    assert round_ == {"fence.mbarrier_init": 1, "barrier.cluster.arrive.relaxed": 1, "barrier.cluster.wait": 1,
                      "mbarrier.arrive.shared::cluster": 2, "bar.sync": 4}
    assert lens.census(body[2], ["barrier.cluster.arrive.aligned", "mbarrier.try_wait"]) == \
        {"barrier.cluster.arrive.aligned": 1, "mbarrier.try_wait": 0}
    ptx = catalog.compile("barrier_cost", "sm_90a", num_ctas=n, mode=1).ptx
    fan_out = lens.predicate_chain(ptx, "mbarrier.arrive.shared::cluster", 1)
    assert any(re.search(rf"setp\.lt\.u32\s+%p\d+, %r\d+, {n};", t) for _, t in fan_out)   # lanes 0 to n-1


def test_reader_copy_of_the_exchange_changes_what_the_prose_says(ch2):
    spec = catalog.spec("cluster_exchange", num_ctas=4)
    yours = lens.compile(lens.with_kernel(spec, ch2.my_exchange_kernel), "sm_90a")
    diff = {r[0]: r[1:] for r in lens.census_changes(lens.compile(spec, "sm_90a").ptx, yours.ptx)}
    assert diff["mbarrier.arrive.shared::cluster.b64"] == [2, 1, -1]
    assert diff["mbarrier.arrive.shared::cta.b64"] == [0, 1, 1]
    assert diff["setp.lt.u32"] == [1, 0, -1] and diff["xor.b32"] == [1, 0, -1]


def test_census_diff_sees_a_count(tmp_path):
    """The exercise *Change a count*: count=2 on a barrier shared by 4 CTAs programs 8; the chapters' table
    (``notebook.census_diff``) shows it."""
    mod = copy_module(tmp_path, CH2, "ch2_count", ("from_cta=0b11", "from_cta=0"),
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
    compiling = [src for src, c in cells(path)
                 if c["cell_type"] == "code" and "lens.with_kernel(" in src and "lens.compile(" in src]
    assert len(compiling) == 1, compiling
    last = ast.parse(compiling[0]).body[-1]
    assert isinstance(last, ast.Expr) and ast.unparse(last.value.func) == "notebook.census_diff"
