"""What chapters 4 and 5 teach beyond their kernels, checked on a CPU: the numbers their prose is generated
from, the claims of their comparison with the upstream tutorial that concern this book's kernels, and what
each "change it and see" variant does to the PTX.

Variants are the package's kernels with a textual edit, written to a module of their own (``gluon.jit``
reads a function's source from its file; notebooks.variant), so no kernel is retyped here.
"""
import inspect
import re
import textwrap
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from multicta_kernels import barriers, catalog, clc_matmul as cm, lens, multicast as mc, protocols, two_cta
from multicta_kernels.show import notebook
from multicta_kernels.show.fit import fit
from multicta_kernels.gluon import operands, ring, tile_order
from multicta_kernels.core import layouts
from multicta_kernels.barriers import BarrierLayoutModel
from nbcells import chapter_cells, code_cell_with, init_counts, variant


# ------------------------------------------------------------------------------------------ chapter 4

@pytest.mark.source_text
def test_twins_differ_in_two_lines_of_kernel_code():
    changed = notebook.changed_code_lines(two_cta.one_cta_mma_kernel, two_cta.two_cta_mma_kernel)
    assert changed == [("loaded = mbarrier.allocate_mbarrier()", "loaded = mbarrier.allocate_mbarrier(two_ctas=True)"),
                       ("mbarrier.init(done, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, "
                        "two_ctas=False))",
                        "mbarrier.init(done, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, "
                        "two_ctas=True))")]


def test_host_side_changes_six_layout_values():
    one, two = two_cta.tile_layouts(128, 128, 64, False), two_cta.tile_layouts(256, 128, 64, True)
    values = [(one[x].cga_layout, two[x].cga_layout) for x in "abc"]
    values += [(one["acc"].two_ctas, two["acc"].two_ctas), (one["acc"].cga_layout, two["acc"].cga_layout),
               (one["acc"].block, two["acc"].block), (one["num_ctas"], two["num_ctas"])]
    assert sum(a != b for a, b in values) == 6
    assert one["acc"].block == two["acc"].block                  # each CTA of the pair holds 128 rows


@pytest.mark.parametrize("acc_bases, multicast_count", [([(1, 0)], 1), ([(1, 0), (2, 0)], 2), ([(1, 0), (2, 0), (4, 0)], 4)])
def test_with_two_cta_layouts_only_multicast_changes_the_barrier_count(acc_bases, multicast_count):
    ops = operands.operand_cga_layouts(acc_bases, two_ctas=True)
    assert [protocols.commit_count(ops, m, t) for m in (False, True) for t in (False, True)] == \
        [1, 1] + [multicast_count] * 2


def test_per_cta_loaded_barrier_turns_the_pair_loads_into_cta_loads(tmp_path):
    mod = variant(tmp_path, "ch4_loaded_per_cta", two_cta.two_cta_mma_kernel, edits={
        "loaded = mbarrier.allocate_mbarrier(two_ctas=True)": "loaded = mbarrier.allocate_mbarrier()"})
    package = catalog.compile("two_cta_mma", "sm_100a")
    yours = lens.compile(replace(two_cta.two_cta_mma_spec(), fn=mod.two_cta_mma_kernel), "sm_100a")
    a, b = package.census(), yours.census()
    pair_load = "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
    cta_load = "cp.async.bulk.tensor.2d.cta_group::1.shared::cta.global.mbarrier::complete_tx::bytes"
    assert (a.get(pair_load, 0), a.get(cta_load, 0)) == (2, 0) and (b.get(pair_load, 0), b.get(cta_load, 0)) == (0, 2)
    assert a.get("mbarrier.arrive.expect_tx.shared::cluster.b64") == 1 == b.get("mbarrier.arrive.expect_tx.shared::cta.b64")
    assert init_counts(package.ptx) == {1: 1, 2: 1} and init_counts(yours.ptx) == {1: 2}


def test_done_count_of_two_changes_only_an_operand(tmp_path):
    mod = variant(tmp_path, "ch4_done_two", two_cta.two_cta_mma_kernel, edits={
        "mbarrier.init(done, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, two_ctas=True))":
            "mbarrier.init(done, count=2)"})
    package = catalog.compile("two_cta_mma", "sm_100a")
    yours = lens.compile(replace(two_cta.two_cta_mma_spec(), fn=mod.two_cta_mma_kernel), "sm_100a")
    assert package.census() == yours.census()
    assert init_counts(package.ptx) == {1: 1, 2: 1} and init_counts(yours.ptx) == {2: 2}
    # the ex-ch4-change solution: the census diff has just the init rows, one count 1 fewer, one count 2 more
    assert lens.census_changes(package.ptx, yours.ptx) == [["mbarrier.init.shared::cta.b64 (count 2)", 1, 2, 1],
                                                           ["mbarrier.init.shared::cta.b64 (count 1)", 1, 0, -1]]


