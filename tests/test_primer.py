"""The Gluon primer on the CPU: its models agree with Triton, its kernels compile to what the
chapter says they do, its protocols pass the checker (and its seeded bugs fail it), its wrappers
refuse bad input before the hardware and walk to their launches on a pretended H200 and B200, and
its notebook keeps the book's conventions."""
import dataclasses
import itertools
import random

import numpy as np
import pytest
import torch

from multicta_kernels import catalog, lens, primer, protocols
from multicta_kernels.core import dryrun, layouts
from multicta_kernels import protocols as P
from multicta_kernels.core.hardware import UnsupportedHardwareError
from triton.experimental.gluon import language as gl


# ------------------------------------------------------------------ the BlockedLayout model

def _factor_pairs(n):
    return [(a, n // a) for a in (1, 2, 4, 8, 16, 32) if n % a == 0 and a <= n]


def _random_blocked(rng):
    """A 1-, 2- or 3-D BlockedLayout of 1 to 8 warps, a shape of whole tiles (1 or 2 repeats)."""
    dims = rng.choice([1, 2, 2, 2, 3])
    num_warps = rng.choice([1, 2, 4, 8])
    if dims == 1:
        tpw, wpc = [32], [num_warps]
    elif dims == 2:
        tpw, wpc = list(rng.choice(_factor_pairs(32))), list(rng.choice(_factor_pairs(num_warps)))
    else:
        a, b = rng.choice(_factor_pairs(32))
        c, d = rng.choice(_factor_pairs(b))
        tpw = [a, c, d]
        wpc = [1, *rng.choice(_factor_pairs(num_warps))]
    spt = [rng.choice([1, 2, 4]) for _ in range(dims)]
    order = rng.sample(range(dims), dims)
    shape = [s * t * w * rng.choice([1, 2]) for s, t, w in zip(spt, tpw, wpc)]
    return spt, tpw, wpc, order, shape


@pytest.mark.parametrize("seed", range(12))
def test_blocked_owner_is_tritons_view(seed):
    """primer.blocked_owner gives, for every element, the warp, lane and register of Triton's own
    format_tensor_view (layouts.ownership)."""
    spt, tpw, wpc, order, shape = _random_blocked(random.Random(seed))
    own = layouts.ownership(gl.BlockedLayout(spt, tpw, wpc, order), shape)
    assert (own.copies == 1).all(), f"one owner per element: {spt} {tpw} {wpc} {shape}"
    for index in itertools.product(*(range(n) for n in shape)):
        want = (own.warp[index], own.lane[index], own.reg[index])
        got = primer.blocked_owner(spt, tpw, wpc, order, shape, index)
        assert got == want, f"({spt}, {tpw}, {wpc}, {order}) {shape} at {index}: {got} != {want}"


def test_blocked_owner_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="whole tiles only"):
        primer.blocked_owner([1, 4], [4, 8], [2, 2], [1, 0], [4, 64], (0, 0))
    with pytest.raises(ValueError, match="multiply to 32"):
        primer.blocked_owner([1, 4], [4, 4], [2, 2], [1, 0], [16, 64], (0, 0))
    with pytest.raises(ValueError, match="one entry per dimension"):
        primer.blocked_owner([1, 4], [4, 8], [2, 2], [1, 0], [16, 64], (0,))


def test_the_chapters_layout_repeats_its_tile():
    """The chapter's first layout on [16, 64]: an [8, 64] tile, twice; 8 registers per thread;
    lane 1 four columns right of lane 0, lane 8 a row down, warp 1 at column 32, warp 2 at row 4."""
    own = layouts.ownership(gl.BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0]), [16, 64])
    assert own.reg.max() + 1 == 8
    assert own.lane[0, 4] == 1 and own.lane[1, 0] == 8, "lanes along the row, then down"
    assert own.warp[0, 32] == 1 and own.warp[4, 0] == 2, "warps along the row, then down"
    assert own.reg[0, :4].tolist() == [0, 1, 2, 3] and own.reg[8, :4].tolist() == [4, 5, 6, 7]
    assert (own.lane[:8] == own.lane[8:]).all() and (own.warp[:8] == own.warp[8:]).all()


# ------------------------------------------------------------------ shared memory

