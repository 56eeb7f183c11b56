"""Chapter 1: a row-wise softmax whose rows are sharded across a cluster of 1 to 16 CTAs.

Two kernels, one step apart:

* ``softmax_two_pass_kernel`` holds a ``[BLOCK_M, BLOCK_N]`` tile whose layout shards the columns
  over the CTAs (``cga_layout`` bases ``[0, 1], [0, 2], ...``). ``gl.max`` and ``gl.sum`` along
  the row then become cross-CTA reductions: two round trips through distributed shared memory.
* ``softmax_kernel`` views the same tile as ``[BLOCK_M, CTAS, BLOCK_N // CTAS]`` with the CTA
  index as its own axis. Max and sum stay inside each CTA; one cross-CTA ``gl.reduce`` merges the
  partial (max, sum) pairs. One round trip instead of two: cross-CTA traffic must be earned.

Short rows stack several rows in one program instead. The exchange of the (max, sum) pairs then gets faster, and
rows get wider, kernel by kernel (``EXCHANGES``): ``softmax_one_round_kernel`` (one round of ``st.async`` into every
CTA), ``softmax_pipelined_kernel`` (persistent clusters, the next block's loads in flight), ``softmax_staged_kernel``
(the next row staged in shared memory by TMA) and ``softmax_halves_kernel`` (rows wider than the cluster's
registers: half of each CTA's slice in registers, half in shared memory, a quarter of the next row prefetched).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from . import lens
from .core import validate
from .core.dtypes import DTYPES, dtype_name
from .core.hardware import CLUSTERS, CUDA, MAX_CLUSTER_CTAS, check_cluster_size, check_on_gpu, log2, require
from .gluon.convert import to_fp32
from .gluon.operands import descriptor_type
from .gluon.scope import scope
from .gluon.sync import acquire_wait, sync_inits


LOG2E = gl.constexpr(1.4426950408889634)  # exp(x) = exp2(x * log2(e)): one ex2.approx


# Register budget: at most this many fp32 values of a row tile per thread. At 128 the fused kernel
# keeps its tile in registers with no spill; at 256 ptxas spills the tile to the stack (lens.resources()
# on the CPU says both: tests/test_softmax_cpu.py checks them). At most 16 warps per CTA and 16 CTAs per
# cluster.
MAX_VALUES_PER_THREAD = 128
MAX_WARPS = 16
MAX_N = MAX_CLUSTER_CTAS * MAX_WARPS * 32 * MAX_VALUES_PER_THREAD  # 1048576 columns

# How the fused kernel merges the CTAs' (max, sum) pairs: gl.reduce across the CTAs (softmax_kernel), one round of
# st.async into every CTA (softmax_one_round_kernel), or that round in persistent clusters that load the next
# block meanwhile (softmax_pipelined_kernel), or with the next row staged in shared memory by TMA
# (softmax_staged_kernel).
EXCHANGES = ("compiler", "one_round", "pipelined", "staged", "halves")


@gluon.jit
def softmax_two_pass_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div,
                            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                            layout: gl.constexpr):
    # Sizes arrive divided by ALIGN so the compiler can prove every row 16-byte aligned and keep
    # vector loads even when the row width needs a mask.
    N = n_div * ALIGN
    rows = (gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, layout)))[:, None]
    cols = gl.arange(0, BLOCK_N, gl.SliceLayout(0, layout))[None, :]
    mask = (rows < M) & (cols < N)
    rows = rows.to(gl.int64)                                # M * stride may exceed 2**31

    x = gl.load(x_ptr + rows * (x_stride_div * ALIGN) + cols, mask=mask, other=-float("inf"))
    x = x.to(gl.float32)
    row_max = gl.max(x, axis=1)                             # cross-CTA reduction no. 1
    e = gl.exp2((x - row_max[:, None]) * LOG2E)
    y = e * (1.0 / gl.sum(e, axis=1))[:, None]              # cross-CTA reduction no. 2
    gl.store(out_ptr + rows * (out_stride_div * ALIGN) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _merge(m1, s1, m2, s2):
    # Two partial softmax sums (max m, sum s of exp(x - m)) combined; a -inf max carries no mass.
    m = gl.maximum(m1, m2)
    a = gl.where(m1 == m, s1, s1 * gl.exp2((m1 - m) * LOG2E))
    b = gl.where(m2 == m, s2, s2 * gl.exp2((m2 - m) * LOG2E))
    return m, a + b


@gluon.jit
def softmax_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                   layout: gl.constexpr, INSTRUMENT: gl.constexpr = False):
    # The tile is [BLOCK_M, CTAS, PER_CTA]: axis 1 is the CTA (cga_layout bases [0, 2**i, 0]).
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    N = n_div * ALIGN
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, gl.SliceLayout(2, layout)))
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    j = gl.arange(0, PER_CTA, gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    rows = rows[:, None, None]
    cols = cta[None, :, None] * PER_CTA + j[None, None, :]
    mask = (rows < M) & (cols < N)
    rows = rows.to(gl.int64)

    with scope("load", INSTRUMENT):                         # timeline scopes: no code unless proton records
        x = gl.load(x_ptr + rows * (x_stride_div * ALIGN) + cols, mask=mask, other=-float("inf"))
        x = x.to(gl.float32)
    with scope("local", INSTRUMENT):
        m_cta = gl.max(x, axis=2)                           # inside each CTA; -inf if its slice is all masked
        m_safe = gl.where(m_cta == -float("inf"), 0.0, m_cta)   # for the local exponent only: no -inf - -inf
        e = gl.exp2((x - m_safe[:, :, None]) * LOG2E)       # a masked slice gives e = 0, s_cta = 0
        s_cta = gl.sum(e, axis=2)                           # inside each CTA
    with scope("exchange", INSTRUMENT):
        m, s = gl.reduce((m_cta, s_cta), 1, _merge)         # across the CTAs: the real (max, sum) pairs
    with scope("store", INSTRUMENT):
        scale = gl.exp2((m_cta - m[:, None]) * LOG2E) / s[:, None]    # 0 for a slice of -inf: no 0 * inf
        y = e * scale[:, :, None]
        gl.store(out_ptr + rows * (out_stride_div * ALIGN) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _to_every_cta(part, parts: gl.constexpr):
    """``part`` ([BLOCK_M, CTAS], CTA c holding column c) as [CTAS, BLOCK_M, CTAS] in ``parts``: the same column
    once for every destination CTA (axis 0), ready to be stored into every CTA's shared memory."""
    CTAS: gl.constexpr = gl.num_ctas()
    BLOCK_M: gl.constexpr = part.shape[0]
    mine = gl.convert_layout(part, gl.SliceLayout(0, parts))[None, :, :]        # local: the CTA split is the same
    return mine + gl.zeros([CTAS, BLOCK_M, CTAS], gl.float32, parts)