def test_commit_descs_multicast_like_the_mma():
    """Chapter 4: tcgen05_commit(descs=...) reaches every CTA sharing the operands, as multicast=True does;
    without either the mask is the issuing pair's, computed at run time."""
    setters, masks = [], []
    for how in range(len(two_cta.COMMIT_WAYS)):
        ptx = lens.compile(two_cta.commit_demo_spec(how), "sm_100a").ptx
        lines = ptx.splitlines()
        at = [i for i, ln in enumerate(lines) if "tcgen05.commit" in ln]
        assert len(at) == 1
        reg = lines[at[0]].rsplit(",", 1)[1].strip(" ;")
        setters.append(next(ln.split()[0] + " " + ln.split(",")[-1].strip(" ;") for ln in reversed(lines[:at[0]])
                            if re.match(rf"\s*[\w.:]+\s+{re.escape(reg)},", ln)))
        masks.append(two_cta.commit_mask(ptx)[1])
    assert setters[0] == setters[2] == "mov.b16 15"
    assert setters[1].startswith("shl.b16") and setters[3].startswith("shl.b16")
    assert masks == [0b1111, 0b11, 0b1111, 0b11]
    with pytest.raises(ValueError, match="how is 0 to 3"):
        two_cta.commit_demo_spec(4)


def test_shared_linear_layout_examples():
    shape = [8, 4]
    contiguous = layouts.ownership(gl.SwizzledSharedLayout(1, 1, 1, [1, 0], cga_layout=[[1, 0]]), shape)
    linear = layouts.ownership(gl.SharedLinearLayout([[0, 1], [0, 2], [1, 0], [2, 0]], [[4, 0]]), shape)
    interleaved = layouts.ownership(gl.SharedLinearLayout([[0, 1], [0, 2], [2, 0], [4, 0]], [[1, 0]]), shape)
    assert (contiguous.cta == linear.cta).all() and (contiguous.reg == linear.reg).all()
    assert (interleaved.cta == np.arange(8)[:, None] % 2).all()
    assert (interleaved.reg[::2] == interleaved.reg[1::2]).all()     # odd rows sit where even rows sit, in CTA 1


def test_count_the_bytes_solution():
    """ex-ch4-bytes: each CTA expects 24576 bytes on the pair barrier; the pair barrier counts 49152."""
    ptx = catalog.compile("two_cta_mma", "sm_100a").ptx
    per_cta = (128 * 64 + 64 * 64) * 2                           # fp16: this CTA's rows of A and columns of B
    expects = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::(\w+)\.b64 _, \[[^\]]+\], (\d+);", ptx)
    assert per_cta == 24576 and expects == [("cluster", str(per_cta))]   # each CTA's own bytes, on the leader's
    pair = BarrierLayoutModel.of(mbarrier.MBarrierLayout.multicta(2, two_cta=True).cga_layout, 2)
    assert pair.group_size == 2 and pair.expect_bytes(per_cta) == 49152
    facts = barriers.expect_facts(pair.bases, 2, per_cta, target="sm_100a")
    assert facts["remote"] and facts["init_count"] * facts["bytes_per_arrival"] == 49152
    line = next(ln for ln in ptx.splitlines() if "mbarrier.arrive.expect_tx" in ln)
    address = re.search(r"\[(%r\d+)\]", line).group(1)
    assert re.search(rf"and\.b32\s+{address}, %r\d+, -16777232;", ptx)          # the leader's barrier: CTA bit cleared
    chain = lens.predicate_chain(ptx, "mbarrier.arrive.expect_tx")
    assert not any("%cluster_ctarank" in text for _, text in chain)                  # every CTA issues its expect
    assert 2 in lens.mbarrier_init_counts(ptx)                                       # loaded: count 2 on the leader
    solution = next(src for src, c in chapter_cells("04-two-cta-mma.ipynb") if "{solution} ex-ch4-bytes" in src)
    assert "(8192 + 4096) × 2 = 24576 bytes" in solution and "Nothing is multiplied" in solution
    assert "2 × 24576 = 49152 bytes" in solution and "multiplies" not in solution