def test_the_swizzle_removes_the_column_reads_bank_conflicts():
    """Warp 0 reading the transpose's tile in column_layout: 8 wavefronts per read from the plain
    buffer (the 8 rows a read touches share their banks), 1 from the swizzled one."""
    cols = layouts.ownership(primer.column_layout(), [32, 32])
    plain = layouts.ownership(primer.smem_layout(False), [32, 32])
    swizzled = layouts.ownership(primer.smem_layout(True), [32, 32])
    assert (plain.reg == np.arange(32 * 32).reshape(32, 32)).all(), "the plain buffer is row-major"
    assert primer.bank_conflicts(cols, plain) == [8] * 8
    assert primer.bank_conflicts(cols, swizzled) == [1] * 8
    for r in range(32):                                   # a swizzle permutes each row's words
        assert sorted(swizzled.reg[r]) == list(range(32 * r, 32 * r + 32))


def test_bank_conflicts_counts_words_not_elements():
    """Two fp16 values share a 4-byte word: a warp reading one column of a plain [32, 16] fp16
    buffer touches rows 32 bytes apart, 4 banks, 8 words each."""
    down = layouts.ownership(gl.BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1]), [32, 16])
    plain = layouts.ownership(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), [32, 16])
    assert primer.bank_conflicts(down, plain, elem_bytes=2) == [8] * 4
    assert primer.bank_conflicts(down, plain, elem_bytes=4) == [16] * 4


def test_bank_conflicts_refuses_two_shapes():
    with pytest.raises(ValueError, match="different shapes"):
        primer.bank_conflicts(layouts.ownership(primer.column_layout(), [32, 32]),
                              layouts.ownership(primer.smem_layout(), [32, 64]))


def test_reads_are_four_bytes_wide_where_the_model_counts_them():
    """bank_conflicts models 4-byte accesses: both shared variants read with ld.shared.b32."""
    for how in ("shared", "shared-unswizzled"):
        ops = catalog.compile("primer_transpose", "sm_90a", how=how).census()
        reads = {op: n for op, n in ops.items() if op.startswith("ld.shared")}
        assert reads == {"ld.shared.b32": 8}, f"{how}: {reads}"


# ------------------------------------------------------------------ the transpose in the lens

@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_convert_layout_is_a_trip_through_shared_memory(target):
    """Without a conversion the transposed stores are scalar; with gl.convert_layout they are
    16-byte vectors, paid for with a shared-memory round trip (st.shared, bar.sync, ld.shared) in a
    4 KiB buffer (one fp32 tile); the hand-written shared buffer compiles to the same traffic."""
    marks = ["ld.global.v4.b32", "st.global.b32", "st.global.v4.b32", "st.shared", "ld.shared",
             "bar.sync"]
    k = {how: catalog.compile("primer_transpose", target, how=how) for how in primer.HOW}
    plain, conv, shared = (k[h].census(marks) for h in ("registers", "convert", "shared"))
    assert plain["st.global.v4.b32"] == 0 and plain["st.global.b32"] == 8, plain
    assert plain["st.shared"] == 0, plain
    assert conv["st.global.v4.b32"] == 2 and conv["st.global.b32"] == 0
    assert conv["st.shared"] > 0 and conv["ld.shared"] > 0 and conv["bar.sync"] == 1
    assert k["convert"].shared_bytes == primer.BLOCK * primer.BLOCK * 4 == k["shared"].shared_bytes
    assert shared == conv
    assert k["registers"].shared_bytes == 0


def test_a_layout_for_the_wrong_warp_count_does_not_compile():
    """warps_per_cta must multiply to num_warps: the lens reports the compiler's one line."""
    s = primer.transpose_spec("convert")
    with pytest.raises(lens.LensCompileError, match="layout"):
        lens.compile(dataclasses.replace(s, options={"num_warps": 8}), "sm_90a")


# ------------------------------------------------------------------ TMA and the ring in the lens