@gluon.jit
def softmax_one_round_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div,
                             BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                             layout: gl.constexpr, parts: gl.constexpr, parts_smem: gl.constexpr,
                             mine_smem: gl.constexpr, everyone: gl.constexpr, INSTRUMENT: gl.constexpr = False):
    # softmax_kernel with the (max, sum) exchange written by hand: one round instead of the compiler's two.
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    N = n_div * ALIGN
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, gl.SliceLayout(1, gl.SliceLayout(2, layout)))
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    j = gl.arange(0, PER_CTA, gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    rows = rows[:, None, None]
    cols = cta[None, :, None] * PER_CTA + j[None, None, :]
    mask = (rows < M) & (cols < N)
    rows = rows.to(gl.int64)

    # [destination CTA, row, source CTA]: CTA d's shared memory holds slice d, every source's pair for each row
    m_all = gl.allocate_shared_memory(gl.float32, [CTAS, BLOCK_M, CTAS], parts_smem)
    s_all = gl.allocate_shared_memory(gl.float32, [CTAS, BLOCK_M, CTAS], parts_smem)
    landed = mbarrier.allocate_mbarrier()
    mbarrier.init(landed, count=1)

    with scope("load", INSTRUMENT):
        x = gl.load(x_ptr + rows * (x_stride_div * ALIGN) + cols, mask=mask, other=-float("inf"))
        sync_inits()                                        # peers will store into me: my barrier, seen cluster-wide
        x = x.to(gl.float32)                                # (relaxed: it does not wait for the loads in flight)
    with scope("local", INSTRUMENT):
        m_cta = gl.max(x, axis=2)                           # inside each CTA; -inf if its slice is all masked
        m_safe = gl.where(m_cta == -float("inf"), 0.0, m_cta)   # for the local exponent only
        e = gl.exp2((x - m_safe[:, :, None]) * LOG2E)
        s_cta = gl.sum(e, axis=2)
    with scope("exchange", INSTRUMENT):
        mbarrier.expect(landed, 2 * BLOCK_M * CTAS * 4)     # every source's (max, sum) of every row, into me
        hopper.async_store(m_all, _to_every_cta(m_cta, parts), landed)   # st.async to every CTA, bytes
        hopper.async_store(s_all, _to_every_cta(s_cta, parts), landed)   # completing on its barrier
        acquire_wait(landed, 0)                             # .acquire.cluster: the bytes' release is cluster-scoped
        ms = m_all.reinterpret(gl.float32, [BLOCK_M, CTAS], mine_smem).load(everyone)   # my slice, local
        ss = s_all.reinterpret(gl.float32, [BLOCK_M, CTAS], mine_smem).load(everyone)
        m = gl.max(ms, axis=1)
        s = gl.sum(gl.where(ms == m[:, None], ss, ss * gl.exp2((ms - m[:, None]) * LOG2E)), axis=1)
        mbarrier.invalidate(landed)
    with scope("store", INSTRUMENT):
        m = gl.convert_layout(m, gl.SliceLayout(1, gl.SliceLayout(2, layout)))   # every CTA holds every row
        s = gl.convert_layout(s, gl.SliceLayout(1, gl.SliceLayout(2, layout)))
        scale = gl.exp2((m_cta - m[:, None]) * LOG2E) / s[:, None]
        y = e * scale[:, :, None]
        gl.store(out_ptr + rows * (out_stride_div * ALIGN) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _merged(ms, ss):
    # Every source's (max, sum) pair of each row ([rows, sources]) merged: the row's max and sum of exp(x - max).
    m = gl.max(ms, axis=1)
    return m, gl.sum(gl.where(ms == m[:, None], ss, ss * gl.exp2((ms - m[:, None]) * LOG2E)), axis=1)


@gluon.jit
def _scale(m_cta, m, s, layout: gl.constexpr):
    # What scales this CTA's exp(x - m_cta) to the row's (max m, sum s): exp(m_cta - m) / s, 0 for a slice of -inf.
    m = gl.convert_layout(m, gl.SliceLayout(1, gl.SliceLayout(2, layout)))    # every CTA holds every row
    s = gl.convert_layout(s, gl.SliceLayout(1, gl.SliceLayout(2, layout)))
    return gl.exp2((m_cta - m[:, None]) * LOG2E) / s[:, None]


@gluon.jit
def _normalised(e, m_cta, m, s, layout: gl.constexpr):
    # This CTA's exp(x - m_cta) scaled to the row's (max m, sum s).
    return e * _scale(m_cta, m, s, layout)[:, :, None]


@gluon.jit
def _pipelined_row(x_raw, rows, nxt, cols, col_ok, M, x_ptr, out_ptr, x_stride, out_stride, m_all, s_all, landed,
                   parity, layout: gl.constexpr, parts: gl.constexpr, mine_smem: gl.constexpr,
                   everyone: gl.constexpr, INSTRUMENT: gl.constexpr):
    # One row block of softmax_pipelined_kernel through one exchange slot; returns the next block's loads, in flight.
    CTAS: gl.constexpr = gl.num_ctas()
    BLOCK_M: gl.constexpr = x_raw.shape[0]
    with scope("local", INSTRUMENT):
        x = to_fp32(x_raw)                                  # waits for this block's loads
        x_next = gl.load(x_ptr + nxt.to(gl.int64) * x_stride + cols, mask=(nxt < M) & col_ok,
                         other=-float("inf"))              # the next block's loads: in flight from here on
        m_cta = gl.max(x, axis=2)
        m_safe = gl.where(m_cta == -float("inf"), 0.0, m_cta)
        e = gl.exp2((x - m_safe[:, :, None]) * LOG2E)
        s_cta = gl.sum(e, axis=2)
    with scope("exchange", INSTRUMENT):
        gl.barrier()                                        # every warp of mine has read the other slot (last block):
        mbarrier.expect(landed, 2 * BLOCK_M * CTAS * 4)     # a peer refills it once it has this block's pairs
        hopper.async_store(m_all, _to_every_cta(m_cta, parts), landed)
        hopper.async_store(s_all, _to_every_cta(s_cta, parts), landed)
        acquire_wait(landed, parity)
        m, s = _merged(m_all.reinterpret(gl.float32, [BLOCK_M, CTAS], mine_smem).load(everyone),
                       s_all.reinterpret(gl.float32, [BLOCK_M, CTAS], mine_smem).load(everyone))
    with scope("store", INSTRUMENT):
        y = _normalised(e, m_cta, m, s, layout)
        gl.store(out_ptr + rows.to(gl.int64) * out_stride + cols, y.to(out_ptr.dtype.element_ty),
                 mask=(rows < M) & col_ok)
    return x_next


@gluon.jit
def softmax_pipelined_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div,
                             BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                             layout: gl.constexpr, parts: gl.constexpr, parts_smem: gl.constexpr,
                             mine_smem: gl.constexpr, everyone: gl.constexpr, INSTRUMENT: gl.constexpr = False):
    # softmax_one_round_kernel made persistent: a cluster walks row blocks pid, pid + P, ... and loads the next
    # block while it exchanges and stores this one. Two exchange slots, used in turn; a slot's barrier completes
    # once per pair of blocks, so the parity flips once per loop iteration.
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    N = n_div * ALIGN
    x_stride = x_stride_div * ALIGN
    out_stride = out_stride_div * ALIGN
    r = gl.arange(0, BLOCK_M, gl.SliceLayout(1, gl.SliceLayout(2, layout)))[:, None, None]
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    j = gl.arange(0, PER_CTA, gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    cols = cta[None, :, None] * PER_CTA + j[None, None, :]
    col_ok = cols < N
    step = gl.num_programs(0) * BLOCK_M                    # rows between two blocks of one program

    m_all = gl.allocate_shared_memory(gl.float32, [CTAS, BLOCK_M, CTAS], parts_smem)     # slot 0
    s_all = gl.allocate_shared_memory(gl.float32, [CTAS, BLOCK_M, CTAS], parts_smem)
    m_all1 = gl.allocate_shared_memory(gl.float32, [CTAS, BLOCK_M, CTAS], parts_smem)    # slot 1
    s_all1 = gl.allocate_shared_memory(gl.float32, [CTAS, BLOCK_M, CTAS], parts_smem)
    landed = mbarrier.allocate_mbarrier(batch=2)
    mbarrier.init(landed.index(0), count=1)
    mbarrier.init(landed.index(1), count=1)

    rows = gl.program_id(0) * BLOCK_M + r
    x_raw = gl.load(x_ptr + rows.to(gl.int64) * x_stride + cols, mask=(rows < M) & col_ok, other=-float("inf"))
    sync_inits()
    parity = 0
    for first in range(gl.program_id(0) * BLOCK_M, M, 2 * step):
        rows = first + r
        x_raw = _pipelined_row(x_raw, rows, rows + step, cols, col_ok, M, x_ptr, out_ptr, x_stride, out_stride,
                               m_all, s_all, landed.index(0), parity, layout, parts, mine_smem, everyone, INSTRUMENT)
        x_raw = _pipelined_row(x_raw, rows + step, rows + 2 * step, cols, col_ok, M, x_ptr, out_ptr, x_stride,
                               out_stride, m_all1, s_all1, landed.index(1), parity, layout, parts, mine_smem,
                               everyone, INSTRUMENT)
        parity ^= 1
    gl.barrier()                                            # every warp is past its last wait before the inval
    mbarrier.invalidate(landed.index(0))
    mbarrier.invalidate(landed.index(1))


@gluon.jit
def softmax_staged_kernel(x_desc, out_ptr, M, n_div, out_stride_div, BLOCK_N: gl.constexpr, ALIGN: gl.constexpr,
                          layout: gl.constexpr, parts: gl.constexpr, parts_smem: gl.constexpr,
                          mine_smem: gl.constexpr, everyone: gl.constexpr, stage_view: gl.constexpr,
                          INSTRUMENT: gl.constexpr = False):
    # The pipelined kernel with the next row staged in shared memory by TMA instead of registers: a cluster walks
    # rows pid, pid + P, ...; one row (fp32) sits in registers while the next lands in each CTA's slice of `stage`.
    # One row per program (BLOCK_N == N); x_desc views x as [M, CTAS, PER_CTA // 256, 256] (a TMA box is at most
    # 256 a side), split over the CTAs along axis 1.
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    N = n_div * ALIGN
    out_stride = gl.to_tensor(out_stride_div).to(gl.int64) * ALIGN      # 64-bit: row * out_stride may pass 2**31
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    j = gl.arange(0, PER_CTA, gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    cols = cta[None, :, None] * PER_CTA + j[None, None, :]
    col_ok = cols < N
    step = gl.num_programs(0)

    stage = gl.allocate_shared_memory(x_desc.dtype, x_desc.block_shape, x_desc.layout)
    row_view = stage.reinterpret(x_desc.dtype, [1, CTAS, PER_CTA], stage_view)     # the same bytes, as the tile
    m_all = gl.allocate_shared_memory(gl.float32, [2, CTAS, 1, CTAS], parts_smem)   # two exchange slots, in turn
    s_all = gl.allocate_shared_memory(gl.float32, [2, CTAS, 1, CTAS], parts_smem)
    ready = mbarrier.allocate_mbarrier()                   # this CTA's slice of the staged row has landed
    landed = mbarrier.allocate_mbarrier(batch=2)           # every source's pair of this row, per slot
    mbarrier.init(ready, count=1)
    mbarrier.init(landed.index(0), count=1)
    mbarrier.init(landed.index(1), count=1)
    sync_inits()                                           # peers store into `landed`: their inits, cluster-wide
    mbarrier.expect(ready, x_desc.nbytes_per_cta)
    tma.async_load(x_desc, [gl.program_id(0), 0, 0, 0], ready, stage)
    i = 0
    for row in range(gl.program_id(0), M, step):
        with scope("load", INSTRUMENT):
            mbarrier.wait(ready, i & 1)                    # row i's bytes, TMA-completed on my barrier
            x = row_view.load(layout)
            gl.barrier()                                   # every warp has read the stage (and slot (i - 1) % 2)
            if row + step < M:                             # the next row's TMA: in flight from here on
                mbarrier.expect(ready, x_desc.nbytes_per_cta)
                tma.async_load(x_desc, [row + step, 0, 0, 0], ready, stage)
        with scope("local", INSTRUMENT):
            x = gl.where(col_ok, to_fp32(x), -float("inf"))
            m_cta = gl.max(x, axis=2)
            m_safe = gl.where(m_cta == -float("inf"), 0.0, m_cta)
            e = gl.exp2((x - m_safe[:, :, None]) * LOG2E)
            s_cta = gl.sum(e, axis=2)
        with scope("exchange", INSTRUMENT):
            slot = i & 1                                   # a peer refills it at row i + 2, once it has my
            mbarrier.expect(landed.index(slot), 2 * CTAS * 4)   # pairs of row i + 1: sent past that row's barrier
            hopper.async_store(m_all.index(slot), _to_every_cta(m_cta, parts), landed.index(slot))
            hopper.async_store(s_all.index(slot), _to_every_cta(s_cta, parts), landed.index(slot))
            acquire_wait(landed.index(slot), (i >> 1) & 1)
            m, s = _merged(m_all.index(slot).reinterpret(gl.float32, [1, CTAS], mine_smem).load(everyone),
                           s_all.index(slot).reinterpret(gl.float32, [1, CTAS], mine_smem).load(everyone))
        with scope("store", INSTRUMENT):
            y = _normalised(e, m_cta, m, s, layout)
            gl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=col_ok)
        i += 1
    gl.barrier()                                           # every warp is past its last wait before the inval
    mbarrier.invalidate(ready)
    mbarrier.invalidate(landed.index(0))
    mbarrier.invalidate(landed.index(1))


@gluon.jit
def softmax_halves_kernel(x_ptr, x_desc, out_ptr, M, x_stride_div, out_stride_div, BLOCK_N: gl.constexpr,
                          ALIGN: gl.constexpr, layout: gl.constexpr, parts: gl.constexpr, parts_smem: gl.constexpr,
                          mine_smem: gl.constexpr, everyone: gl.constexpr, quarter_view: gl.constexpr,
                          CHUNK: gl.constexpr, INSTRUMENT: gl.constexpr = False):
    # Rows wider than registers: each CTA's slice of a row in quarters. The first half (quarters 0 and 1) is held in
    # registers, the second (quarters 2 and 3) in shared memory, read back CHUNK columns at a time. Persistent
    # clusters walk rows pid, pid + P, ...; quarter 0 of the next row lands in `ahead` by TMA through this row's whole
    # turn, quarters 2 and 3 land while this row's first half is stored, quarter 1 is loaded into registers at the
    # top of the turn. One row per program (BLOCK_N == N); x_desc views x as [M, CTAS, 4, Q // 256, 256].
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    Q: gl.constexpr = PER_CTA // 4
    NC: gl.constexpr = Q // CHUNK                          # chunks of a quarter in shared memory
    x_stride = gl.to_tensor(x_stride_div).to(gl.int64) * ALIGN          # 64-bit: row * stride may pass 2**31
    out_stride = gl.to_tensor(out_stride_div).to(gl.int64) * ALIGN
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))[None, :, None] * PER_CTA
    cols = cta + gl.arange(0, Q, gl.SliceLayout(0, gl.SliceLayout(1, layout)))[None, None, :]      # quarter 0
    chunk_cols = cta + 2 * Q + gl.arange(0, CHUNK, gl.SliceLayout(0, gl.SliceLayout(1, layout)))[None, None, :]
    step = gl.num_programs(0)

    ahead = gl.allocate_shared_memory(x_desc.dtype, x_desc.block_shape, x_desc.layout)    # quarter 0
    third = gl.allocate_shared_memory(x_desc.dtype, x_desc.block_shape, x_desc.layout)    # quarter 2
    fourth = gl.allocate_shared_memory(x_desc.dtype, x_desc.block_shape, x_desc.layout)   # quarter 3
    q0 = ahead.reinterpret(x_desc.dtype, [1, CTAS, Q], quarter_view)      # the same bytes, as the tile
    q2 = third.reinterpret(x_desc.dtype, [1, CTAS, Q], quarter_view)
    q3 = fourth.reinterpret(x_desc.dtype, [1, CTAS, Q], quarter_view)
    m_all = gl.allocate_shared_memory(gl.float32, [2, CTAS, 1, CTAS], parts_smem)   # two exchange slots, in turn
    s_all = gl.allocate_shared_memory(gl.float32, [2, CTAS, 1, CTAS], parts_smem)
    early = mbarrier.allocate_mbarrier()                   # this CTA's quarter 0 of the row has landed
    ready = mbarrier.allocate_mbarrier()                   # its quarters 2 and 3 have landed
    landed = mbarrier.allocate_mbarrier(batch=2)           # every source's pair of this row, per slot
    mbarrier.init(early, count=1)
    mbarrier.init(ready, count=1)
    mbarrier.init(landed.index(0), count=1)
    mbarrier.init(landed.index(1), count=1)
    sync_inits()                                           # peers store into `landed`: their inits, cluster-wide
    mbarrier.expect(early, x_desc.nbytes_per_cta)
    tma.async_load(x_desc, [gl.program_id(0), 0, 0, 0, 0], early, ahead)
    mbarrier.expect(ready, 2 * x_desc.nbytes_per_cta)
    tma.async_load(x_desc, [gl.program_id(0), 0, 2, 0, 0], ready, third)
    tma.async_load(x_desc, [gl.program_id(0), 0, 3, 0, 0], ready, fourth)
    i = 0
    for row in range(gl.program_id(0), M, step):
        with scope("load", INSTRUMENT):
            x1 = gl.load(x_ptr + row * x_stride + Q + cols)    # quarter 1, into registers: in flight from here on
            mbarrier.wait(early, i & 1)
            x0 = q0.load(layout)
            gl.barrier()                                   # every warp has read `ahead`
            if row + step < M:                             # the next row's quarter 0: in flight for a whole turn
                mbarrier.expect(early, x_desc.nbytes_per_cta)
                tma.async_load(x_desc, [row + step, 0, 0, 0, 0], early, ahead)
            mbarrier.wait(ready, i & 1)                    # quarters 2 and 3, TMA-completed on my barrier
            top = q2.slice(0, CHUNK, dim=2).load(layout)
            for c in gl.static_range(1, 2 * NC):           # their max, a chunk at a time, element by element
                top = gl.maximum(top, (q2 if c < NC else q3).slice(c % NC * CHUNK, CHUNK, dim=2).load(layout))
            x0 = to_fp32(x0)
            x1 = to_fp32(x1)                               # waits for quarter 1's loads
            m_cta = gl.maximum(gl.max(gl.maximum(x0, x1), axis=2), gl.max(to_fp32(top), axis=2))
        with scope("local", INSTRUMENT):
            m_safe = gl.where(m_cta == -float("inf"), 0.0, m_cta)[:, :, None]
            e0 = gl.exp2((x0 - m_safe) * LOG2E)
            e1 = gl.exp2((x1 - m_safe) * LOG2E)
            total = gl.zeros([1, CTAS, CHUNK], gl.float32, layout)
            for c in gl.static_range(2 * NC):              # exp(x - max) of the second half, written back in place
                chunk = (q2 if c < NC else q3).slice(c % NC * CHUNK, CHUNK, dim=2)
                ec = gl.exp2((to_fp32(chunk.load(layout)) - m_safe) * LOG2E)
                chunk.store(ec.to(x_desc.dtype))
                total += ec
            s_cta = gl.sum(e0 + e1, axis=2) + gl.sum(total, axis=2)
        with scope("exchange", INSTRUMENT):
            slot = i & 1                                   # a peer refills it at row i + 2, once it has my
            mbarrier.expect(landed.index(slot), 2 * CTAS * 4)   # pairs of row i + 1: sent past this row's barrier
            hopper.async_store(m_all.index(slot), _to_every_cta(m_cta, parts), landed.index(slot))
            hopper.async_store(s_all.index(slot), _to_every_cta(s_cta, parts), landed.index(slot))
            acquire_wait(landed.index(slot), (i >> 1) & 1)
            m, s = _merged(m_all.index(slot).reinterpret(gl.float32, [1, CTAS], mine_smem).load(everyone),
                           s_all.index(slot).reinterpret(gl.float32, [1, CTAS], mine_smem).load(everyone))
        with scope("store", INSTRUMENT):
            out_row = out_ptr + row * out_stride
            scale = _scale(m_cta, m, s, layout)[:, :, None]
            for c in gl.static_range(2 * NC):              # the second half first: its buffers are free sooner
                y = to_fp32((q2 if c < NC else q3).slice(c % NC * CHUNK, CHUNK, dim=2).load(layout)) * scale
                gl.store(out_row + chunk_cols + c * CHUNK, y.to(out_ptr.dtype.element_ty))
            gl.barrier()                                   # every warp has read the stage (and slot i % 2)
            if row + step < M:                             # the next row's quarters 2 and 3: in flight from here on
                mbarrier.expect(ready, 2 * x_desc.nbytes_per_cta)
                tma.async_load(x_desc, [row + step, 0, 2, 0, 0], ready, third)
                tma.async_load(x_desc, [row + step, 0, 3, 0, 0], ready, fourth)
            gl.store(out_row + cols, (e0 * scale).to(out_ptr.dtype.element_ty))
            gl.store(out_row + Q + cols, (e1 * scale).to(out_ptr.dtype.element_ty))
        i += 1
    gl.barrier()                                           # every warp is past its last wait before the inval
    mbarrier.invalidate(early)
    mbarrier.invalidate(ready)
    mbarrier.invalidate(landed.index(0))
    mbarrier.invalidate(landed.index(1))