def test_a_wider_pair_solution():
    """ex-ch4-wide: both kernels reserve 64 KiB; the operands per CTA are 32 KiB in the pair, 48 KiB alone."""
    two = catalog.compile("two_cta_mma", "sm_100a", N=256)
    one = lens.compile(two_cta.one_cta_mma_spec(N=256), "sm_100a")
    assert two.shared_bytes == one.shared_bytes == 65536
    assert two_cta.intensity(256, 256, 64, True)["smem_bytes_per_cta"] == 32768
    assert two_cta.intensity(128, 256, 64, False)["smem_bytes_per_cta"] == 49152
    assert 128 * 256 * 2 == 65536                                # the output staging tile, per CTA in both
    solution = next(src for src, c in chapter_cells("04-two-cta-mma.ipynb") if "{solution} ex-ch4-wide" in src)
    assert "# 65536 65536" in solution and "# 32768 49152" in solution


def test_one_cta_group_is_the_isa_rule_and_two_of_four_cluster_barriers_concern_tensor_memory():
    """Chapter 4: "All tcgen05 instructions within a kernel must specify the same value for the .cta_group
    qualifier" is the PTX ISA's (under tcgen05.alloc), and so is the peer CTA being launched before a 2-CTA
    allocation; of the pair kernel's four cluster barriers, the ones before alloc and before dealloc."""
    ptx = catalog.compile("two_cta_mma", "sm_100a").ptx
    groups = {re.search(r"cta_group::(\d)", ln).group(1) for _, op, ln in lens.instructions(ptx)
              if op.startswith("tcgen05.") and "cta_group" in op}
    assert groups == {"2"}
    ins = [op for _, op, _ in lens.instructions(ptx)]
    arrives = [i for i, op in enumerate(ins) if op.startswith("barrier.cluster.arrive")]
    nxt = [next(op for op in ins[i + 2:] if op.startswith(("tcgen05.alloc", "tcgen05.dealloc", "st.shared")))
           for i in arrives]
    prev = [next((op for op in reversed(ins[:i]) if op.startswith("fence.mbarrier_init")), "") for i in arrives]
    assert len(arrives) == 4 and [n.split(".")[1] for n in nxt if n.startswith("tcgen05")] == ["alloc", "dealloc"]
    assert ins[arrives[1]] == "barrier.cluster.arrive.relaxed.aligned" and prev[1].startswith("fence.mbarrier_init")
    assert nxt[2].startswith("st.shared")                          # c_smem, over the operands the pair's MMA read
    text = "\n".join(src for src, c in chapter_cells("04-two-cta-mma.ipynb") if c["cell_type"] == "markdown")
    assert "a PTX ISA rule" in text and "the upstream tutorial's rule;" not in text
    assert "make sure that peer CTA is launched and is still\nactive" in text and "Only two of the four" in text


def test_chapter_4_reads_b_once_per_pair_and_cites_the_merged_pull_request():
    text = "\n".join(src for src, c in chapter_cells("04-two-cta-mma.ipynb") if c["cell_type"] == "markdown")
    assert "reads the other CTA's half of B" not in text and "each half of B is\nread once" in text
    assert "pull\nrequest 9697" in text and "1.07 to 1.20" in text and "#9682" not in text


# ------------------------------------------------------------------------------------------ chapter 5

def test_l2_capacities_the_chapter_states():
    """Row-major first reads every block once at exactly one wave's footprint; the local orders later;
    "from 156 blocks row-major is as good as any order" (the chapter's old text) is false."""
    m = n = k = 12
    wave = 16
    orders = {"row": tile_order.row_major(m, n), "grouped": tile_order.grouped(m, n, 4),
              "snake": tile_order.planar_snake(m, n, 0, 4)}

    def loads(name, cap):
        return tile_order.lru_dram_loads(orders[name], k, cap, wave)
    least = tile_order.blocks_loaded(orders["row"], k)["total"]
    first = {name: next(c for c in range(1, 401) if loads(name, c) == least) for name in orders}
    assert first["row"] == tile_order.blocks_loaded(orders["row"][:wave], k)["total"] == 168
    assert first["grouped"] == first["snake"] == 240
    assert loads("row", 156) > loads("snake", 156)
    assert loads("row", 168) < loads("snake", 168) < loads("grouped", 168)
    assert all(loads("snake", c) <= loads("grouped", c) for c in range(8, 401, 8))



