"""Ownership maps parsed from Triton's own layout views, against hand-derived owners and the model."""
import random

import numpy as np
import pytest
from random_layouts import random_cga_bases
from triton.experimental.gluon import language as gl

from multicta_kernels.core import layouts
from multicta_kernels.show import figures
from multicta_kernels.softmax import make_config


def test_blocked_two_ctas_split_rows():
    own = layouts.ownership(gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0], cga_layout=[[1, 0]]), [8, 128])
    assert (own.cta[:4] == 0).all() and (own.cta[4:] == 1).all()
    assert own.warp[0, :32].tolist() == [0] * 32 and own.warp[0, 96:].tolist() == [3] * 32
    assert own.lane[0, :32].tolist() == list(range(32))
    assert own.reg[0, 0] == 0 and own.reg[1, 0] == 1          # rows 0..3 are a thread's registers 0..3
    assert (own.copies == 1).all()


def test_nvmma_shared_eight_ctas():
    s = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16, cga_layout=[[1, 0], [2, 0], [0, 1]])
    own = layouts.ownership(s, [64, 64])
    expect = np.zeros((64, 64), dtype=int)
    for c in range(8):
        r, k = c & 3, c >> 2           # bits 0-1: row block of 16, bit 2: column block of 32
        expect[16 * r:16 * (r + 1), 32 * k:32 * (k + 1)] = c
    assert np.array_equal(own.cta, expect)
    assert (own.warp == -1).all()
    assert sorted(own.reg[own.cta == 5].tolist()) == list(range(16 * 32))   # each offset once per CTA


def test_linear_layout_interleaves_ctas_and_warps():
    ll = gl.DistributedLinearLayout(reg_bases=[], lane_bases=[[0]] * 5, warp_bases=[[2]], block_bases=[[1]],
                                    shape=[4])
    own = layouts.ownership(ll, [4])
    assert own.cta.tolist() == [0, 1, 0, 1] and own.warp.tolist() == [0, 0, 1, 1]
    assert (own.copies == 32).all()                 # zero lane bases: every lane holds a copy


def test_broadcast_basis_means_copies():
    own = layouts.ownership(gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0], cga_layout=[[0, 0], [1, 0]]), [4, 128])
    assert (own.ctas_holding == 2).all()
    assert (own.cta[:2] == 0).all() and (own.cta[2:] == 2).all()    # first holder: CTA 0 or CTA 2


@pytest.mark.parametrize("seed", range(12))
def test_model_matches_triton_on_random_layouts(seed):
    rng = random.Random(seed)
    nbits = rng.randrange(1, 5)
    bases = random_cga_bases(rng, nbits, 2)
    shape = [32, 64]
    lay = gl.BlockedLayout([1, 2], [4, 8], [2, 2], [1, 0], cga_layout=bases)
    own = layouts.parse_tensor_view(lay.format_tensor_view(shape), shape)
    model = layouts.cta_owner(bases, shape, 1 << nbits)
    for (i, j), mask in np.ndenumerate(model):
        holders = {c for c in range(1 << nbits) if mask >> c & 1}
        assert own.cta[i, j] == min(holders) and own.ctas_holding[i, j] == len(holders), (bases, i, j)


@pytest.mark.parametrize("ctas", [1, 2, 4, 8, 16])
def test_softmax_layouts_shard_columns_contiguously(ctas):
    cfg = make_config(4096, ctas, 4, 1)
    own = layouts.ownership(cfg.layout_2d, [cfg.block_m, 4096])
    per = 4096 // ctas
    assert (own.cta[0] == np.arange(4096) // per).all()


@pytest.mark.parametrize("bases, ctas, msg", [
    ([[1, 0]], 4, "exactly 2 bases"),
    ([[1, 1]], 2, "several dimensions"),
    ([[2, 0]], 2, "should be 1 along dimension 0"),
    ([[1, 0], [1, 0]], 4, "should be 2 along dimension 0"),
    ([[1]], 2, "rank 2"),
    ([], 3, "power of two"),
    ([[1, 0]] * 5, 32, "power of two from 1 to 16"),
])
def test_invalid_cga_layouts_are_explained(bases, ctas, msg):
    with pytest.raises(ValueError, match=msg):
        layouts.check_cga_layout(bases, ctas, 2)


@pytest.mark.parametrize("layout, shape, msg", [
    (gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=[[1, 1]]), [4, 8], "several dimensions"),
    (gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=[[1, 0], [1, 1]]), [4, 8], "several dimensions"),
    (gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=[[1, 0]]), [8], "rank"),
    (gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=[[1, 0]]), [3, 5], "power of two"),
    (gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=[[1, 0]]), [0, 8], "power of two"),
    (gl.BlockedLayout([1], [32], [1], [0], cga_layout=[[3]]), [64], "should be 1"),
])
def test_bad_input_raises_instead_of_killing_python(layout, shape, msg):
    """Each of these aborted the whole process inside Triton; now each is a ValueError naming the fix."""
    with pytest.raises(ValueError, match=msg):
        layouts.ownership(layout, shape)
    with pytest.raises(ValueError, match=msg):
        figures.layout_maps(layout, shape)


def test_what_validation_misses_is_caught_in_a_child_process():
    """A linear layout whose block basis moves along two dimensions: Triton aborts; the reader gets
    Triton's own message in one line, and this process lives on."""
    from multicta_kernels.core.isolation import TritonAborted
    bad = gl.DistributedLinearLayout([[0, 1]], [[0, 2], [0, 4], [0, 8], [1, 0], [2, 0]], [], [[1, 1]], [4, 16])
    with pytest.raises(TritonAborted, match="at most one dimension"):
        layouts.ownership(bad, [4, 16])


@pytest.mark.parametrize("bases, shape", [([[1, 0]], [1, 8]), ([[1, 0], [2, 0]], [2, 8]), ([[0, 1], [0, 2]], [1, 2]),
                                          ([[1, 0], [0, 1]], [1, 64]), ([[0, 1], [1, 0], [0, 2]], [2, 2])])
def test_model_matches_triton_when_the_tensor_is_smaller_than_the_cluster_tiling(bases, shape):
    """A basis past the tensor's edge acts as a broadcast: both CTAs of [[1, 0]] hold all of a [1, 8]."""
    lay = gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=bases)
    own = layouts.ownership(lay, shape)
    model = layouts.cta_owner(bases, shape, 1 << len(bases))
    for (i, j), mask in np.ndenumerate(model):
        holders = {c for c in range(1 << len(bases)) if mask >> c & 1}
        assert own.cta[i, j] == min(holders) and own.ctas_holding[i, j] == len(holders), (bases, shape, i, j)


def test_draw_and_show_produce_figures():
    import matplotlib
    matplotlib.use("Agg")
    fig = figures.layout_maps(gl.BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0], cga_layout=[[1, 0]]), [16, 32])
    assert len(fig.axes) >= 4
    s = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16, cga_layout=[[1, 0]])
    with pytest.raises(ValueError, match="no 'warp' owners"):
        figures.ownership_map(layouts.ownership(s, [64, 64]), "warp")
