"""Tile orders for matmul-like kernels, and what they cost in L2 traffic (Part 0, chapters 5 and 6).

A program computes one ``[BM, BN]`` tile of ``C = A @ B`` from a row of ``K`` blocks of A and a
column of ``K`` blocks of B. Programs that run at the same time share L2: the order in which
program ids map to tiles decides how many blocks come from DRAM. Each order is here in Python (to
model and draw) and, for the planar snake, in Gluon (:func:`snake_tile`, what the kernels call); a
test runs the Gluon source with Python stand-ins and checks the two agree on every tile.
"""
from __future__ import annotations

from collections import OrderedDict

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from ..core import validate


def _check(m_tiles, n_tiles):
    """Both tile counts positive integers, and their product a list Python can build (at most MAX_LOOP tiles)."""
    validate.count(m_tiles, "m_tiles")
    validate.count(n_tiles, "n_tiles")
    if m_tiles * n_tiles > validate.MAX_LOOP:
        raise ValueError(f"m_tiles x n_tiles must be at most {validate.MAX_LOOP} tiles (an order is a Python list), "
                         f"got {m_tiles} x {n_tiles}")


def row_major(m_tiles: int, n_tiles: int) -> list[tuple[int, int]]:
    """pid -> (m, n): along each row of tiles, then the next row."""
    _check(m_tiles, n_tiles)
    return [(p // n_tiles, p % n_tiles) for p in range(m_tiles * n_tiles)]


def grouped_tile(pid: int, m_tiles: int, n_tiles: int, group_m: int) -> tuple[int, int]:
    """Triton's grouped order: walk down a band of ``group_m`` tile rows, column by column."""
    _check(m_tiles, n_tiles)
    validate.count(group_m, "group_m")
    validate.index(pid, "pid", m_tiles * n_tiles, " (a tile of m_tiles x n_tiles)")
    per_group = group_m * n_tiles
    group = pid // per_group
    first_m = group * group_m
    rows = min(m_tiles - first_m, group_m)          # the last band may be thinner
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


def grouped(m_tiles: int, n_tiles: int, group_m: int) -> list[tuple[int, int]]:
    _check(m_tiles, n_tiles)
    validate.count(group_m, "group_m")
    return [grouped_tile(p, m_tiles, n_tiles, group_m) for p in range(m_tiles * n_tiles)]


def is_bijection(order, m_tiles: int, n_tiles: int) -> bool:
    _check(m_tiles, n_tiles)
    return sorted(order) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]


def blocks_loaded(tiles, k_tiles: int) -> dict:
    """Distinct A and B blocks that a set of tiles reads (each tile: K blocks of A, K of B)."""
    validate.integer(k_tiles, "k_tiles", 0)
    rows = {m for m, _ in tiles}
    cols = {n for _, n in tiles}
    return {"A": len(rows) * k_tiles, "B": len(cols) * k_tiles, "total": (len(rows) + len(cols)) * k_tiles}


def lru_dram_loads(order, k_tiles: int, capacity_blocks: int, concurrent: int) -> int:
    """Blocks fetched from DRAM when tiles run ``concurrent`` at a time over an LRU L2 that holds
    ``capacity_blocks`` blocks. Within a wave all tiles' blocks are requested before any is evicted."""
    validate.count(k_tiles, "k_tiles", high=1 << 16)
    validate.integer(capacity_blocks, "capacity_blocks", 1)
    validate.count(concurrent, "concurrent")
    cache: OrderedDict = OrderedDict()
    misses = 0
    for start in range(0, len(order), concurrent):
        wave = order[start:start + concurrent]
        wanted = []
        for m, n in wave:
            wanted += [("A", m, k) for k in range(k_tiles)] + [("B", n, k) for k in range(k_tiles)]
        for key in dict.fromkeys(wanted):
            if key in cache:
                cache.move_to_end(key)
            else:
                misses += 1
                cache[key] = True
                while len(cache) > capacity_blocks:
                    cache.popitem(last=False)
    return misses


def planar_snake_tile(lin: int, m_tiles: int, n_tiles: int, minor_dim: int, tile_width: int) -> tuple[int, int]:
    """Chapter 5's order: bands of ``tile_width`` tiles along the minor dimension (0 = M, 1 = N);
    each band is walked along the major dimension, every other band backwards (a snake), so the
    tiles that run together stay within a narrow band and consecutive bands share their end."""
    _check(m_tiles, n_tiles)
    validate.one_of(minor_dim, "minor_dim", (0, 1))
    validate.count(tile_width, "tile_width")
    validate.index(lin, "lin", m_tiles * n_tiles, " (a tile of m_tiles x n_tiles)")
    major_size = n_tiles if minor_dim == 0 else m_tiles
    minor_size = m_tiles if minor_dim == 0 else n_tiles
    band = lin // (tile_width * major_size)
    first = band * tile_width
    width = min(tile_width, minor_size - first)       # the last band may be thinner
    within = lin - band * tile_width * major_size
    minor = first + within % width
    major = within // width
    if band % 2:
        major = major_size - 1 - major
    return (minor, major) if minor_dim == 0 else (major, minor)


@gluon.jit
def snake_tile(lin, m_tiles, n_tiles, MINOR_DIM: gl.constexpr, TILE_WIDTH: gl.constexpr):
    """:func:`planar_snake_tile`, in the kernel."""
    if MINOR_DIM == 0:
        major_size = n_tiles
        minor_size = m_tiles
    else:
        major_size = m_tiles
        minor_size = n_tiles
    band = lin // (TILE_WIDTH * major_size)
    first = band * TILE_WIDTH
    width = gl.minimum(minor_size - first, TILE_WIDTH)
    within = lin - band * TILE_WIDTH * major_size
    minor = first + within % width
    major = within // width
    major = gl.where(band % 2 == 1, major_size - 1 - major, major)
    if MINOR_DIM == 0:
        return minor, major
    else:
        return major, minor


def planar_snake(m_tiles: int, n_tiles: int, minor_dim: int = 0, tile_width: int = 8) -> list[tuple[int, int]]:
    _check(m_tiles, n_tiles)
    validate.one_of(minor_dim, "minor_dim", (0, 1))
    validate.count(tile_width, "tile_width")
    return [planar_snake_tile(p, m_tiles, n_tiles, minor_dim, tile_width) for p in range(m_tiles * n_tiles)]
