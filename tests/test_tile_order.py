"""Tile orders are bijections onto all tiles; the L2 model reproduces the seed's 90 vs 54."""
import random

import pytest

from multicta_kernels.gluon import tile_order as T


def test_seed_nine_by_nine():
    assert T.blocks_loaded(T.row_major(9, 9)[:9], 9)["total"] == 90
    assert T.blocks_loaded(T.grouped(9, 9, 3)[:9], 9)["total"] == 54


@pytest.mark.parametrize("seed", range(40))
def test_orders_are_bijections(seed):
    rng = random.Random(seed)
    m, n = rng.randrange(1, 23), rng.randrange(1, 23)
    assert T.is_bijection(T.row_major(m, n), m, n)
    assert T.is_bijection(T.grouped(m, n, rng.randrange(1, 9)), m, n)
    for minor in (0, 1):
        assert T.is_bijection(T.planar_snake(m, n, minor, rng.randrange(1, 17)), m, n)


def test_snake_walks_bands_back_and_forth():
    order = T.planar_snake(4, 3, minor_dim=0, tile_width=2)
    assert order[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert order[6:] == [(2, 2), (3, 2), (2, 1), (3, 1), (2, 0), (3, 0)]      # second band backwards
    assert T.planar_snake(3, 4, minor_dim=1, tile_width=2)[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_partial_last_band():
    order = T.planar_snake(5, 2, minor_dim=0, tile_width=2)                    # bands of 2, 2, 1 rows
    assert order[-2:] == [(4, 0), (4, 1)] and T.is_bijection(order, 5, 2)


@pytest.mark.parametrize("bad", [dict(minor_dim=2), dict(tile_width=0)])
def test_bad_arguments(bad):
    with pytest.raises(ValueError):
        T.planar_snake(4, 4, **{"minor_dim": 0, "tile_width": 2, **bad})


def test_lru_model_prefers_local_orders_when_l2_is_small():
    m = n = k = 16
    rm = T.lru_dram_loads(T.row_major(m, n), k, 200, 16)
    gr = T.lru_dram_loads(T.grouped(m, n, 4), k, 200, 16)
    sn = T.lru_dram_loads(T.planar_snake(m, n, 0, 4), k, 200, 16)
    assert gr < rm and sn < rm