@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_ring_expects_one_tile_and_waits_every_iteration(target):
    k = catalog.compile("primer_tma_ring", target)
    ops = lens.operand_census(k.ptx)
    tile_bytes = primer.TMA_BLOCK[0] * primer.TMA_BLOCK[1] * 2
    expect = f"mbarrier.arrive.expect_tx.shared::cta.b64 ({tile_bytes} bytes)"
    assert ops[expect] == primer.STAGES + 1, ops
    assert ops["mbarrier.init.shared::cta.b64 (count 1)"] == primer.STAGES
    once, looped = lens.per_iteration(k.ptx, ("mbarrier.try_wait",))["mbarrier.try_wait"]
    assert (once, looped) == (0, 1), "the wait runs in the tile loop"
    assert k.shared_bytes >= (primer.STAGES + 1) * tile_bytes


def test_the_compiler_syncs_the_reads_before_the_refill():
    """In the loop: every thread's ld.shared of the slot, then a CTA barrier and a proxy fence, then
    the TMA load that refills the slot (an async-proxy write after reads of the generic proxy)."""
    ptx = catalog.compile("primer_tma_ring", "sm_90a").ptx
    body = [ln.strip() for ln in lens.loop_body(ptx).splitlines()]
    last_read = max(i for i, ln in enumerate(body) if ln.startswith("ld.shared"))
    refill = next(i for i, ln in enumerate(body) if "bulk.tensor.2d.shared::cta.global" in ln)
    between = body[last_read:refill]
    assert any(ln.startswith("bar.sync") for ln in between), "no CTA barrier before the refill"
    assert any(ln.startswith("fence.proxy.async") for ln in between), "no proxy fence before it"


def test_the_explicit_proxy_fence_changes_nothing_in_3_9():
    """The chapter says the compiler places the fence before the TMA store itself: without the line
    the PTX has the same instructions."""
    s = primer.tma_ring_spec()
    bare = lens.variant(primer.tma_ring_kernel, drop="fence_async_shared()")
    assert lens.census_changes(lens.compile(s, "sm_90a").ptx,
                               lens.compile(lens.with_kernel(s, bare), "sm_90a").ptx) == []


@pytest.mark.parametrize("name", ["primer_tma_ring", "primer_ws_scale"])
def test_a_single_tile_compiles(name):
    """num_tiles = tiles_n = 1 become constants at launch (Triton specialises integers equal to 1):
    the kernels compile that way too, and still wait for their one tile."""
    s = lens.specialise(catalog.spec(name), num_tiles=1, tiles_n=1)
    assert s.signature["num_tiles"] == s.signature["tiles_n"] == "constexpr"
    assert "mbarrier.try_wait.parity" in lens.compile(s, "sm_90a").ptx


def test_the_consumers_warps_sync_before_one_thread_frees_the_slot():
    """In the consumer partition the compiler puts a barrier of its 128 threads (bar.sync 0, 128)
    right before the one arrive on `empty`: all four warps have read the slot when it is freed."""
    lines = [ln.strip() for ln in catalog.compile("primer_ws_scale", "sm_90a").ptx.splitlines()]
    at = next(i for i, ln in enumerate(lines) if "mbarrier.arrive.shared::cta" in ln)
    near = [ln for ln in lines[at - 3:at] if ln.startswith("bar.sync")]
    assert near == ["bar.sync \t0, 128;"], lines[at - 3:at + 1]


def test_the_warp_specialised_kernel_runs_eight_warps():
    """4 default warps and 1 producer warp, rounded up to a multiple of 4: .reqntid 256."""
    k = catalog.compile("primer_ws_scale", "sm_90a")
    assert ".reqntid 256" in k.ptx
    assert "num_warps(1)" in k.ttgir and k.ttgir.count("num_warps(") == 1, "one 1-warp worker"


# ------------------------------------------------------------------ the protocols

def test_ring_schedule_flips_each_slots_parity():
    rows = primer.ring_schedule(6, 2)
    got = [(r["slot"], r["parity"]) for r in rows]
    assert got == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0), (1, 0)], got
    assert [r["completed"] for r in rows if r["slot"] == 0] == [1, 2, 3]
    with pytest.raises(ValueError, match="tiles must be an integer from 1 to .*, got 0"):
        primer.ring_schedule(0, 2)


