"""Model and kernel agree: every protocol built at a kernel's configuration has, per kind, as many
code sites as the compiled PTX has instructions (inits with their counts, arrives, expects, waits,
commits, try_cancels, TMA loads and stores, store waits, cluster barriers), so neither can drift."""
import re

import pytest

from multicta_kernels import catalog, lens
from multicta_kernels import clc_matmul as cm
from multicta_kernels import protocols as P

MODELS = P.kernel_models()


@pytest.mark.parametrize("protocol", MODELS, ids=lambda p: p.name)
def test_model_has_the_kernels_code_sites(protocol):
    rows = P.compare(protocol)
    assert all(ok for *_, ok in rows), "\n".join(f"{k:16s} model {m!s:40s} PTX {g}" for k, m, g, _ in rows)


# Kernels that initialise mbarriers and have no protocol model, and why (the mutation harness's survivors say what
# that leaves to the GPU tests).
UNMODELLED: dict = {}


def test_every_barrier_kernel_of_the_book_has_a_model():
    """Every kernel of the catalog whose PTX initialises an mbarrier is tied to a model, or is listed above."""
    from multicta_kernels.protocols.models import tma_ring, ws_ring
    modelled = {p.kernel[0] for p in MODELS + [tma_ring(), ws_ring()]}
    assert modelled <= set(catalog.registered())
    with_barriers = set()
    for name, sets in catalog.registered().items():
        spec = catalog.spec(name, **sets[0])
        target = "sm_90a" if "sm_90a" in spec.targets else spec.targets[0]
        if "mbarrier.init" in catalog.compile(name, target, **sets[0]).ptx:
            with_barriers.add(name)
    assert with_barriers - modelled == set(UNMODELLED), sorted(with_barriers - modelled)
    assert modelled == with_barriers - set(UNMODELLED)


def _expect_tx_bytes(ptx):
    """The byte counts of every mbarrier.arrive.expect_tx in the PTX (immediates; a register stays its name)."""
    out = set()
    for _, _, line in lens.instructions(ptx):
        if "mbarrier.arrive.expect_tx" in line:
            operand = line.split("//")[0].strip().rstrip(";").rsplit(",", 1)[-1].strip()
            out.add(int(operand) if operand.isdigit() else operand)
    return out


@pytest.mark.parametrize("protocol", MODELS, ids=lambda p: p.name)
def test_model_expects_the_kernels_bytes(protocol):
    """The bytes each expect names: the census counts expects, not what they expect, so a box left out of the sum
    (the wide tiles' three boxes on one barrier) would pass it; the set of the model's expect bytes is the set of
    the PTX's expect_tx immediates."""
    name, params, target = protocol.kernel
    ptx = catalog.compile(name, target, **params).ptx
    assert {op.nbytes for t in protocol.threads for op in t.ops if op.kind == "expect"} == _expect_tx_bytes(ptx)


def test_a_model_that_drifts_is_caught():
    before = P.models.clc_matmul(release="group", stages=6, subtiles=8, tiles=2)     # the kernel before the change
    ptx = catalog.compile("clc_matmul", "sm_100a").ptx
    wrong = {k for k, _, _, ok in P.compare(before, ptx) if not ok}
    assert {"init counts", "cluster_barrier"} <= wrong


@pytest.mark.parametrize("protocol", [p for p in MODELS if p.num_ctas > 1 and any(op.kind == "mma" for t in p.threads
                                                                                   for op in t.ops)],
                         ids=lambda p: p.name)
def test_commit_masks_are_the_ptx_masks(protocol):
    """The multicast mask of every tcgen05.commit (a 16-bit immediate) is the model's target set of
    the MMA that CTA 0 issues."""
    name, params, target = protocol.kernel
    lines = catalog.compile(name, target, **params).ptx.splitlines()
    masks = set()
    for i, line in enumerate(lines):
        m = re.search(r"tcgen05\.commit\S*multicast::cluster\.b64 \[[^\]]+\], (%rs\d+);", line)
        if m:
            movs = [re.search(rf"mov\.b16\s+{m.group(1)}, (\d+);", x) for x in lines[:i]]
            masks.add(int([x for x in movs if x][-1].group(1)))
    model = {sum(1 << c for c in {land[1] for land in op.lands})
             for t in protocol.threads if t.cta == 0 for op in t.ops if op.kind == "mma" and op.asynchronous}
    assert masks == model


def test_a_model_without_the_tails_drifts_from_the_kernel():
    """The producer tails are in the kernel: a model without them has fewer waits than the PTX."""
    d = P.kernel_depths("clc_matmul")
    ptx = catalog.compile("clc_matmul", "sm_100a").ptx
    rows = {k: (m, g) for k, m, g, _ in P.compare(P.models.clc_matmul(stages=d[0], acc_stages=d[1], subtiles=d[2], tiles=2,
                                                               tails=False), ptx)}
    model, compiled = rows["wait"]
    assert compiled - model == d[0] + d[1]                                # STAGES + ACC_STAGES tail waits
    assert all(m == g for k, (m, g) in rows.items() if k != "wait")


