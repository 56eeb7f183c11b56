"""Ownership maps: which CTA, warp, lane and register holds every element of a tensor.

Triton is the ground truth. ``layout.format_tensor_view(shape)`` prints, for every element of a
distributed (register) layout, the owners as ``B<cta>:T<thread>:<register>``; for a shared layout
``format_hardware_view(shape)`` lists, CTA by CTA, which element sits at each offset. This module
parses those views into arrays and draws them. :func:`cta_owner` is a small pure-Python model of
``cga_layout`` that the tests check against the parsed views.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import numpy as np

from .hardware import LANES, MAX_CLUSTER_CTAS, check_cluster_size, log2


@dataclass
class Ownership:
    """Owners of every element of a tensor of ``shape`` under a layout.

    ``cta``, ``warp``, ``lane`` and ``reg`` hold the first owner of each element (-1 where the
    layout does not say: shared memory has no warps); ``copies`` counts how many (CTA, thread,
    register) slots hold the same element: more than one means broadcast.
    """
    shape: tuple
    cta: np.ndarray
    warp: np.ndarray
    lane: np.ndarray
    reg: np.ndarray
    copies: np.ndarray
    ctas_holding: np.ndarray   # number of distinct CTAs holding each element
    ctas: int | None = None    # the CTAs the layout describes (set by :func:`ownership`; a broadcast basis or a
                               # tensor smaller than the tiling leaves some of them out of ``cta``)

    @property
    def num_ctas(self) -> int:
        """The CTAs of the cluster the layout is for (not only those that own a first copy of some element)."""
        return self.ctas if self.ctas is not None else int(self.cta.max()) + 1


_OWNER = re.compile(r"(?:B(\d+):)?T(\d+):(\d+)")      # single-CTA layouts print no B<cta>:


def parse_tensor_view(text: str, shape) -> Ownership:
    """Parse ``DistributedLayout.format_tensor_view(shape)``."""
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape))
    flat = text.replace("[", " ").replace("]", ",")      # a row's end separates cells too
    cells = [c for c in flat.replace("\n", " ").split(",") if c.strip()]
    if len(cells) != n:
        raise ValueError(f"tensor view has {len(cells)} elements, expected {n} for shape {shape}")
    cta, warp, lane, reg, copies, nct = (np.empty(n, dtype=np.int64) for _ in range(6))
    for i, cell in enumerate(cells):
        owners = [(int(b or 0), int(t), int(r)) for b, t, r in _OWNER.findall(cell)]
        if not owners:
            raise ValueError(f"element {i} of the tensor view has no owner: {cell.strip()!r}")
        b, t, r = owners[0]
        cta[i], warp[i], lane[i], reg[i] = b, t // LANES, t % LANES, r
        copies[i] = len(owners)
        nct[i] = len({o[0] for o in owners})
    return Ownership(shape, *(a.reshape(shape) for a in (cta, warp, lane, reg, copies, nct)))


_BLOCK = re.compile(r"^Block:\s*(\d+):")
_OFFSET = re.compile(r"^Offset:\s*(\d+)\s*->\s*\(([^)]*)\)")


def parse_shared_hardware_view(text: str, shape) -> Ownership:
    """Parse ``SharedLayout.format_hardware_view(shape)``: per CTA, offset -> element."""
    shape = tuple(int(s) for s in shape)
    cta = np.full(shape, -1, dtype=np.int64)
    reg = np.full(shape, -1, dtype=np.int64)     # the offset inside the CTA's buffer
    copies = np.zeros(shape, dtype=np.int64)
    holders = {}
    block = None
    for line in text.splitlines():
        line = line.strip()
        m = _BLOCK.match(line)
        if m:
            block = int(m.group(1))
            continue
        m = _OFFSET.match(line)
        if m:
            idx = tuple(int(v) for v in m.group(2).split(","))
            if cta[idx] < 0:
                cta[idx], reg[idx] = block, int(m.group(1))
            copies[idx] += 1
            holders.setdefault(idx, set()).add(block)
    if (cta < 0).any():
        raise ValueError("Triton's hardware view does not place every element of this shape (triton 3.9 shows "
                         "only part of the tensor for broadcast shared layouts); use cta_owner() for those")
    nct = np.zeros(shape, dtype=np.int64)
    for idx, s in holders.items():
        nct[idx] = len(s)
    minus = np.full(shape, -1, dtype=np.int64)
    return Ownership(shape, cta, minus, minus.copy(), reg, copies, nct)


def ownership(layout, shape) -> Ownership:
    """Owners of every element, straight from Triton's own view of ``layout``.

    The layout and shape are validated first (Triton aborts the process on some bad ones), and the
    view is computed in a child process (:mod:`multicta_kernels.core.isolation`), so whatever slips
    through costs an exception, not the notebook."""
    from .isolation import isolated
    shape = check_shape(shape, layout_rank(layout))
    check_layout_for(layout, layout_ctas(layout))
    check_lanes(layout)
    if is_shared(layout):
        own = parse_shared_hardware_view(isolated(_hardware_view, layout, shape), shape)
    else:
        own = parse_tensor_view(isolated(_tensor_view, layout, shape), shape)
    own.ctas = layout_ctas(layout)
    return own


def check_lanes(layout) -> None:
    """A register layout for an NVIDIA warp spreads over exactly :data:`LANES` (32) lanes: ``threads_per_warp``
    multiplies to 32 (a linear layout has 5 lane bases). Triton draws other counts too, but the warp and lane
    of a thread are then not ``t // 32`` and ``t % 32``, and no NVIDIA GPU runs them."""
    while getattr(layout, "parent", None) is not None:
        layout = layout.parent
    tpw = getattr(layout, "threads_per_warp", None)
    if tpw:
        if int(np.prod(list(tpw))) != LANES:
            raise ValueError(f"threads_per_warp must multiply to {LANES} (the lanes of an NVIDIA warp), "
                             f"got {list(tpw)}")
    lane_bases = getattr(layout, "lane_bases", None)
    if lane_bases is not None and len(lane_bases) != log2(LANES):
        raise ValueError(f"lane_bases must have {log2(LANES)} bases (the {LANES} lanes of an NVIDIA warp), "
                         f"got {len(lane_bases)}")


