"""What chapters 5 and 6 claim beyond their kernels, checked on a CPU: the comparison of the tile order with the
upstream tutorial's, the "change it and see" variants of chapter 5's kernel, and that chapter 6's timeline scopes
compile to nothing when they are off.

Variants are the package's kernels with a textual edit, written to a module of their own (``gluon.jit`` reads a
function's source from its file; notebooks.variant), so no kernel is retyped here.
"""
import inspect
import types
from dataclasses import replace
from unittest import mock

import pytest
from triton.experimental.gluon import language as gl

from multicta_kernels import catalog, clc_matmul as cm, hopper_matmul as hm, lens, protocols, results, two_cta
from multicta_kernels.gluon import tile_order
from multicta_kernels.measure import traces
from nbcells import init_counts, variant


# ------------------------------------------------------------------------------------------ chapter 5

def upstream_planar_snake(lin, m_tiles, n_tiles, minor_dim, width):
    """The order of the upstream tutorial's ``_planar_snake`` (python/tutorials/gluon/14-multicta.py at 00a287a),
    in our words: it computes a position as if ``lin`` were in a full band of ``width`` and one as if it were in the
    partial last band, and keeps the first when ``lin`` lies before the partial band's first tile."""
    major_size, minor_size = (n_tiles, m_tiles) if minor_dim == 0 else (m_tiles, n_tiles)
    full_bands = minor_size // width
    in_full_bands = full_bands * width * major_size
    band = lin // (width * major_size)

    def turn(j):                                   # every other band walks the major dimension backwards
        return j if band % 2 == 0 else major_size - 1 - j
    full = band * width + lin % width, turn((lin // width) % major_size)
    partial_width = minor_size - full_bands * width if minor_size > full_bands * width else 1
    rest = lin - in_full_bands
    partial = band * width + rest % partial_width, turn((rest // partial_width) % major_size)
    minor, major = full if lin < in_full_bands else partial
    return (minor, major) if minor_dim == 0 else (major, minor)


def test_snake_tile_gives_the_upstream_order_on_every_grid_up_to_24_by_24():
    """Chapter 5: "we compared the two on every grid up to 24 x 24 tiles and every width from 1 to 16". The
    kernel's own snake_tile source runs with Python stand-ins for gl.minimum and gl.where."""
    fn = tile_order.snake_tile.fn
    g = fn.__globals__
    saved = g["gl"]
    g["gl"] = types.SimpleNamespace(minimum=min, where=lambda c, a, b: a if c else b)
    compared = 0
    try:
        for m in range(1, 25):
            for n in range(1, 25):
                for d in (0, 1):
                    for w in range(1, 17):
                        ours = [fn(lin, m, n, d, w) for lin in range(m * n)]
                        assert ours == [upstream_planar_snake(lin, m, n, d, w) for lin in range(m * n)], (m, n, d, w)
                        compared += 1
    finally:
        g["gl"] = saved
    assert compared == 24 * 24 * 2 * 16
    # The transcription is not vacuous: a partial last band, walked backwards, where a naive formula goes wrong.
    assert upstream_planar_snake(6, 3, 3, 0, 2) == (2, 2) and tile_order.planar_snake(3, 3, 0, 2)[6:] == [(2, 2), (2, 1),
                                                                                                        (2, 0)]


@pytest.mark.parametrize("delta", [-1, 1])
def test_reader_count_off_by_one_compiles_to_the_same_instructions(tmp_path, delta):
    """ex-ch5-change: with count=CLC_READERS - 1 (or + 1) "again only the init counts change"."""
    mod = variant(tmp_path, f"ch5_readers_{'minus' if delta < 0 else 'plus'}_one", cm.clc_matmul_kernel, edits={
        "count=CLC_READERS)": f"count=CLC_READERS {'-' if delta < 0 else '+'} 1)"})
    package = catalog.compile("clc_matmul", "sm_100a")
    yours = lens.compile(replace(cm.clc_matmul_spec(), fn=mod.clc_matmul_kernel), "sm_100a")
    assert package.census() == yours.census()
    readers = cm.CLC_READERS.value
    want = init_counts(package.ptx)
    assert want[readers + delta] == 0                # no other barrier has that count: the change is visible
    want[readers + delta] = want.pop(readers)
    assert init_counts(yours.ptx) == want


@pytest.mark.parametrize("delta, kind", [(1, "deadlock"), (-1, "phase overrun")])
def test_recount_models_the_changed_kernel(delta, kind):
    """Chapter 5's cell and exercise model a changed clc_empty count with Protocol.recount: the same model, step
    for step, as one built from the kernel's constant set to that count."""
    readers = cm.CLC_READERS.value + delta
    recounted = protocols.check(protocols.models.clc_matmul(slots_only=True, tiles=3).recount("clc_empty", readers))
    with mock.patch.object(cm, "CLC_READERS", gl.constexpr(readers)):
        rebuilt = protocols.check(protocols.models.clc_matmul(slots_only=True, tiles=3))
    assert recounted.kind == rebuilt.kind == kind
    assert recounted.trace == rebuilt.trace and recounted.message == rebuilt.message


# ------------------------------------------------------------------------------------------ chapter 6

def test_hopper_scopes_off_compile_to_the_plain_kernel():
    """Chapter 6: "Without Triton's profiler (proton) recording, the scopes compile to nothing ... (a test compares
    it)": with proton's passes on and INSTRUMENT false the PTX is the plain kernel's; with the scopes on it is not."""
    plain = lens.compile(hm.hopper_matmul_spec(), "sm_90a")
    quiet = traces.instrumented(hm.hopper_matmul_spec(instrument=False), "sm_90a")
    timed = traces.instrumented(hm.hopper_matmul_spec(instrument=True), "sm_90a")
    assert lens.same_code(quiet.ptx, plain.ptx) and plain.census(["%clock"])["%clock"] == 0
    assert timed.census(["%clock;"])["%clock;"] > 0


# ----------------------------------------------- chapter 5: the fence, the references, what the prose reads

def _markdown(notebook_file):
    import json
    from pathlib import Path
    cells = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / notebook_file).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("same_slot, num_ctas, fence", [(True, 1, "fence.proxy.async.shared::cta"),
                                                        (True, 2, "fence.proxy.async.shared::cluster"),
                                                        (False, 1, None), (False, 2, None)])
def test_the_fence_before_try_cancel_answers_a_read_of_the_same_slot(same_slot, num_ctas, fence):
    """Triton's proxy-fence pass, not a cluster barrier, puts the fence there: a try_cancel into the slot that
    load_result read gets one (cluster scope when the answer is multicast), into another slot none."""
    k = lens.compile(cm.answer_reuse_spec(same_slot, num_ctas), "sm_100a")
    fences = {op: n for op, n in k.census().items() if op.startswith("fence.proxy")}
    assert fences == ({fence: 1} if fence else {})
    if fence:
        lines = [ln.strip() for ln in k.ptx.splitlines()]
        second = [i for i, ln in enumerate(lines) if "clusterlaunchcontrol.try_cancel" in ln][1]
        between = lines[lines.index(fence + ";"):second]
        assert lines.index(fence + ";") < second and not any("barrier.cluster" in ln for ln in between)


def test_the_kernels_fence_before_the_request_is_the_proxy_fence_not_the_barriers():
    lines = catalog.compile("clc_matmul", "sm_100a").ptx.splitlines()
    at = next(i for i, ln in enumerate(lines) if "clusterlaunchcontrol.try_cancel" in ln)
    fences = [ln.strip() for ln in lines[at - 60:at] if "fence." in ln]
    assert fences == ["fence.proxy.async.shared::cluster;"]
    src = inspect.getsource(cm.scheduler_partition.fn)
    assert "Triton's proxy-fence" in src and "not this barrier's" in src
    text = _markdown("05-clc-matmul.ipynb")
    assert "**Where the fence comes from.**" in text and "`add_proxy_fence_insertion`" in text
    assert "and fences the async proxy" not in text                # the old claim: the barrier fences


def test_the_upstream_tutorials_store_name_no_longer_compiles(tmp_path):
    mod = variant(tmp_path, "ch5_old_store", two_cta.two_cta_mma_kernel,
                  edits={"tma.async_store(": "tma.async_copy_shared_to_global("})
    with pytest.raises(lens.LensCompileError, match="async_copy_shared_to_global has been removed; call async_store"):
        lens.compile(lens.with_kernel(two_cta.two_cta_mma_spec(), mod.two_cta_mma_kernel), "sm_100a")
    assert "no longer\ncompiles" in _markdown("05-clc-matmul.ipynb")


def test_the_upstream_tables_are_labelled_as_their_source_does():
    """The tutorial names no GPU (it requires compute capability 10.x): neither may the reference files, the
    figures' titles (plots.reference prints ref["gpu"]) or the prose of chapters 5 and 6."""
    for name in ("b200_matmul_seed.json", "b200_softmax_seed.json"):
        ref = results.load(f"reference/{name}")
        assert ref["gpu"] == "a Blackwell GPU the source does not name (compute capability 10.x)"
        assert "names no GPU" in ref["source"] and "B200" not in ref["source"]
    for nb in ("05-clc-matmul.ipynb", "06-hopper-cluster-matmul.ipynb"):
        text = _markdown(nb)
        assert "B200 table" not in text and "B200 numbers" not in text and "does not name" in text


def test_chapter_5_states_the_bounds_and_the_sources_it_reads():
    text = _markdown("05-clc-matmul.ipynb")
    assert "at most {glue:text}`ch5_workers` clusters, an upper bound" in text and "30 clusters of 4 CTAs" in text
    assert "pull request 10556" in text and "1.47 times at K = 256" in text
    assert text.count("closed without being merged") >= 2                # #10863, in the table and the summary