@pytest.mark.parametrize("delta, kind", [(1, "deadlock"), (-1, "phase overrun")])
def test_protocol_checker_finds_a_wrong_reader_count(delta, kind):
    with mock.patch.object(cm, "CLC_READERS", gl.constexpr(cm.CLC_READERS.value + delta)):
        model = protocols.models.clc_matmul(slots_only=True, tiles=3)
    assert protocols.check(model).kind == kind


def test_triton_inserts_the_epilogue_fence_when_it_is_missing(tmp_path):
    """Chapter 5's comparison: the tutorial writes no fence_async_shared before its TMA stores; compiled without
    ours, this kernel has the same async-proxy fences."""
    mod = variant(tmp_path, "ch5_no_fence", cm.epilogue_partition, cm.clc_matmul_kernel, drop="fence_async_shared()")
    package = catalog.compile("clc_matmul", "sm_100a")
    yours = lens.compile(replace(cm.clc_matmul_spec(), fn=mod.clc_matmul_kernel), "sm_100a")
    assert "fence_async_shared" not in inspect.getsource(mod.epilogue_partition.fn)
    fences = [op for op in package.census() if op.startswith("fence.proxy.async")]
    assert fences and {op: package.census()[op] for op in fences} == {op: yours.census().get(op, 0) for op in fences}


def test_stage_of_divides_by_a_constant_without_a_division():
    ptx = catalog.compile("clc_matmul", "sm_100a").ptx
    assert cm.CONFIG["stages"] & (cm.CONFIG["stages"] - 1)           # not a power of two: a real division
    lines = ptx.splitlines()
    hits = [i for i, ln in enumerate(lines) if "mul.hi.s32" in ln]

    def origin(i):             # the innermost source line: the last .loc above (the tails' stage_of calls share one)
        return next(ln.split("//")[-1].strip() for ln in reversed(lines[:i]) if ln.strip().startswith(".loc"))
    assert hits and all(origin(i).startswith("ring.py") for i in hits)


@pytest.mark.parametrize("obj", [cm.clc_matmul_kernel, cm.Shared.tile, cm.Shared.next_tile, tile_order.snake_tile,
                                 cm.scheduler_partition, cm.load_partition, cm.mma_partition, cm.epilogue_partition,
                                 ring.stage_of])
def test_every_piece_the_chapter_renders(obj):
    assert notebook.source(obj).data.startswith("@gluon.jit")
    assert notebook.source(cm.Shared, stop="@gluon.jit").data.startswith("@gluon.aggregate")


@pytest.mark.source_text
@pytest.mark.parametrize("notebook_file, kernel, copy, changes", [
    ("02-mbarriers.ipynb", barriers.exchange_kernel, "my_exchange_kernel", 1),
    ("03-tma-multicast.ipynb", mc.tile_stream_kernel, "my_tile_stream", 2),           # both loads
    ("04-two-cta-mma.ipynb", two_cta.two_cta_mma_kernel, "my_kernel", 1),
    ("05-clc-matmul.ipynb", cm.clc_matmul_kernel, "my_clc_kernel", 1)])
def test_the_readers_copy_is_the_package_kernel_with_one_change(notebook_file, kernel, copy, changes):
    """Each chapter's "change it and see" cell holds the package's kernel, docstring, comments and timeline scopes
    included, with one change on ``changes`` lines (each marked CHANGED): when the package's kernel changes, its
    copy must follow."""
    source = code_cell_with(notebook_file, f"def {copy}(")
    mine = source[source.index("@gluon.jit"):]
    if "end of your copy" in mine:
        mine = mine[:mine.rindex("\n", 0, mine.index("end of your copy"))]
    mine = mine.splitlines()
    # as the book shows the package's kernel: fitted to the code column (show.fit), like the copy
    theirs = fit(textwrap.dedent(inspect.getsource(kernel.fn))).splitlines()
    assert len(mine) == len(theirs)
    old, new = f"def {kernel.fn.__name__}(", f"def {copy}("
    different = []
    for a, b in zip(theirs, mine):
        a = a.replace(old, new) if a.startswith(old) else a
        if a.split() != b.split():
            different.append((a, b))
    assert len(different) == changes and all("# CHANGED" in b for _, b in different), different