@gluon.jit
def upstream_design_kernel(x_ptr, out_ptr, n_div, x_stride_div, out_stride_div, BLOCK_N: gl.constexpr,
                           ALIGN: gl.constexpr, layout: gl.constexpr):
    """The design of the upstream tutorial's multi-CTA softmax (python/tutorials/gluon/14-multicta.py in
    triton-lang/triton), in our code: one row per program, a 1-D layout whose cga_layout splits the row
    over the cluster, then max, exp, sum, store: the compiler makes both reductions cross-CTA."""
    row = gl.program_id(0).to(gl.int64)
    N = n_div * ALIGN
    cols = gl.arange(0, BLOCK_N, layout)
    mask = cols < N
    x = gl.load(x_ptr + row * (x_stride_div * ALIGN) + cols, mask=mask, other=-float("inf")).to(gl.float32)
    e = gl.exp2((x - gl.max(x, axis=0)) * LOG2E)
    y = e / gl.sum(e, axis=0)
    gl.store(out_ptr + row * (out_stride_div * ALIGN) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def online_softmax_kernel(x_ptr, out_ptr, n_div, x_stride_div, out_stride_div, CHUNK: gl.constexpr,
                          ALIGN: gl.constexpr, layout: gl.constexpr):
    """The obvious alternative to a cluster for a wide row: one CTA per row, any width. Pass 1 walks the
    row in chunks keeping a running (max, sum); pass 2 reads the row again and writes. Twice the reads
    of the cluster kernel, which holds the row in registers between its load and its store."""
    row = gl.program_id(0).to(gl.int64)
    N = n_div * ALIGN
    offs = gl.arange(0, CHUNK, layout)
    src = x_ptr + row * (x_stride_div * ALIGN)
    dst = out_ptr + row * (out_stride_div * ALIGN)
    m = gl.full([CHUNK], -float("inf"), gl.float32, layout)
    s = gl.zeros([CHUNK], gl.float32, layout)
    for start in range(0, N, CHUNK):
        x = gl.load(src + start + offs, mask=start + offs < N, other=-float("inf")).to(gl.float32)
        new_m = gl.maximum(m, x)
        s = gl.where(new_m == -float("inf"), 0.0, s * gl.exp2((m - new_m) * LOG2E) + gl.exp2((x - new_m) * LOG2E))
        m = new_m
    row_m, row_s = gl.reduce((m, s), 0, _merge)
    inv = 1.0 / row_s
    for start in range(0, N, CHUNK):
        x = gl.load(src + start + offs, mask=start + offs < N, other=-float("inf")).to(gl.float32)
        y = gl.exp2((x - row_m) * LOG2E) * inv
        gl.store(dst + start + offs, y.to(out_ptr.dtype.element_ty), mask=start + offs < N)


@dataclass(frozen=True)
class SoftmaxConfig:
    """How one launch is shaped. ``layout`` is what ``softmax_kernel`` receives (3-D, CTA axis in
    the middle); ``layout_2d`` is the same ownership as a plain [rows, columns] layout, what
    ``softmax_two_pass_kernel`` receives and what the ownership maps draw."""
    N: int
    dtype: str
    num_ctas: int
    num_warps: int
    block_m: int
    block_n: int
    vec: int
    layout: object
    layout_2d: object
    reasons: tuple = field(default=(), compare=False)
    exchange: str = "one_round"          # how multicta_softmax merges the CTAs' pairs by default (EXCHANGES)

    @property
    def values_per_thread(self) -> int:
        """fp32 values of the tile each thread holds in registers (the halves kernel: of the first half)."""
        held = self.block_n // 2 if self.exchange == "halves" else self.block_n
        return self.block_m * held // (32 * self.num_warps * self.num_ctas)

    @property
    def chunk(self) -> int:
        """Columns per CTA the halves kernel reads from shared memory at a time: 16 values a thread (at most a quarter
        of the CTA's slice)."""
        return min(self.block_n // (4 * self.num_ctas), 32 * self.num_warps * HALVES_CHUNK_VALUES)

    def exchange_layouts(self) -> dict:
        """The layouts of ``softmax_one_round_kernel``'s exchange: ``parts`` holds a CTA's (max, sum) of each row
        once per destination ([CTAS, BLOCK_M, CTAS], split by source), ``parts_smem`` the buffer that receives
        them (split by destination), ``mine_smem`` one CTA's own slice of it and ``everyone`` how it is read
        (a row of sources per thread; every CTA holds all of it)."""
        bits = range(log2(self.num_ctas))
        lanes = min(32, self.num_ctas)
        return dict(
            parts=gl.BlockedLayout([1, 1, 1], [lanes, 32 // lanes, 1], [1, self.num_warps, 1], [0, 1, 2],
                                   cga_layout=[[0, 0, 1 << i] for i in bits]),
            parts_smem=gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0], cga_layout=[[1 << i, 0, 0] for i in bits]),
            mine_smem=gl.SwizzledSharedLayout(1, 1, 1, [1, 0], cga_layout=[[0, 0] for _ in bits]),
            everyone=gl.BlockedLayout([1, self.num_ctas], [32, 1], [self.num_warps, 1], [1, 0],
                                      cga_layout=[[0, 0] for _ in bits]))

    def stage_layouts(self, rank: int = 4) -> dict:
        """The layouts of ``softmax_staged_kernel``'s staged row: ``stage`` the TMA box (x viewed as
        [M, CTAS, PER_CTA // 256, 256], one CTA per index of axis 1, unswizzled) and ``stage_view`` the same bytes as
        the tile [1, CTAS, PER_CTA] (split by CTA), what the kernel loads into ``layout``. ``rank=5``: the halves
        kernel's box (x viewed as [M, CTAS, 4, Q // 256, 256]; ``stage_view`` then views one quarter)."""
        bits = range(log2(self.num_ctas))
        return dict(stage=gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8 * DTYPES[self.dtype].bytes,
                                               rank=rank, cga_layout=[[0, 1 << i] + [0] * (rank - 2) for i in bits]),
                    stage_view=gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0], cga_layout=[[0, 1 << i, 0] for i in bits]))

    def explain(self) -> str:
        head = (f"N={self.N} {self.dtype}: {self.num_ctas} CTA(s) x {self.num_warps} warp(s), "
                f"{self.block_m} row(s) of {self.block_n} per program, {self.vec}-wide vectors, "
                f"{self.values_per_thread} values per thread"
                + (", pipelined (persistent clusters, the next block's loads in flight)"
                   if self.exchange == "pipelined" else "")
                + (", staged (persistent clusters, the next row's TMA load into shared memory in flight)"
                   if self.exchange == "staged" else "")
                + (", in halves (persistent clusters; each CTA's first half in registers, the second in shared "
                   "memory by TMA)" if self.exchange == "halves" else ""))
        return "\n".join([head] + [f"  - {r}" for r in self.reasons])


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _check_pow2(name, value, limit):
    if not isinstance(value, int) or value < 1 or value & (value - 1) or value > limit:
        raise ValueError(f"{name} must be a power of two between 1 and {limit}, got {value!r}")