def _overlaps(a, b):
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


@pytest.mark.parametrize("params", [{}, {"cga_layout": ((1, 0), (2, 0))}, {"dtype": "bfloat16"}], ids=str)
def test_the_clc_staging_buffers_share_no_byte(params):
    """What c_smem shares, from Triton's own allocation: in chapter 5's kernel nothing. The epilogue's two
    staging buffers lie after the ring and before the barriers (the model keeps them a buffer of their own)."""
    alloc = P.allocation(catalog.compile("clc_matmul", "sm_100a", **params))
    staging = alloc.pop("c_bufs")
    assert staging[1] == 2 * cm.CONFIG["block_m"] * cm.CONFIG["epilogue_n"] * 2
    assert not [name for name, where in alloc.items() if _overlaps(staging, where)]
    assert staging[0] == alloc["b_bufs"][0] + alloc["b_bufs"][1] and staging[0] + staging[1] <= alloc["bar"][0]


@pytest.mark.parametrize("kernel, barriers_too", [("two_cta_mma", True), ("one_cta_mma", False)])
def test_chapter_4s_c_smem_lies_over_a_and_b_as_the_model_says(kernel, barriers_too):
    """In chapter 4's kernels c_smem starts at A's offset and covers A and B (in the pair kernel the two
    barriers too: they are invalidated first); protocols.ALIASES, which the tile model writes over, says so."""
    alloc = P.allocation(catalog.compile(kernel, "sm_100a"))
    c = alloc.pop("c_smem")
    over = {name for name, where in alloc.items() if _overlaps(c, where)}
    assert over == ({"a_smem", "b_smem", "bar", "bar_0"} if barriers_too else {"a_smem", "b_smem"})
    assert {f"{buf}_smem" for buf, _, _ in P.ALIASES["c_smem"]} == {"a_smem", "b_smem"}
    model = P.models.mma_tile(two_ctas=kernel == "two_cta_mma")
    assert all(op.kind != "write" or {w[1] for w in op.writes} == {"c_smem", "a", "b"}
               for t in model.threads for op in t.ops)
    kinds = [op.kind for op in model.threads[0].ops]
    assert kinds.index("invalidate") < kinds.index("write")                # the barriers go before c_smem comes


def _tail_lines(fn):
    """The source lines (in clc_matmul.py) of the waits after the partition's ``while has_work`` loop."""
    import inspect
    src, first = inspect.getsourcelines(fn.fn)
    loop = next(i for i, ln in enumerate(src) if ln.strip().startswith("while has_work"))
    return {first + i for i, ln in enumerate(src)
            if i > loop and ln.strip().startswith("mbarrier.wait(") and len(ln) - len(ln.lstrip()) == 8}


@pytest.mark.parametrize("params", [{}, {"cga_layout": ((1, 0), (2, 0))}], ids=str)
def test_the_producer_tails_wait_after_their_loops(params):
    """The loader waits STAGES phases of load_empty and the MMA partition ACC_STAGES phases of acc_empty after
    their loops: in the PTX those waits sit at the depth of the warp-specialize dispatch loop only (depth 1),
    outside the partitions' own loops (depth 2 and 3), one per unrolled iteration of the tail."""
    ptx = catalog.compile("clc_matmul", "sm_100a", **params).ptx
    workers = ptx.index("$L__BB0_1:")                                     # where the worker partitions start
    before = ptx[:workers].count("\n")
    waits = [(line, depth, int(src.split(":")[1])) for line, depth, src in P.try_waits(ptx)
             if line > before and src and src.startswith("clc_matmul.py")]
    loader, mma = _tail_lines(cm.load_partition), _tail_lines(cm.mma_partition)
    assert len(loader) == len(mma) == 1
    tails = [(depth, src) for _, depth, src in waits if src in loader | mma]
    assert sorted(tails) == sorted([(1, *loader)] * cm.CONFIG["stages"] + [(1, *mma)] * cm.CONFIG["acc_stages"])
    assert all(depth >= 2 for _, depth, src in waits if src not in loader | mma)   # every other wait is in a loop


@pytest.mark.parametrize("params", [{}, {"cga_layout": ((1, 0), (2, 0))}], ids=str)
def test_a_failed_answer_s_ctaid_is_never_read(params):
    """Shared.next_tile reads get_first_ctaid only when is_canceled said yes (PTX ISA, query_cancel: a failed
    answer's ctaid is undefined): each get_first_ctaid is in a block entered past `@!canceled bra`."""
    lines = catalog.compile("clc_matmul", "sm_100a", **params).ptx.splitlines()
    reads = [i for i, ln in enumerate(lines) if "query_cancel.get_first_ctaid" in ln]
    assert len(reads) == 2                                                # the loader's and the epilogue's
    for i in reads:
        branch = next(j for j in range(i - 1, -1, -1) if re.search(r"\bbra(\.uni)?\b", lines[j]))
        pred = re.match(r"\s*@(%p\d+) bra", lines[branch]).group(1)
        negated = next(re.search(r"not\.pred\s+" + pred + r", (%p\d+);", ln) for ln in lines[:branch][::-1]
                       if re.search(r"not\.pred\s+" + pred + ",", ln))
        canceled = negated.group(1)
        assert any(re.search(r"query_cancel\.is_canceled\.pred\.b128 " + canceled + ",", ln) for ln in lines[:branch])