def test_the_rings_pass_the_checker_and_their_bugs_do_not():
    assert P.check(protocols.models.tma_ring(4, 2)).ok
    assert P.check(protocols.models.tma_ring(5, 3)).ok
    assert P.check(protocols.models.tma_ring(4, 2, flip=False)).kind == "phase overrun"
    assert P.check(protocols.models.ws_ring(4, 2)).ok
    assert P.check(protocols.models.ws_ring(4, 2, producer_flips=False)).kind == "deadlock"
    assert P.check(protocols.models.ws_ring(4, 2, free="never")).kind == "deadlock"
    assert P.check(protocols.models.ws_ring(4, 2, free="before")).kind == "overwrite before release"
    with pytest.raises(ValueError, match="free must be"):
        protocols.models.ws_ring(free="sometimes")


@pytest.mark.parametrize("build", [protocols.models.tma_ring, protocols.models.ws_ring], ids=["ring", "ws"])
def test_the_models_have_the_kernels_code_sites(build):
    rows = P.compare(build())
    assert all(ok for *_, ok in rows), "\n".join(f"{k:16s} model {m!s:30s} PTX {g}"
                                                 for k, m, g, _ in rows)


# ------------------------------------------------------------------ the wrappers

BAD = [
    (lambda: primer.transpose(torch.randn(2, 3, 4)), ValueError, "2-D torch tensor"),
    (lambda: primer.transpose(torch.zeros(4, 4, dtype=torch.int32)), TypeError, "float16 or bf"),
    (lambda: primer.transpose(torch.randn(0, 4)), ValueError, "at least one row"),
    (lambda: primer.transpose(torch.randn(4, 4), how="magic"), ValueError, "how must be one of"),
    (lambda: primer.transpose(torch.randn(4, 6), out=torch.empty(4, 6)), ValueError, r"\(6, 4\)"),
    (lambda: primer.tma_scale(torch.randn(4, 7).half()), ValueError, "16-byte boundaries"),
    (lambda: primer.tma_scale(torch.randn(4, 8).double()), TypeError, "bfloat16 or float32"),
    (lambda: primer.tma_scale(torch.randn(8, 16), stages=0), ValueError, "stages must be"),
    (lambda: primer.ws_scale(torch.randn(8, 16), stages=True), ValueError, "stages must be"),
    (lambda: primer.ws_scale(torch.randn(8, 16), out=torch.empty(8, 8)), ValueError, "out must be"),
    (lambda: primer.tma_scale(torch.randn(8, 16), block=(64, 3)), ValueError, "powers of two"),
]


@pytest.mark.parametrize("call, error, message", BAD, ids=[m for _, _, m in BAD])
def test_bad_input_is_refused_in_one_line_before_the_hardware(call, error, message):
    with pytest.raises(error, match=message) as e:
        call()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("call", [lambda: primer.transpose(torch.randn(4, 4)),
                                  lambda: primer.tma_scale(torch.randn(8, 16)),
                                  lambda: primer.ws_scale(torch.randn(8, 16))],
                         ids=["transpose", "tma", "ws"])
def test_without_a_gpu_good_input_is_refused_by_the_hardware_check(call):
    if dryrun.active() is None and not torch.cuda.is_available():
        with pytest.raises(UnsupportedHardwareError, match="sm_90 and newer"):
            call()


@pytest.mark.parametrize("capability, name", [((9, 0), "NVIDIA H200"), ((10, 0), "NVIDIA B200")])
def test_the_wrappers_walk_to_their_launches(capability, name):
    """With the GPU pretended, each wrapper is followed to its launch: the grid, warps and shared
    memory the chapter quotes, descriptors checked as cuTensorMapEncodeTiled would, nothing run."""
    x = torch.randn(70, 33)
    h = torch.randn(100, 72, dtype=torch.float16)
    with dryrun.dry_run(capability, name, 132) as s:
        for how in primer.HOW:
            out = torch.full((33, 70), float("nan"))
            primer.transpose(x, 2.0, how=how, out=out)
            assert torch.isnan(out).all(), "a dry run launches nothing"
        primer.tma_scale(h)
        primer.ws_scale(torch.randn(1, 8, dtype=torch.float16), stages=3)
        for dtype in (torch.float16, torch.bfloat16):        # every kernel compiles for each dtype
            for how in primer.HOW:
                primer.transpose(x.to(dtype), 2.0, how=how)
            primer.tma_scale(torch.randn(64, 64).to(dtype), stages=1)
            primer.ws_scale(torch.randn(64, 64).to(dtype))
        primer.tma_scale(torch.randn(64, 64))
        primer.ws_scale(torch.randn(64, 64))
    t, _, _, _, ring, ws = s.launches[:6]
    assert (t.grid, t.num_warps, t.num_ctas) == ((3, 2), 4, 1)
    assert ring.kernel == "tma_ring_kernel" and ring.grid == (1,) and ring.num_warps == 4
    assert ws.kernel == "ws_scale_kernel" and ws.num_warps == 8
    assert ring.signature["num_tiles"] == "i32", "4 tiles: a runtime value"
    assert ws.signature["num_tiles"] == "constexpr", "1 tile: Triton makes it a constant"
    assert ring.shared >= 3 * primer.TMA_BLOCK[0] * primer.TMA_BLOCK[1] * 2