def is_shared(layout) -> bool:
    """Whether ``layout`` describes shared memory (its view lists offsets per CTA) or registers. Gluon 3.9
    exports the shared layouts but not their common base class, which lives in a private module; this
    is the one place that reaches for it."""
    from triton.experimental.gluon.language._layouts import SharedLayout
    return isinstance(layout, SharedLayout)


def _tensor_view(layout, shape):
    return layout.format_tensor_view(shape)


def _hardware_view(layout, shape):
    return layout.format_hardware_view(shape)


def layout_rank(layout) -> int | None:
    """The tensor rank a layout is for (None where the layout does not say)."""
    for attr in ("order", "warps_per_cta", "shape"):
        v = getattr(layout, attr, None)
        if v:
            return len(v)
    if getattr(layout, "parent", None) is not None:            # a SliceLayout drops one dimension
        parent = layout_rank(layout.parent)
        return None if parent is None else parent - 1
    bases = getattr(layout, "cga_layout", None) or getattr(layout, "block_bases", None)
    return len(bases[0]) if bases else None


def layout_ctas(layout) -> int:
    """The CTA count a layout describes: 2 ** (number of CGA bases)."""
    while getattr(layout, "parent", None) is not None:
        layout = layout.parent
    bases = getattr(layout, "cga_layout", None)
    if bases is None:
        bases = getattr(layout, "block_bases", None) or []
    return 1 << len(bases)


