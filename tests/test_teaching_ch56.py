"""What chapters 5 and 6 claim beyond their kernels, checked on a CPU: the comparison of the tile order with the
upstream tutorial's, the "change it and see" variants of chapter 5's kernel, and that chapter 6's timeline scopes
compile to nothing when they are off.

Variants are the package's kernels with a textual edit, written to a module of their own (``gluon.jit`` reads a
function's source from its file; notebooks.variant), so no kernel is retyped here.
"""
import types
from dataclasses import replace
from unittest import mock

import pytest
from triton.experimental.gluon import language as gl

from multicta_kernels import catalog, clc_matmul as cm, hopper_matmul as hm, lens, protocols, tile_order, timeline
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
    recounted = protocols.check(protocols.clc_matmul(slots_only=True, tiles=3).recount("clc_empty", readers))
    with mock.patch.object(cm, "CLC_READERS", gl.constexpr(readers)):
        rebuilt = protocols.check(protocols.clc_matmul(slots_only=True, tiles=3))
    assert recounted.kind == rebuilt.kind == kind
    assert recounted.trace == rebuilt.trace and recounted.message == rebuilt.message


# ------------------------------------------------------------------------------------------ chapter 6

def test_hopper_scopes_off_compile_to_the_plain_kernel():
    """Chapter 6: "Without Triton's profiler (proton) recording, the scopes compile to nothing ... (a test compares
    it)": with proton's passes on and INSTRUMENT false the PTX is the plain kernel's; with the scopes on it is not."""
    plain = lens.compile(hm.hopper_matmul_spec(), "sm_90a")
    quiet = timeline.instrumented(hm.hopper_matmul_spec(instrument=False), "sm_90a")
    timed = timeline.instrumented(hm.hopper_matmul_spec(instrument=True), "sm_90a")
    assert quiet.ptx == plain.ptx and plain.census(["%clock"])["%clock"] == 0
    assert timed.census(["%clock;"])["%clock;"] > 0