def make_config(N: int, num_ctas: int = 1, num_warps: int = 4, block_m: int = 1,
                dtype: str = "float32", reasons=(), exchange: str = "one_round") -> SoftmaxConfig:
    """Build the layouts for a row width, cluster size, warp count and rows per program; ``exchange`` is the one
    :func:`multicta_softmax` uses by default (EXCHANGES; "pipelined" needs a cluster and registers for two blocks)."""
    if exchange not in EXCHANGES:
        raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
    if dtype not in DTYPES:
        raise TypeError(f"softmax supports {', '.join(DTYPES)}, not {dtype}")
    if not isinstance(N, int) or N < 1:
        raise ValueError(f"the row width N must be a positive integer, got {N!r}")
    check_cluster_size(num_ctas)
    _check_pow2("num_warps", num_warps, MAX_WARPS)
    _check_pow2("block_m", block_m, 1 << 16)
    block_n = _pow2(N)
    if block_n < num_ctas:
        raise ValueError(f"a row of {N} elements cannot be split over {num_ctas} CTAs; use at most {block_n}")
    per_cta = block_n // num_ctas                       # columns each CTA owns
    vec = min(16 // DTYPES[dtype].bytes, per_cta)   # 16-byte loads where the row allows
    tpw_n = min(32, per_cta // vec)                     # lanes along the row ...
    tpw_m = 32 // tpw_n                                 # ... the rest stack rows
    wpc_n = min(num_warps, per_cta // (vec * tpw_n))    # warps along the row ...
    wpc_m = num_warps // wpc_n                          # ... the rest stack rows
    block_m = max(block_m, tpw_m * wpc_m)               # no lane left without a row
    bits = range(log2(num_ctas))
    layout_2d = gl.BlockedLayout([1, vec], [tpw_m, tpw_n], [wpc_m, wpc_n], [1, 0],
                                 cga_layout=[[0, 1 << i] for i in bits])        # CTAs split the columns
    layout = gl.BlockedLayout([1, 1, vec], [tpw_m, 1, tpw_n], [wpc_m, 1, wpc_n], [2, 1, 0],
                              cga_layout=[[0, 1 << i, 0] for i in bits])        # ... as their own axis
    cfg = SoftmaxConfig(N, dtype, num_ctas, num_warps, block_m, block_n, vec, layout, layout_2d, tuple(reasons),
                        exchange)
    if cfg.values_per_thread > MAX_VALUES_PER_THREAD:
        raise ValueError(
            f"{cfg.values_per_thread} values per thread would spill registers (limit "
            f"{MAX_VALUES_PER_THREAD}); use more CTAs or warps, or fewer rows per program")
    if exchange == "pipelined":
        check_pipelined(cfg)
    if exchange == "staged":
        check_staged(cfg)
    if exchange == "halves":
        check_halves(cfg)
    return cfg


# The pipelined kernel holds a block's fp32 values and the next block's loads (in x's dtype) at once: at most this many
# bytes per thread. 128 fp16/bf16 values (128 x (4 + 2)) compile to 255 registers without a spill; 128 fp32 values
# (128 x 8) spill 852 bytes (lens.resources() on the CPU: tests/test_softmax_pipelined.py checks both).
PIPELINED_BYTES_PER_THREAD = MAX_VALUES_PER_THREAD * (4 + 2)
PIPELINED_MAX_WARPS = 8          # and one row per program: ptxas spills with more (tests/test_softmax_pipelined.py)


def check_pipelined(cfg: SoftmaxConfig) -> None:
    """Refuse a configuration the pipelined kernel cannot run without spilling, with what to change."""
    if cfg.num_ctas < 2:
        raise ValueError("exchange='pipelined' needs a cluster of 2 or more CTAs (it stores into peers' shared "
                         "memory); one CTA needs no exchange: use exchange='one_round'")
    lanes = cfg.num_ctas * cfg.num_warps * 32 * cfg.vec            # columns one row of the cluster's threads covers
    if cfg.block_m != 1 and lanes > cfg.block_n:
        raise ValueError(
            f"exchange='pipelined' takes one row per program: rows of {cfg.N} (a {cfg.block_n}-wide tile) are too "
            f"short for {cfg.num_ctas} CTAs x {cfg.num_warps} warps ({lanes} columns of {cfg.vec}-wide vectors), so "
            f"the layout stacks {cfg.block_m} rows; use fewer CTAs or warps, or exchange='one_round'")
    if cfg.block_m != 1 or cfg.num_warps > PIPELINED_MAX_WARPS:
        raise ValueError(
            f"exchange='pipelined' takes one row per program and at most {PIPELINED_MAX_WARPS} warps (more rows or a "
            f"16-warp CTA's 128 registers a thread spill two blocks), got {cfg.block_m} row(s) and {cfg.num_warps} "
            "warps; use more CTAs, or exchange='one_round'")
    need = cfg.values_per_thread * (4 + DTYPES[cfg.dtype].bytes)
    if need > PIPELINED_BYTES_PER_THREAD:
        most = 1 << (PIPELINED_BYTES_PER_THREAD // (4 + DTYPES[cfg.dtype].bytes)).bit_length() - 1
        raise ValueError(
            f"exchange='pipelined' holds two blocks per thread: {cfg.values_per_thread} {cfg.dtype} values need "
            f"{need} bytes (limit {PIPELINED_BYTES_PER_THREAD}, at most {most} values per thread); use more CTAs "
            "or warps, or exchange='one_round'")


# The staged kernel keeps a CTA's slice of the next row in shared memory: a power of two of at most this many bytes (the
# next, 256 KiB, is more than the 227 KiB a CTA can have). A 16-warp CTA has 128 registers a thread: 64 values at most.
STAGED_MAX_BYTES = 128 * 1024
STAGED_MIN_PER_CTA = 256         # one TMA box row: x is viewed as [M, CTAS, PER_CTA // 256, 256]


def check_staged(cfg: SoftmaxConfig) -> None:
    """Refuse a configuration the staged kernel cannot run (or would spill), with what to change."""
    if cfg.num_ctas < 2:
        raise ValueError("exchange='staged' needs a cluster of 2 or more CTAs (it stores into peers' shared memory); "
                         "one CTA needs no exchange: use exchange='one_round'")
    if cfg.N != cfg.block_n:
        raise ValueError(f"exchange='staged' takes rows whose width is a power of two (its TMA box is the whole "
                         f"row), got N={cfg.N}; use exchange='one_round' or 'pipelined'")
    per_cta = cfg.block_n // cfg.num_ctas
    if cfg.block_m != 1 or per_cta < STAGED_MIN_PER_CTA:
        raise ValueError(f"exchange='staged' takes one row per program and at least {STAGED_MIN_PER_CTA} columns per "
                         f"CTA, got {cfg.block_m} row(s) of {cfg.block_n} over {cfg.num_ctas} CTAs x "
                         f"{cfg.num_warps} warps; use fewer CTAs or warps")
    nbytes = per_cta * DTYPES[cfg.dtype].bytes
    if nbytes > STAGED_MAX_BYTES:
        raise ValueError(f"exchange='staged' stages {nbytes // 1024} KiB of the row per CTA, more than "
                         f"{STAGED_MAX_BYTES // 1024} KiB; use more CTAs")
    if cfg.num_warps == MAX_WARPS and cfg.values_per_thread > 64:
        raise ValueError(f"exchange='staged' with {MAX_WARPS} warps has 128 registers a thread: "
                         f"{cfg.values_per_thread} values per thread would spill (at most 64); use fewer warps")


# The halves kernel keeps the first half of a CTA's slice in registers and the second in shared memory, plus a third
# buffer there for the next row's first quarter: three quarters of the slice, at most HALVES_MAX_BYTES (the next power
# of two's three quarters, 384 KiB, is more than the 227 KiB a CTA can have). It reads the shared memory back
# HALVES_CHUNK_VALUES a thread at a time: rows of 1048576 fp32 over 16 CTAs.
HALVES_CHUNK_VALUES = 16
HALVES_MAX_BYTES = 192 * 1024


def check_halves(cfg: SoftmaxConfig) -> None:
    """Refuse a configuration the halves kernel cannot run (or would spill), with what to change."""
    if cfg.dtype != "float32":
        raise ValueError(f"exchange='halves' takes float32 rows ({cfg.dtype} spills registers there, 64 values a "
                         f"thread included); {cfg.dtype} rows of up to {MAX_N} fit exchange='staged'")
    if cfg.num_ctas < 2:
        raise ValueError("exchange='halves' needs a cluster of 2 or more CTAs (it stores into peers' shared memory); "
                         "one CTA needs no exchange: use exchange='one_round'")
    if cfg.N != cfg.block_n:
        raise ValueError(f"exchange='halves' takes rows whose width is a power of two (its TMA box is a quarter of a "
                         f"CTA's slice), got N={cfg.N}; use exchange='one_round'")
    quarter = cfg.block_n // (4 * cfg.num_ctas)
    if cfg.block_m != 1 or quarter < STAGED_MIN_PER_CTA or quarter < 32 * cfg.num_warps * cfg.vec:
        raise ValueError(f"exchange='halves' takes one row per program and at least "
                         f"{max(STAGED_MIN_PER_CTA, 32 * cfg.num_warps * cfg.vec)} columns in each quarter of a CTA's "
                         f"slice, got {cfg.block_m} row(s) of {cfg.block_n} over {cfg.num_ctas} CTAs x "
                         f"{cfg.num_warps} warps; use fewer CTAs or warps")
    nbytes = 3 * quarter * DTYPES[cfg.dtype].bytes
    if nbytes > HALVES_MAX_BYTES:
        raise ValueError(f"exchange='halves' keeps {nbytes // 1024} KiB of the row per CTA in shared memory (three "
                         f"quarters of its slice), more than {HALVES_MAX_BYTES // 1024} KiB; use more CTAs")
    if cfg.num_warps == MAX_WARPS and cfg.values_per_thread > 64:
        raise ValueError(f"exchange='halves' with {MAX_WARPS} warps has 128 registers a thread: "
                         f"{cfg.values_per_thread} values per thread would spill (at most 64); use fewer warps")


# When no sweep was recorded for a width: fitted to the sweeps recorded on an H200.
ONE_CTA_MAX_N = 32768        # up to here one CTA holds a row: no cluster traffic at all
VALUES_PER_THREAD = 16       # short rows: ~16 values per thread, extra warps stack rows
WIDE_VALUES = 128            # wide rows: 4 warps per CTA, 128 values per thread, as few CTAs as that allows


SWEEPS = ("softmax_sweep.json", "softmax_sweep_wide.json", "softmax_sweep_half.json",  # recorded in results/<gpu>/
          "softmax_sweep_staged.json", "softmax_sweep_halves.json")
SWEEPS_DATA = "softmax_sweeps.json"      # ... as package data (multicta_kernels/data/), written by tools/update_data.py


@functools.lru_cache(maxsize=None)
def recorded_sweeps(gpu_folder: str = "h200") -> tuple:
    """Every configuration the recorded sweeps measured on one GPU (each with its ``dtype``): (records, provenance),
    from the package's
    data (``data/softmax_sweeps.json``, generated from results/<gpu>/softmax_sweep*.json by tools/update_data.py):
    the picker reads no file outside the package."""
    import json
    from importlib import resources
    sweeps = json.loads(resources.files(__package__).joinpath("data", SWEEPS_DATA).read_text())
    if gpu_folder not in sweeps:
        return (), None
    got = sweeps[gpu_folder]
    return tuple(dict(zip(got["columns"], r)) for r in got["rows"]), {"gpu": got["gpu"], "date": got["date"]}


def recorded_best(N: int, gpu_folder: str = "h200", dtype: str = "float32"):
    """The best measured (CTAs, warps, rows per program, exchange) for rows of ``N`` in ``dtype``, its fraction of copy
    bandwidth, the runner-up and how many were measured; None if nothing was recorded for that tile and dtype. Each
    configuration counts with its measurement on rows of exactly ``N`` where the sweeps made one, else on rows of the
    same power of two (the same tile: rows of 3000 and 4096 share one, not their best configuration)."""
    validate.count(N, "N", high=1 << 31)
    validate.dtype(dtype)
    recs, meta = recorded_sweeps(gpu_folder)
    same = [r for r in recs if _pow2(r["N"]) == _pow2(N) and r["values_per_thread"] <= MAX_VALUES_PER_THREAD
            and r.get("dtype", "float32") == dtype]
    best_of = {}              # one entry per configuration that runs rows of N: its best measurement on rows of N
    for r in sorted(same, key=lambda r: (r["N"] != N, -r["fraction_of_copy"])):    # if any, else on the same tile
        cfg = (r["num_ctas"], r["num_warps"], r["block_m"], r.get("exchange") or "one_round")
        if cfg not in best_of and _runs(N, dtype, cfg):
            best_of[cfg] = r
    rows = sorted(best_of.values(), key=lambda r: -r["fraction_of_copy"])
    if not rows:
        return None
    return {"best": rows[0], "runner_up": rows[1] if len(rows) > 1 else None, "measured": len(rows),
            "rows_of": rows[0]["N"], "gpu": meta["gpu"], "date": rows[0].get("date", meta["date"])}


def _runs(N, dtype, cfg) -> bool:
    """Whether make_config accepts (CTAs, warps, rows, exchange) for rows of N (the staged kernel needs a power of
    two: its records at 262144 say nothing of rows of 200000)."""
    try:
        make_config(N, *cfg[:3], dtype, exchange=cfg[3])
    except ValueError:
        return False
    return True


def _cfg_text(r) -> str:
    extra = {"pipelined": " with the pipelined exchange", "staged": " with the next row staged by TMA",
             "halves": " in halves (registers and shared memory)"}
    return (f"{r['num_ctas']} CTA(s) x {r['num_warps']} warp(s) x {r['block_m']} row(s)"
            + extra.get(r.get("exchange"), ""))


def pick_config(N: int, dtype: str = "float32") -> SoftmaxConfig:
    """Choose CTAs, warps and rows per program for rows of ``N`` elements, with the reasons: the best
    configuration of the recorded sweep for this width and dtype when there is one, a rule fitted to
    the fp32 sweeps otherwise."""
    if dtype not in DTYPES:
        raise TypeError(f"softmax supports {', '.join(DTYPES)}, not {dtype}")
    if not isinstance(N, int) or N < 1:
        raise ValueError(f"the row width N must be a positive integer, got {N!r}")
    if N > MAX_N:
        raise ValueError(
            f"rows of {N} elements do not fit in a 16-CTA cluster's registers (at most {MAX_N}); "
            "use online_softmax (one CTA per row, any width)")
    block_n = _pow2(N)
    rec = recorded_best(N, dtype=dtype)
    if rec:
        b, r2 = rec["best"], rec["runner_up"]
        rows_of = str(rec["rows_of"]) + ("" if rec["rows_of"] == N else f" (the same {block_n}-wide tile)")
        reasons = [f"measured on the {rec['gpu']} ({rec['date']}, results/h200/softmax_sweep*.json): {_cfg_text(b)} "
                   f"moved {dtype} rows of {rows_of} at {b['fraction_of_copy']:.3f} of the copy bandwidth, the best "
                   f"of {rec['measured']} configurations tried"]
        if r2:
            reasons.append(f"runner-up: {_cfg_text(r2)} at {r2['fraction_of_copy']:.3f}")
        reasons.append(f"{b['values_per_thread']} values per thread stay in registers from load to store"
                       + (", the other half of each CTA's slice in shared memory" if b.get("exchange") == "halves"
                          else ""))
        if b["num_ctas"] == 1:
            reasons.append("one CTA holds the row: no cluster, no cross-CTA traffic")
        else:
            reasons.append(f"{b['num_ctas']} CTAs share each row: max and sum stay inside each CTA, one cross-CTA "
                           "exchange merges the (max, sum) pairs")
        exchange = b.get("exchange") or "one_round"            # null: measured before the column, one_round
        if exchange == "pipelined":
            reasons.append("pipelined: as many clusters as fit on the GPU at once walk the row blocks, each loading "
                           "its next block while it exchanges and stores this one")
        if exchange == "halves":
            reasons.append("halves: as many clusters as fit on the GPU at once walk the rows, each CTA holding the "
                           "first half of its slice in registers and the second in shared memory (by TMA: the row is "
                           "wider than the cluster's registers), the next row's first quarter landing through this "
                           "row's whole turn and its second half while this row's first half is stored")
        if exchange == "staged":
            reasons.append("staged: as many clusters as fit on the GPU at once walk the rows, each CTA's TMA loading "
                           "its slice of the next row into shared memory while it exchanges and stores this one")
        return make_config(N, b["num_ctas"], b["num_warps"], b["block_m"], dtype, reasons, exchange)
    if block_n <= ONE_CTA_MAX_N:
        num_warps = min(MAX_WARPS, max(1, block_n // (32 * VALUES_PER_THREAD)))
        block_m = max(1, 32 * num_warps * VALUES_PER_THREAD // block_n)
        reasons = [f"no recorded sweep for this width: the rule fitted to the H200 sweeps. A row of {block_n} fits "
                   f"one CTA's registers (<= {ONE_CTA_MAX_N}): no cluster, no cross-CTA traffic",
                   f"{num_warps} warp(s) x 32 lanes x {block_m * block_n // (32 * num_warps)} values per thread "
                   f"cover {block_m} row(s) per program"]
        return make_config(N, 1, num_warps, block_m, dtype, reasons)
    num_warps = 4
    num_ctas = min(MAX_CLUSTER_CTAS, max(2, block_n // (num_warps * 32 * WIDE_VALUES)))
    num_warps = max(num_warps, block_n // (num_ctas * 32 * WIDE_VALUES))
    reasons = [f"no recorded sweep for this width: the rule fitted to the H200 sweeps. A row of {block_n} is too "
               f"wide for one CTA: {num_ctas} CTAs x {num_warps} warps, {block_n // (num_ctas * num_warps * 32)} "
               "values per thread (few CTAs: each cross-CTA exchange waits for all of them)"]
    return make_config(N, num_ctas, num_warps, 1, dtype, reasons)


def multicta_softmax(x, out=None, *, config: SoftmaxConfig | None = None, two_pass: bool = False,
                     exchange: str | None = None, instrument: bool = False, kernel=None):
    """Softmax over the last dimension of a 2-D CUDA tensor (fp32, fp16 or bf16).

    Rows may be strided (``x[:, :N]`` of a wider tensor); elements within a row must be
    contiguous. ``out`` (optional) receives the result and may be ``x`` itself; nothing is written
    to it if the call is rejected. ``two_pass=True`` runs the chapter's first kernel (two
    cross-CTA reductions) instead of the fused one (``exchange`` does not apply to it). ``exchange`` picks how the fused kernel merges the
    CTAs' (max, sum) pairs: "compiler" (``gl.reduce`` across the CTAs: two exchanges through cluster
    barriers) or "one_round" (``softmax_one_round_kernel``: every CTA stores its pairs into every CTA's
    shared memory and waits once; faster than the compiler's on every width and dtype measured on the H200:
    results/h200/softmax_exchange.json) or "pipelined" (``softmax_pipelined_kernel``: the same round in persistent
    clusters, as many as fit on the GPU at once, each loading its next row block while it exchanges and stores this
    one) or "staged" (``softmax_staged_kernel``: the next row staged in shared memory by TMA); the default is
    ``config.exchange``, the one the recorded sweep measured best (a staged default on rows TMA cannot read, not
    starting on 16 bytes, runs one round instead; asked for, they are refused); one CTA needs no exchange.
    ``instrument=True`` compiles the timeline scopes in (they record only under proton: see
    ``multicta_kernels.measure.traces``). ``kernel`` launches
    another ``@gluon.jit`` function with ``softmax_kernel``'s parameters in its place (a copy you changed, as in
    chapter 1's "Change it and see", with the compiler's exchange; ``config_of(spec)`` gives the configuration of
    its lens spec).
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows, columns), got shape {tuple(x.shape)}; "
                         "reshape it, e.g. x.reshape(-1, x.shape[-1])")
    if dtype_name(x.dtype) not in DTYPES:
        raise TypeError(f"x has dtype {x.dtype}; the softmax supports float32, float16 and bfloat16")
    M, N = x.shape
    if N > MAX_N:
        raise ValueError(f"rows of {N} elements do not fit in a 16-CTA cluster's registers "
                         f"(at most {MAX_N}); split the rows and combine them with an online softmax")
    if N > 1 and x.stride(1) != 1:
        raise ValueError(f"x.stride(1) is {x.stride(1)}: the kernel reads each row as contiguous memory; "
                         "pass x.contiguous() (strided rows, x.stride(0) != N, are fine)")
    if out is None:
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    else:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        if tuple(out.shape) != (M, N) or out.dtype != x.dtype or out.device.type != x.device.type:
            raise ValueError(f"out must be a {tuple(x.shape)} {x.dtype} tensor on {x.device}, got "
                             f"{tuple(out.shape)} {out.dtype} on {out.device}")
        if N > 1 and out.stride(1) != 1:
            raise ValueError(f"out.stride(1) is {out.stride(1)}: each output row must be contiguous")
        if M > 1 and out.stride(0) < N:
            raise ValueError(f"out.stride(0) is {out.stride(0)} < N = {N}: output rows would overlap")
    if exchange is not None and exchange not in EXCHANGES:
        raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
    if kernel is not None:
        from triton.experimental.gluon._runtime import GluonJITFunction
        if not isinstance(kernel, GluonJITFunction):
            raise TypeError(f"kernel must be a @gluon.jit function, got {type(kernel).__name__}")
        if kernel.arg_names != softmax_kernel.arg_names:
            raise ValueError(f"kernel must take softmax_kernel's parameters {softmax_kernel.arg_names}, got "
                             f"{kernel.arg_names}")
        if two_pass or exchange not in (None, "compiler"):
            raise ValueError("kernel replaces the fused softmax_kernel (the compiler's exchange): leave two_pass=False "
                             "and exchange unset")
    if config is None:
        config = pick_config(N, dtype_name(x.dtype))
    elif not isinstance(config, SoftmaxConfig):
        raise TypeError(f"config must be a SoftmaxConfig (make_config or pick_config), got {type(config).__name__}")
    elif config.block_n < N or config.dtype != dtype_name(x.dtype):
        raise ValueError(f"config was made for N={config.N} {config.dtype}, not N={N} {dtype_name(x.dtype)}; "
                         f"build one with pick_config({N}, {dtype_name(x.dtype)!r})")
    asked = exchange
    if exchange is None:                       # the configuration's, unless a copy of softmax_kernel is given
        exchange = "compiler" if kernel is not None else config.exchange
    if exchange == "pipelined" and not two_pass:
        check_pipelined(config)
    if exchange in ("staged", "halves") and not two_pass:
        problem = _staged_input_problem(x, config, exchange)
        if problem and asked == exchange:
            raise ValueError(problem)
        if problem:                            # the configuration's default: rows TMA cannot read run one round
            exchange = "one_round"
    require(CLUSTERS, "multicta_softmax")
    check_on_gpu(x, "x")
    if M == 0 or N == 0:
        return out
    align = alignment(N, x, out, config.vec)
    if two_pass:
        kernel, extra = softmax_two_pass_kernel, dict(layout=config.layout_2d)
    elif exchange in ("one_round", "pipelined") and config.num_ctas > 1:
        kernel = softmax_pipelined_kernel if exchange == "pipelined" else softmax_one_round_kernel
        extra = dict(layout=config.layout, **config.exchange_layouts(), INSTRUMENT=instrument)
    else:
        kernel, extra = kernel or softmax_kernel, dict(layout=config.layout, INSTRUMENT=instrument)
    args = (x, out, M, N // align, x.stride(0) // align, out.stride(0) // align)
    meta = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, ALIGN=align, **extra, num_warps=config.num_warps,
                num_ctas=config.num_ctas)
    blocks = math.ceil(M / config.block_m)
    if exchange in ("staged", "halves") and not two_pass:  # persistent, (half) a row staged by TMA
        launch = staged_launch if exchange == "staged" else halves_launch
        kernel, args, meta = launch(x, out, config, align, instrument)
        blocks = min(M, resident_programs(kernel, args, meta, config))
    if kernel is softmax_pipelined_kernel:                 # persistent: the clusters that fit at once, no more
        blocks = min(blocks, resident_programs(kernel, args, meta, config))
        reach = (2 * blocks + 1) * config.block_m               # past M, the loop's last rows + 2 * step
        if M + reach > 2**31 - 1:                                # its row indices are 32-bit
            raise ValueError(f"exchange='pipelined' walks rows with 32-bit indices: M = {M} is within {reach} of "
                             "2**31; use exchange='one_round'")
    kernel[(blocks,)](*args, **meta)
    return out


def _staged_input_problem(x, config: SoftmaxConfig, exchange: str = "staged") -> str | None:
    """What keeps the staged (or halves) kernel's TMA descriptor from reading x (one line), None if nothing; checked
    before any hardware is touched."""
    (check_staged if exchange == "staged" else check_halves)(config)
    M, N = x.shape
    if M == 0 or N == 0:
        return None
    if N != config.block_n:
        return (f"exchange={exchange!r} was configured for rows of {config.block_n}, got N={N}; build the "
                f"configuration with make_config({N}, ..., exchange={exchange!r}) (N a power of two)")
    if M > 1 and x.stride(0) < N:
        return (f"exchange={exchange!r} reads x by TMA, whose rows may not overlap: x.stride(0) = {x.stride(0)} < N = {N} "
                "(an expanded x); pass x.contiguous() or use exchange='one_round'")
    if M > 1 and x.stride(0) * x.element_size() % 16:
        return (f"exchange={exchange!r} reads x by TMA: its rows must start on 16-byte boundaries (x.stride(0) = "
                f"{x.stride(0)} elements of {x.element_size()} bytes); pass x.contiguous() or use exchange='one_round'")
    if x.data_ptr() % 16:
        return (f"exchange={exchange!r} reads x by TMA: x must start on a 16-byte boundary (its address is "
                f"{x.data_ptr() % 16} bytes past one); pass x.clone() or use exchange='one_round'")
    # Its 32-bit row + step (step: the clusters resident at once) cannot pass 2**31: that needs M near 2**31 rows of
    # at least 512 columns, terabytes.
    return None


def staged_launch(x, out, config: SoftmaxConfig, align: int, instrument: bool):
    """(kernel, args, meta) of softmax_staged_kernel for x: a TMA descriptor viewing x as
    [M, CTAS, PER_CTA // 256, 256], whose box is one row (each CTA its slice)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    M, N = x.shape
    c, per = config.num_ctas, N // config.num_ctas
    lay = config.stage_layouts()
    desc = TensorDescriptor(x, [M, c, per // 256, 256], [x.stride(0) if M > 1 else N, per, 256, 1],
                            [1, c, per // 256, 256], lay["stage"])
    args = (desc, out, M, N // align, out.stride(0) // align)
    meta = dict(BLOCK_N=config.block_n, ALIGN=align, layout=config.layout, **config.exchange_layouts(),
                stage_view=lay["stage_view"], INSTRUMENT=instrument, num_warps=config.num_warps,
                num_ctas=config.num_ctas)
    return softmax_staged_kernel, args, meta


def halves_launch(x, out, config: SoftmaxConfig, align: int, instrument: bool):
    """(kernel, args, meta) of softmax_halves_kernel for x: a TMA descriptor viewing x as
    [M, CTAS, 4, Q // 256, 256], whose box is one quarter of each CTA's slice of one row."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    M, N = x.shape
    c, q = config.num_ctas, N // (4 * config.num_ctas)
    lay = config.stage_layouts(rank=5)
    desc = TensorDescriptor(x, [M, c, 4, q // 256, 256], [x.stride(0) if M > 1 else N, 4 * q, q, 256, 1],
                            [1, c, 1, q // 256, 256], lay["stage"])
    args = (x, desc, out, M, x.stride(0) // align, out.stride(0) // align)
    meta = dict(BLOCK_N=config.block_n, ALIGN=align, layout=config.layout, **config.exchange_layouts(),
                quarter_view=lay["stage_view"], CHUNK=config.chunk, INSTRUMENT=instrument, num_warps=config.num_warps,
                num_ctas=config.num_ctas)
    return softmax_halves_kernel, args, meta


_RESIDENT = {}


def resident_programs(kernel, args, meta, config: SoftmaxConfig) -> int:
    """How many clusters of ``kernel`` (compiled for these arguments with ``config``) fit on the current GPU at once:
    the persistent grid. Asked once per configuration, dtype, alignment and GPU (CUDA's occupancy calculator,
    :func:`core.occupancy.max_clusters`; it may overestimate for CTAs of other than 4 warps: then the last clusters
    wait for a first wave to finish, slower, not wrong)."""
    import torch

    from .core.occupancy import max_clusters
    key = (kernel.__name__, config.num_ctas, config.num_warps, config.block_m, config.block_n, config.dtype,
           meta["ALIGN"], torch.cuda.current_device())
    if key not in _RESIDENT:
        compiled = kernel.warmup(*args, **meta, grid=(1,))
        _RESIDENT[key] = max(1, max_clusters(compiled, config.num_ctas))
    return _RESIDENT[key]


def config_of(spec) -> SoftmaxConfig:
    """The configuration a lens spec of the fused kernel (``softmax_spec``, or a reader's copy of it made with
    ``lens.with_kernel``) compiles with, its layout included: what ``multicta_softmax(..., config=config_of(spec),
    kernel=spec.fn)`` launches, for rows of up to ``BLOCK_N`` elements."""
    c, o = spec.constexprs, spec.options
    cfg = make_config(c["BLOCK_N"], o.get("num_ctas", 1), o.get("num_warps", 4), c["BLOCK_M"],
                      dtype_name(spec.signature["x_ptr"].lstrip("*")))
    return replace(cfg, layout=c["layout"])


def alignment(N: int, x, out, vec: int) -> int:
    """The largest power of two (up to one 16-byte vector) dividing N and both row strides: sizes are
    passed divided by it, so the compiler can prove rows 16-byte aligned and keep vector loads."""
    align = vec
    while align > 1 and (N % align or x.stride(0) % align or out.stride(0) % align):
        align //= 2
    return align


# Every softmax: 16-byte loads and stores, warp-shuffle reductions, exp as one ex2.approx. With a cluster:
_EXPECT_ROW = ("ld.global.v4", "st.global.v4", "shfl.sync.bfly", "ex2.approx")
_EXPECT_CLUSTER = (".reqnctapercluster", "mapa.shared::cluster", "ld.shared::cluster", "barrier.cluster.arrive",
                   "barrier.cluster.wait")


# The one-round exchange: asynchronous stores into every CTA's shared memory, counted in bytes on its barrier.
_EXPECT_ONE_ROUND = (".reqnctapercluster", "mapa.shared::cluster", "st.async", "mbarrier::complete_tx::bytes",
                     "mbarrier.try_wait.parity.acquire.cluster", "fence.mbarrier_init.release.cluster")


def kernel_spec(name, kernel, use_2d, num_ctas, N, num_warps, block_m, dtype, instrument=False):
    """A softmax kernel as the lens compiles it (default row: 16384 columns per CTA)."""
    num_ctas = validate.cluster_size(num_ctas)
    N = 16384 * num_ctas if N is None else validate.count(N, "N", high=1 << 31)
    num_warps = validate.optional_count(num_warps, "num_warps", high=MAX_WARPS)
    block_m = validate.optional_count(block_m, "block_m", high=1 << 16)
    validate.boolean(instrument, "instrument")
    cfg = pick_config(N, dtype)
    block_m = cfg.block_m if block_m is None else block_m
    if num_warps is None:                    # the pick's warps, doubled while another cluster size would spill them
        num_warps = cfg.num_warps
        while block_m * _pow2(N) > MAX_VALUES_PER_THREAD * 32 * num_warps * num_ctas and num_warps < MAX_WARPS:
            num_warps *= 2
    cfg = make_config(N, num_ctas, num_warps, block_m, dtype)
    ty = DTYPES[dtype].short
    one_round = kernel in (softmax_one_round_kernel, softmax_pipelined_kernel)
    extra = cfg.exchange_layouts() if one_round else {}
    sig = {"x_ptr": f"*{ty}", "out_ptr": f"*{ty}", "M": "i32", "n_div": "i32", "x_stride_div": "i32",
           "out_stride_div": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "ALIGN": "constexpr",
           "layout": "constexpr", **{k: "constexpr" for k in extra},
           **({} if use_2d else {"INSTRUMENT": "constexpr"})}
    expect = _EXPECT_ROW + ((_EXPECT_ONE_ROUND if one_round else _EXPECT_CLUSTER) if num_ctas > 1 else ())
    return lens.KernelSpec(
        name=name, fn=kernel, signature=sig,
        constexprs={"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "ALIGN": cfg.vec,
                    "layout": cfg.layout_2d if use_2d else cfg.layout, **extra,
                    **({} if use_2d else {"INSTRUMENT": instrument})},
        options={"num_warps": cfg.num_warps, "num_ctas": num_ctas}, expect=expect, divisible=("x_ptr", "out_ptr"))


def softmax_spec(num_ctas: int = 1, N: int | None = None, num_warps: int | None = None,
                 block_m: int | None = None, dtype: str = "float32", instrument: bool = False) -> lens.KernelSpec:
    """The fused softmax as the lens compiles it (default row: 16384 columns per CTA)."""
    return kernel_spec("softmax", softmax_kernel, False, num_ctas, N, num_warps, block_m, dtype, instrument)


def softmax_one_round_spec(num_ctas: int = 2, N: int | None = None, num_warps: int | None = None,
                           block_m: int | None = None, dtype: str = "float32", instrument: bool = False) -> lens.KernelSpec:
    """The fused softmax with its one-round exchange (st.async into every CTA), for clusters of 2 or more."""
    check_cluster_size(num_ctas, low=2)
    return kernel_spec("softmax_one_round", softmax_one_round_kernel, False, num_ctas, N, num_warps, block_m, dtype,
                       instrument)


def softmax_pipelined_spec(num_ctas: int = 2, N: int | None = None, num_warps: int | None = 4,
                           block_m: int | None = 1, dtype: str = "float16",
                           instrument: bool = False) -> lens.KernelSpec:
    """The pipelined softmax (persistent clusters, the next block's loads in flight through the one-round exchange),
    for clusters of 2 or more; by default in fp16, the dtype it was built for."""
    check_cluster_size(num_ctas, low=2)
    spec = kernel_spec("softmax_pipelined", softmax_pipelined_kernel, False, num_ctas, N, num_warps, block_m, dtype,
                       instrument)
    c, o = spec.constexprs, spec.options
    check_pipelined(make_config(c["BLOCK_N"], num_ctas, o["num_warps"], c["BLOCK_M"], dtype))
    return spec


_EXPECT_STAGED = ("cp.async.bulk.tensor.4d", "st.global.v4", "shfl.sync.bfly", "ex2.approx") + _EXPECT_ONE_ROUND


def softmax_staged_spec(num_ctas: int = 2, N: int | None = None, num_warps: int = 4, dtype: str = "float32",
                        instrument: bool = False) -> lens.KernelSpec:
    """The staged softmax (persistent clusters, the next row's TMA load into shared memory in flight), for clusters
    of 2 or more (default row: 16384 columns per CTA)."""
    check_cluster_size(num_ctas, low=2)
    N = 16384 * num_ctas if N is None else validate.count(N, "N", high=1 << 31)
    validate.boolean(instrument, "instrument")
    cfg = make_config(N, num_ctas, num_warps, 1, dtype, exchange="staged")
    lay, extra = cfg.stage_layouts(), cfg.exchange_layouts()
    per = cfg.block_n // num_ctas
    sig = {"x_desc": descriptor_type(DTYPES[dtype].gl, [1, num_ctas, per // 256, 256], lay["stage"]),
           "out_ptr": f"*{DTYPES[dtype].short}", "M": "i32", "n_div": "i32", "out_stride_div": "i32",
           **{k: "constexpr" for k in ("BLOCK_N", "ALIGN", "layout", *extra, "stage_view", "INSTRUMENT")}}
    return lens.KernelSpec(
        name="softmax_staged", fn=softmax_staged_kernel, signature=sig,
        constexprs={"BLOCK_N": cfg.block_n, "ALIGN": cfg.vec, "layout": cfg.layout, **extra,
                    "stage_view": lay["stage_view"], "INSTRUMENT": instrument},
        options={"num_warps": num_warps, "num_ctas": num_ctas}, expect=_EXPECT_STAGED, divisible=("out_ptr",))


_EXPECT_HALVES = ("cp.async.bulk.tensor.5d", "ld.global.v4", "st.global.v4", "shfl.sync.bfly",
                  "ex2.approx") + _EXPECT_ONE_ROUND


def softmax_halves_spec(num_ctas: int = 16, N: int | None = None, num_warps: int = 8, dtype: str = "float32",
                        instrument: bool = False) -> lens.KernelSpec:
    """The softmax in halves (persistent clusters; each CTA's first half of a row in registers, the second in shared
    memory by TMA, the next row's first quarter prefetched by TMA), for clusters of 2 or more (default row: 65536 columns per CTA, rows of 1048576 at 16 CTAs)."""
    check_cluster_size(num_ctas, low=2)
    N = 65536 * num_ctas if N is None else validate.count(N, "N", high=1 << 31)
    validate.boolean(instrument, "instrument")
    cfg = make_config(N, num_ctas, num_warps, 1, dtype, exchange="halves")
    lay, extra = cfg.stage_layouts(rank=5), cfg.exchange_layouts()
    q = cfg.block_n // (4 * num_ctas)
    ty = DTYPES[dtype].short
    sig = {"x_ptr": f"*{ty}",
           "x_desc": descriptor_type(DTYPES[dtype].gl, [1, num_ctas, 1, q // 256, 256], lay["stage"]),
           "out_ptr": f"*{ty}", "M": "i32", "x_stride_div": "i32", "out_stride_div": "i32",
           **{k: "constexpr" for k in ("BLOCK_N", "ALIGN", "layout", *extra, "quarter_view", "CHUNK", "INSTRUMENT")}}
    return lens.KernelSpec(
        name="softmax_halves", fn=softmax_halves_kernel, signature=sig,
        constexprs={"BLOCK_N": cfg.block_n, "ALIGN": cfg.vec, "layout": cfg.layout, **extra,
                    "quarter_view": lay["stage_view"], "CHUNK": cfg.chunk, "INSTRUMENT": instrument},
        options={"num_warps": num_warps, "num_ctas": num_ctas}, expect=_EXPECT_HALVES, divisible=("x_ptr", "out_ptr"))


def softmax_two_pass_spec(num_ctas: int = 1, N: int | None = None, num_warps: int | None = None,
                          block_m: int | None = None, dtype: str = "float32") -> lens.KernelSpec:
    """The two-reduction softmax, for comparison."""
    return kernel_spec("softmax_two_pass", softmax_two_pass_kernel, True, num_ctas, N, num_warps, block_m, dtype)


# The upstream tutorial's 11 shapes (its B200 table in results/reference/) plus odd widths that need masks.
TUTORIAL_SHAPES = [(32768, 256), (32768, 512), (32768, 1024), (32768, 2048), (32768, 4096), (32768, 8192),
               (32768, 16384), (32768, 32768), (32768, 65536), (16384, 131072), (8192, 262144)]
ODD_SHAPES = [(32768, 1000), (32768, 3000), (16384, 50000), (8192, 200000)]
WIDE_SHAPES = [(32768, 65536), (16384, 131072), (8192, 262144)]


def candidates(N: int, dtype: str = "float32", max_ctas: int = MAX_CLUSTER_CTAS, min_values: int = 16,
               max_rows: int = 64):
    """Every sensible (CTAs, warps, rows per program) for rows of N: the sweep's search space (from
    ``min_values`` to MAX_VALUES_PER_THREAD fp32 values per thread, at most ``max_rows`` rows stacked)."""
    validate.count(N, "N", high=1 << 31)
    validate.dtype(dtype)
    validate.count(max_ctas, "max_ctas", high=MAX_CLUSTER_CTAS)
    validate.count(min_values, "min_values", high=1 << 10)
    validate.count(max_rows, "max_rows", high=1 << 16)
    block_n = _pow2(N)
    seen, out = set(), []
    for c in (1, 2, 4, 8, 16):
        if c > max_ctas or block_n // c < (1 if c == 1 else 2048):
            continue
        for w in (1, 2, 4, 8, 16):
            for vpt in (16, 32, 64, 128):
                bm = vpt * 32 * w * c // block_n
                if vpt < min_values or bm < 1 or bm > max_rows:   # bm > 1: rows stacked in one program
                    continue
                try:
                    cfg = make_config(N, c, w, bm, dtype)
                except ValueError:
                    continue
                key = (cfg.num_ctas, cfg.num_warps, cfg.block_m)
                if key not in seen:
                    seen.add(key)
                    out.append(cfg)
    return out


# ------------------------------------------------------------------------- baselines of the benchmark

def upstream_design_configs(N: int) -> list[tuple[int, int]]:
    """(CTAs, warps) worth trying for the upstream design: the smallest cluster that holds the row and
    two and four times it, 1 to 8 warps, 16 to 128 values per thread (fewer for rows under 512)."""
    validate.count(N, "N", high=1 << 31)
    block_n = _pow2(N)
    fewest = max(1, block_n // (8 * 32 * MAX_VALUES_PER_THREAD))     # the smallest cluster that holds the row
    return [(c, w) for c in (fewest, 2 * fewest, 4 * fewest) for w in (1, 2, 4, 8)
            if c <= MAX_CLUSTER_CTAS and min(16, block_n // 32) <= block_n // (32 * c * w) <= MAX_VALUES_PER_THREAD
            and (c == 1 or block_n // c >= 2048)]


def upstream_design(x, out, num_ctas: int, num_warps: int):
    """Launch :func:`upstream_design_kernel` (one row per program) on a CUDA tensor (fp32, fp16 or bf16, ``out`` of
    the same dtype: the baseline of every dtype the benchmarks measure); returns ``out``."""
    _check_upstream(num_ctas, num_warps)
    validate.tensor(x, "x", 2, _TORCH_FLOATS())
    validate.tensor(out, "out", 2, (x.dtype,))
    if tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"out must have x's shape {tuple(x.shape)}, got {tuple(out.shape)}")
    if _pow2(x.shape[1]) // num_ctas < 4 * 32 * num_warps:
        raise ValueError(f"num_ctas x num_warps ({num_ctas} x {num_warps}) is too many for rows of {x.shape[1]}: "
                         f"each CTA needs at least 128 x num_warps columns")
    require(CLUSTERS if num_ctas > 1 else CUDA, "upstream_design", instead=_GLUON_INSTEAD)
    check_on_gpu(x, "x")
    check_on_gpu(out, "out")
    M, N = x.shape
    block_n = _pow2(N)
    layout = gl.BlockedLayout([4], [32], [num_warps], [0], cga_layout=[[1 << i] for i in range(log2(num_ctas))])
    align = alignment(N, x, out, 4)
    upstream_design_kernel[(M,)](x, out, N // align, x.stride(0) // align, out.stride(0) // align, BLOCK_N=block_n,
                                 ALIGN=align, layout=layout, num_warps=num_warps, num_ctas=num_ctas)
    return out


def online_softmax(x, out=None, *, num_warps: int = 8, chunk: int = 4096):
    """Softmax of rows of any width with one CTA per row (:func:`online_softmax_kernel`), the baseline a
    cluster must beat on wide rows. CUDA tensors, fp32/fp16/bf16, contiguous rows."""
    import torch
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or dtype_name(x.dtype) not in DTYPES:
        raise TypeError("x must be a 2-D float32, float16 or bfloat16 tensor")
    if x.shape[1] > 1 and x.stride(1) != 1:
        raise ValueError(f"x.stride(1) is {x.stride(1)}: rows must be contiguous (x.contiguous())")
    _check_online(num_warps, chunk)
    if out is not None:
        validate.tensor(out, "out", 2, (x.dtype,))
        if tuple(out.shape) != tuple(x.shape):
            raise ValueError(f"out must have x's shape {tuple(x.shape)}, got {tuple(out.shape)}")
    require(CUDA, "online_softmax", instead=_GLUON_INSTEAD)
    check_on_gpu(x, "x")
    out = torch.empty_like(x) if out is None else out
    M, N = x.shape
    align = alignment(N, x, out, 16 // x.element_size())
    online_softmax_kernel[(M,)](x, out, N // align, x.stride(0) // align, out.stride(0) // align, CHUNK=chunk,
                                ALIGN=align, layout=gl.BlockedLayout([16 // x.element_size()], [32], [num_warps], [0]),
                                num_warps=num_warps)
    return out


EXCHANGE_SHAPES = [(32768, 65536), (16384, 131072), (8192, 262144), (8192, 200000)]


_GLUON_INSTEAD = ("compile it with multicta_kernels.lens and read the recorded results in results/ (a Gluon kernel: "
                  "Triton's interpreter does not run it)")


def _TORCH_FLOATS():
    import torch
    return (torch.float32, torch.float16, torch.bfloat16)


def _check_upstream(num_ctas, num_warps):
    validate.cluster_size(num_ctas)
    validate.power_of_two(num_warps, "num_warps", 1, MAX_WARPS)


def _check_online(num_warps, chunk):
    validate.power_of_two(num_warps, "num_warps", 1, MAX_WARPS)
    validate.power_of_two(chunk, "chunk", 128 * num_warps, 1 << 16, " (a block of the row: at least 4 values "
                          "per lane of every warp)")


def upstream_design_spec(num_ctas: int = 4, N: int = 65536, num_warps: int = 4) -> lens.KernelSpec:
    _check_upstream(num_ctas, num_warps)
    validate.count(N, "N", high=1 << 31)
    layout = gl.BlockedLayout([4], [32], [num_warps], [0], cga_layout=[[1 << i] for i in range(log2(num_ctas))])
    return lens.KernelSpec("softmax_upstream_design", upstream_design_kernel,
                           {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_div": "i32", "x_stride_div": "i32",
                            "out_stride_div": "i32", "BLOCK_N": "constexpr", "ALIGN": "constexpr", "layout": "constexpr"},
                           {"BLOCK_N": _pow2(N), "ALIGN": 4, "layout": layout}, {"num_warps": num_warps, "num_ctas": num_ctas},
                           expect=_EXPECT_ROW + (_EXPECT_CLUSTER if num_ctas > 1 else ()), divisible=("x_ptr", "out_ptr"))


def online_softmax_spec(num_warps: int = 8, chunk: int = 4096) -> lens.KernelSpec:
    _check_online(num_warps, chunk)
    return lens.KernelSpec("online_softmax", online_softmax_kernel,
                           {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_div": "i32", "x_stride_div": "i32",
                            "out_stride_div": "i32", "CHUNK": "constexpr", "ALIGN": "constexpr", "layout": "constexpr"},
                           {"CHUNK": chunk, "ALIGN": 4, "layout": gl.BlockedLayout([4], [32], [num_warps], [0])},
                           {"num_warps": num_warps, "num_ctas": 1}, expect=_EXPECT_ROW, divisible=("x_ptr", "out_ptr"))