@pytest.mark.parametrize("protocol", [p for p in MODELS if p.num_ctas > 1], ids=lambda p: p.name)
def test_every_cluster_kernel_ends_in_a_cluster_barrier(protocol):
    """The models' exit ("cluster": no CTA leaves before every thread of the cluster is done) is what Triton
    3.9 compiles: after the last non-relaxed cluster barrier only the TMEM dealloc, CTA barriers, the
    warp-specialize state and the return remain."""
    name, params, target = protocol.kernel
    lines = [ln.strip() for ln in catalog.compile(name, target, **params).ptx.splitlines()]
    last = max(i for i, ln in enumerate(lines) if ln == "barrier.cluster.wait.aligned;"
               and lines[i - 1] == "barrier.cluster.arrive.aligned;")
    rest = [ln for ln in lines[last + 1:lines.index("ret;", last)]
            if ln and not ln.startswith(("//", "$L", ".loc", "}"))]
    allowed = ("barrier.sync", "bar.sync", "st.shared", "bra.uni", "{", ".reg")
    assert protocol.exit == "cluster" and all(ln.startswith(allowed) or "tcgen05.dealloc" in ln for ln in rest), rest


@pytest.mark.parametrize("protocol", MODELS, ids=lambda p: p.name)
def test_model_does_the_kernels_operations_in_its_order(protocol):
    """The tie by order: every straight piece of the PTX (a turn of a loop body, the code before, between and after
    the loops, per partition) occurs in that order in the model's program of CTA 0."""
    assert P.order(protocol) == []


@pytest.mark.parametrize("protocol", [p for p in MODELS if any(op.kind == "store_wait" for t in p.threads for op in t.ops)],
                         ids=lambda p: p.name)
def test_model_keeps_the_kernels_store_wait_depths(protocol):
    model, ptx = P.store_wait_depths(protocol)
    assert model == ptx


@pytest.mark.mutants
def test_a_staging_buffer_reused_one_store_early_is_a_depth_mismatch(tmp_path):
    from multicta_kernels import clc_matmul as cm
    from multicta_kernels import lens
    fn = lens.variant(cm.epilogue_partition, folder=tmp_path, edits={"tma.store_wait(1)": "tma.store_wait(2)"})
    p = next(p for p in MODELS if p.kernel[0] == "clc_matmul")
    from multicta_kernels.cli import mutate
    m = mutate.Mutant("clc_matmul", "multicta_kernels.clc_matmul.epilogue_partition", "staging early", "test",
                      __import__("inspect").getsource(fn.fn), "")
    built = mutate.build(m.unit, m.source, ["clc_matmul"])
    ptx = lens.compile(catalog.spec("clc_matmul").__class__(**{**catalog.spec("clc_matmul").__dict__,
                                                               "fn": built[("multicta_kernels.clc_matmul",
                                                                            "clc_matmul_kernel")]}), "sm_100a").ptx
    assert P.store_wait_depths(p, ptx) == ({0, 1}, {0, 2})


def _tile_stream_with_late_release(tmp_path):
    """tile_stream_kernel with its release moved after the reload: the overwrite-before-release race of issue 25
    (every count still matches)."""
    from multicta_kernels import lens, multicast
    release = ('            with scope("release", INSTRUMENT):\n'
               '                release(slot, empty, go, phase, RELEASE)\n')
    fn = lens.variant(multicast.tile_stream_kernel, folder=tmp_path, edits={
        release: "", "    gl.store(out_ptr + gl.program_id(0), got)": release + "    gl.store(out_ptr + gl.program_id(0), got)"})
    return fn


@pytest.mark.parametrize("release", ["cluster", "mbarrier"])
def test_a_release_moved_after_the_reload_is_an_order_mismatch(tmp_path, release):
    from multicta_kernels import lens, multicast
    fn = _tile_stream_with_late_release(tmp_path)
    p = P.models.tile_stream(4, release, True, stages=4)
    name, params, target = p.kernel
    ptx = lens.compile(lens.with_kernel(catalog.spec(name, **params), fn), target).ptx
    assert all(ok for *_, ok in P.compare(p, ptx))          # the counts cannot see it
    bad = P.order(p, ptx)
    assert bad and bad[0][1][:2] == ["expect", "tma_load"] and len(bad[0][1]) > 2    # the reload, then the release
    assert P.order(p) == []                                   # the kernel as it is agrees
    assert multicast.tile_stream_kernel is not fn