def test_the_doctor_check_walks_too():
    from multicta_kernels.cli import selftests
    with dryrun.dry_run((9, 0), "NVIDIA H200", 132) as s:
        detail = selftests.check_primer()
    assert "transposes" in detail and len([ln for ln in s.launches if ln.launched]) == 8
    assert len(s.skipped) == 8, "every comparison of the check was skipped: nothing ran"


# ------------------------------------------------------------------ the chapter's notebook

NOTEBOOK = "00b-gluon-primer.ipynb"


def _cells():
    from nbcells import chapter_cells
    return chapter_cells(NOTEBOOK)


def _code():
    import ast
    return [(src, c, ast.parse(src)) for src, c in _cells() if c["cell_type"] == "code"]


def test_the_map_links_every_section_in_order():
    import re
    text = "\n".join(src for src, c in _cells() if c["cell_type"] == "markdown")
    targets = re.findall(r"^\((pr-[a-z-]+)\)=$", text, flags=re.M)
    assert targets and re.findall(r"\]\(#(pr-[a-z-]+)\)", text) == targets, targets


def test_every_glue_is_quoted_and_every_quote_glued():
    import ast
    import re
    quoted = {m for src, c in _cells() if c["cell_type"] == "markdown"
              for m in re.findall(r"\{glue:text\}`(\w+)`", src)}
    glued = {node.args[0].value for _, _, tree in _code() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "glue"}
    assert quoted == glued, f"quoted only: {quoted - glued}; glued only: {glued - quoted}"


def test_every_assert_says_what_failed():
    import ast
    bare = [ast.unparse(n)[:80] for _, _, tree in _code() for n in ast.walk(tree)
            if isinstance(n, ast.Assert) and n.msg is None]
    assert not bare, f"asserts without a message: {bare}"


def test_code_fits_the_column_and_figures_hide_their_code():
    import ast
    for src, c, tree in _code():
        if "colab" in c["metadata"].get("tags", []):
            continue                           # the same in every chapter (test_notebook_setup.py)
        long = [ln for ln in src.splitlines() if len(ln) > 100]
        assert not long, f"cell {c['id']}: lines over 100 characters: {long}"
        if "plt.subplots(" in src:
            tags = c["metadata"].get("tags", [])
            assert "hide-input" in tags, f"cell {c['id']} draws: tag it hide-input"
        last = tree.body[-1] if tree.body else None
        glue = (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and getattr(last.value.func, "attr", None) == "glue")
        assert not glue, f"cell {c['id']} ends with glue (its value is printed)"


def test_live_cells_ask_for_their_feature():
    """A cell that launches a primer kernel outside a dry run does so under gpu.has(CLUSTERS)."""
    import ast
    launches = ("transpose", "tma_scale", "ws_scale")
    for src, c, tree in _code():
        for node in tree.body:
            calls = {n.func.attr for n in ast.walk(node) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr in launches
                     and getattr(n.func.value, "id", None) == "primer"}
            if not calls:
                continue
            guarded = isinstance(node, ast.If) and ast.unparse(node.test) == "gpu.has(CLUSTERS)"
            dry = isinstance(node, ast.With) and "dryrun.dry_run" in ast.unparse(node.items[0])
            assert guarded or dry, f"cell {c['id']} launches {calls} without asking for CLUSTERS"