def check_shape(shape, rank: int | None = None) -> list:
    """A tensor shape Triton's layouts accept: positive powers of two, of the layout's rank."""
    if not isinstance(shape, (list, tuple)) or not shape:
        raise ValueError(f"shape must be a non-empty list of sizes, got {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1 or d & (d - 1):
            raise ValueError(f"every size of a layout's shape is a positive power of two, got {list(shape)} "
                             "(pad the tensor: a kernel masks the rest)")
        out.append(d)
    if rank is not None and len(out) != rank:
        raise ValueError(f"the layout is for rank-{rank} tensors, but the shape {out} has rank {len(out)}")
    return out


def check_layout_for(layout, num_ctas: int) -> None:
    """Refuse a layout whose CGA part Triton would reject (or abort on) for a cluster of ``num_ctas``.

    Objects that are not layouts pass. A ``cga_layout`` (blocked, shared, NVMMA, tensor-memory and
    mbarrier layouts) must have exactly log2(num_ctas) bases, each zero or a power of two along one
    dimension (:func:`check_cga_layout`); linear layouts need log2(num_ctas) block bases of their rank."""
    while getattr(layout, "parent", None) is not None and hasattr(layout, "dim"):
        layout = layout.parent
    if hasattr(layout, "cga_layout"):
        bases = [list(b) for b in (layout.cga_layout or [])]
        if not bases and num_ctas == 1:
            return
        rank = len(bases[0]) if bases else (layout_rank(layout) or 1)
        check_cga_layout(bases, num_ctas, rank)
    elif hasattr(layout, "block_bases"):
        need = log2(num_ctas)
        if len(layout.block_bases) != need:
            raise ValueError(f"a layout for {num_ctas} CTAs has exactly {need} block bases, got {layout.block_bases}")
        rank = layout_rank(layout)
        if rank is not None and any(len(b) != rank for b in layout.block_bases):
            raise ValueError(f"every block basis has one entry per dimension ({rank}), got {layout.block_bases}")


# ------------------------------------------------------------------------------ the cga model

def check_cga_layout(bases, num_ctas: int, rank: int) -> list:
    """Validate a ``cga_layout`` and return it as a list of lists, or raise ValueError saying why.

    A CGA layout has exactly log2(num_ctas) bases; each is zero (a broadcast: the CTAs that differ
    only in that bit hold the same data) or a power of two along one dimension, and along each
    dimension the non-zero bases are 1, 2, 4, ... in order, so every CTA owns one contiguous block.
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= 8:
        raise ValueError(f"rank must be an integer from 1 to 8 (the dimensions of a tensor), got {rank!r}")
    check_cluster_size(num_ctas)
    bases = [list(b) for b in bases]
    need = log2(num_ctas)
    if len(bases) != need:
        raise ValueError(f"a cga_layout for {num_ctas} CTAs has exactly {need} bases (log2 of the CTA count), "
                         f"got {len(bases)}: {bases}")
    expect = [1] * rank
    for i, b in enumerate(bases):
        if len(b) != rank:
            raise ValueError(f"basis {i} {b} has {len(b)} entries; the tensor has rank {rank}")
        nz = [d for d, v in enumerate(b) if v]
        if not nz:
            continue
        if len(nz) > 1:
            raise ValueError(f"basis {i} {b} moves along several dimensions; each basis splits one dimension "
                             "(use a DistributedLinearLayout for other mappings)")
        d = nz[0]
        if b[d] != expect[d]:
            raise ValueError(f"basis {i} {b} should be {expect[d]} along dimension {d}: bases along a dimension "
                             "go 1, 2, 4, ... so that each CTA owns a contiguous block")
        expect[d] *= 2
    return bases


def cta_split(bases, rank: int) -> list:
    """How many blocks each dimension is cut into by the non-zero bases."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= 8:
        raise ValueError(f"rank must be an integer from 1 to 8 (the dimensions of a tensor), got {rank!r}")
    split = [1] * rank
    for b in bases:
        for d, v in enumerate(b):
            if v:
                split[d] *= 2
    return split


def cta_owner(bases, shape, num_ctas: int) -> np.ndarray:
    """The model: for every element, the set of CTAs that hold it, as a bit mask (int array).

    Each dimension is cut into as many blocks as its non-zero bases make; a basis whose block lies
    past the tensor's edge (a tensor smaller than the cluster's tiling) acts as a zero basis: the
    CTAs it tells apart hold the same elements, as Triton's own views show."""
    shape = check_shape(shape)
    bases = check_cga_layout(bases, num_ctas, len(shape))
    split = cta_split(bases, len(shape))
    block = [max(1, s // k) for s, k in zip(shape, split)]
    owners = np.zeros(shape, dtype=np.int64)
    for c in range(num_ctas):
        start = [0] * len(shape)
        for bit, b in enumerate(bases):      # the CTA id's bits pick bases (disjoint powers of two: add them)
            if c >> bit & 1:
                for d, v in enumerate(b):
                    if v and v * block[d] < shape[d]:
                        start[d] += v * block[d]
        owners[tuple(slice(x, x + k) for x, k in zip(start, block))] |= 1 << c
    return owners


# ------------------------------------------------------------------------------ bases written as text

def parse_bases(value, what: str = "bases", width: int | None = None) -> list:
    """``"[[0, 1], [1, 0]]"`` (or the list itself) -> a list of lists of ints, or ValueError."""
    if isinstance(value, str):
        text = value.strip() or "[]"
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(f"{what}: write a list of bases such as [[0, 1], [1, 0]], got {text!r}") from None
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{what}: a list of bases, got {value!r}")
    out = []
    for b in value:
        if isinstance(b, int) and not isinstance(b, bool):
            b = [b]
        if not isinstance(b, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in b):
            raise ValueError(f"{what}: each basis is a list of integers, got {b!r}")
        if width is not None and len(b) != width:
            raise ValueError(f"{what}: each basis has {width} entr{'y' if width == 1 else 'ies'}, got {list(b)}")
        out.append([int(v) for v in b])
    if len(out) > log2(MAX_CLUSTER_CTAS):
        raise ValueError(f"{what}: at most {log2(MAX_CLUSTER_CTAS)} bases ({MAX_CLUSTER_CTAS} CTAs, the largest "
                         f"cluster), got {len(out)}")
    return out
