"""Chapter 6: the cluster matmul on Hopper (sm_90a): wgmma, TMA multicast, persistence, warp
specialisation.

A cluster of CTAS CTAs, stacked along M, computes one [CTAS * BM, BN] output tile at a time: each
CTA loads its own BM rows of A, and the [BK, BN] tile of B that all of them need is fetched once and
multicast (chapter 3). A stage of the shared-memory ring may be reloaded only when *every* CTA of
the cluster has finished reading it, because a peer's multicast writes into it (chapter 2's gather
on CTA 0 and broadcast back). Tiles are walked in planar-snake order (chapter 5).

Two kernels, so the chapter's ablation can add one idea at a time:

* ``pipelined_matmul_kernel``: no warp specialisation. One loop over this program's (tile, k)
  steps issues the TMA loads STAGES - 1 steps ahead of the asynchronous ``warpgroup_mma``. Launched
  with one program per tile it is the classic pipelined kernel; launched with one per SM, persistent.
* ``hopper_matmul_kernel``: a producer warp does all the TMA and the cluster-wide release; the
  consumer warpgroups only wait, multiply and store. With ``consumers=2`` two consumers take turns
  (ping-pong): while one drains its tile through the epilogue, the other keeps the tensor cores busy.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from fractions import Fraction
from dataclasses import dataclass

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import CachePolicy, FractionalEvictionPolicy, mbarrier, tma

from .core import hardware, validate
from .core.dtypes import DTYPES
from .core.hardware import SMEM_PER_CTA, WGMMA
from .core.occupancy import max_clusters
from .gluon.matmul import matmul_spec, options, prepare_matmul, with_defaults
from .gluon.operands import check_operands, gl_dtype, nvmma_layout, operand_cga_layouts, stacked_along_m
from .gluon.ring import RELEASE_GATHER, RELEASE_NONE, group_barrier_layout, release, ring_barriers, stage_of
from .gluon.scope import scope
from .gluon.tile_order import snake_tile


@gluon.aggregate
class Ring:
    """The operands, the STAGES-deep ring of A and B tiles, its barriers, and the tiling."""
    a_desc: tma.tensor_descriptor
    b_desc: tma.tensor_descriptor
    c_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor      # per CTA: the stage's A rows and B tile have landed
    empty: gl.shared_memory_descriptor      # one barrier in CTA 0: every CTA released the stage
    go: gl.shared_memory_descriptor         # per CTA: CTA 0 says the stage may be reloaded
    M: gl.tensor
    N: gl.tensor
    K: gl.tensor
    STAGES: gl.constexpr
    MINOR_DIM: gl.constexpr
    TILE_WIDTH: gl.constexpr
    INSTRUMENT: gl.constexpr                # timeline scopes (no code unless proton records)
    LOAD_POLICY: gl.constexpr               # L2 eviction hint of the A and B loads (None: no hint)
    SPLIT_K: gl.constexpr                   # K slices per tile; > 1: c_desc is the fp32 partials' workspace

    @gluon.jit
    def tiles(self):
        TM: gl.constexpr = self.a_desc.block_shape[0]
        TN: gl.constexpr = self.b_desc.block_shape[1]
        return gl.cdiv(self.M, TM), gl.cdiv(self.N, TN)

    @gluon.jit
    def k_steps(self):
        """K steps of one work unit: a tile's whole K, or one of its SPLIT_K slices (plan() checks they divide)."""
        return gl.cdiv(self.K, self.a_desc.block_shape[1]) // self.SPLIT_K

    @gluon.jit
    def units(self):
        m_tiles, n_tiles = self.tiles()
        return m_tiles * n_tiles * self.SPLIT_K

    @gluon.jit
    def unit(self, u):
        """Work unit u: the offsets of its A rows and B columns, its first K step, and the row where its
        output goes. Unit u is slice u // tiles of tile u % tiles: where units outnumber programs, those running
        at once share a K slice (the same columns of A, the same rows of B in L2). Slice s of the partials starts
        at row s * m_tiles * TM of the workspace: every slice's rows are padded to whole tiles."""
        TM: gl.constexpr = self.a_desc.block_shape[0]
        TN: gl.constexpr = self.b_desc.block_shape[1]
        if self.SPLIT_K == 1:
            tm, tn = self.tile(u)
            return tm * TM, tn * TN, 0, tm * TM
        else:
            m_tiles, n_tiles = self.tiles()
            tm, tn = self.tile(u % (m_tiles * n_tiles))
            ks = u // (m_tiles * n_tiles)
            return tm * TM, tn * TN, ks * self.k_steps(), (ks * m_tiles + tm) * TM

    @gluon.jit
    def tile(self, lin):
        m_tiles, n_tiles = self.tiles()
        return snake_tile(lin, m_tiles, n_tiles, self.MINOR_DIM, self.TILE_WIDTH)

    @gluon.jit
    def load(self, s, lin, k):
        """TMA of step k of tile `lin` into stage s: this CTA's A rows, and B multicast to the cluster."""
        tm, tn = self.tile(lin)
        self.load_at(s, tm * self.a_desc.block_shape[0], tn * self.b_desc.block_shape[1], k)

    @gluon.jit
    def load_at(self, s, off_m, off_n, k):
        """The same, for a tile whose offsets the caller computed once (the producer: once per tile)."""
        BK: gl.constexpr = self.a_desc.block_shape[1]
        mbarrier.expect(self.ready.index(s), self.a_desc.nbytes_per_cta + self.b_desc.nbytes_per_cta)
        tma.async_load(self.a_desc, [off_m, k * BK], self.ready.index(s), self.a_bufs.index(s),
                       cache_policy=self.LOAD_POLICY)
        tma.async_load(self.b_desc, [k * BK, off_n], self.ready.index(s), self.b_bufs.index(s), multicast=True,
                       cache_policy=self.LOAD_POLICY)


@gluon.jit
def _ring(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, RELEASE: gl.constexpr, MINOR_DIM: gl.constexpr,
          TILE_WIDTH: gl.constexpr, group_all: gl.constexpr, INSTRUMENT: gl.constexpr = False,
          LOAD_POLICY: gl.constexpr = None, SPLIT_K: gl.constexpr = 1):
    """Allocate the ring's buffers and initialise its barriers (RELEASE: chapter 3's modes)."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape, b_desc.layout)
    ready, empty, go = ring_barriers(STAGES, RELEASE, group_all)
    # A launch turns a size equal to 1 into a constant (M = 1 is a decode-shaped GEMM); the ring's
    # fields are tensors, so make it one again.
    return Ring(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, go, gl.to_tensor(M), gl.to_tensor(N),
                gl.to_tensor(K), STAGES, MINOR_DIM, TILE_WIDTH, INSTRUMENT, LOAD_POLICY, SPLIT_K)


@gluon.jit
def _halves(parts):
    """Split every [M, N] tensor of `parts` into its left and right [M, N/2] halves, in order."""
    out = ()
    for i in gl.static_range(len(parts)):
        x = parts[i]
        out += x.reshape([x.shape[0], 2, x.shape[1] // 2]).permute(0, 2, 1).split()
    return out


@gluon.jit
def store_tile(c_desc, c_smem, acc, off_m, off_n, SPLIT: gl.constexpr, FIRST: gl.constexpr,
               POLICY: gl.constexpr = None):
    """Epilogue: the accumulator goes out in SPLIT column slices, each through shared memory and a
    TMA store. With SPLIT > 1 two staging buffers (c_smem[FIRST], c_smem[FIRST + 1]) alternate, so a
    slice is written while the previous one is still being stored, and staging costs two slices
    instead of a whole tile."""
    parts = (acc.to(c_desc.dtype),)
    for _ in gl.static_range(SPLIT.bit_length() - 1):
        parts = _halves(parts)
    EPI_N: gl.constexpr = c_desc.block_shape[1]
    for i in gl.static_range(SPLIT):
        buf = c_smem.index(FIRST + i % 2)
        tma.store_wait(0 if SPLIT == 1 else 1)       # the store that last read `buf` is done
        buf.store(parts[i])
        hopper.fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n + i * EPI_N], buf, cache_policy=POLICY)


@gluon.jit
def _staging(c_desc, SPLIT: gl.constexpr, CONSUMERS: gl.constexpr):
    # Per consumer: two buffers of one slice each, or one whole tile when SPLIT == 1. Allocated at the
    # top of the kernel, like the barriers, and handed to the consumers.
    PER: gl.constexpr = 2 if SPLIT > 1 else 1
    return gl.allocate_shared_memory(c_desc.dtype, [CONSUMERS * PER] + c_desc.block_shape, c_desc.layout)


# ------------------------------------------------------------------ 1. without warp specialisation

@gluon.jit
def pipelined_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, MINOR_DIM: gl.constexpr,
                            TILE_WIDTH: gl.constexpr, SPLIT: gl.constexpr, RELEASE: gl.constexpr,
                            acc_layout: gl.constexpr, group_all: gl.constexpr, LOAD_POLICY: gl.constexpr = None,
                            STORE_POLICY: gl.constexpr = None):
    r = _ring(a_desc, b_desc, c_desc, M, N, K, STAGES, RELEASE, MINOR_DIM, TILE_WIDTH, group_all, False, LOAD_POLICY)
    c_smem = _staging(c_desc, SPLIT, 1)
    TM: gl.constexpr = a_desc.block_shape[0]
    TN: gl.constexpr = b_desc.block_shape[1]
    m_tiles, n_tiles = r.tiles()
    k_steps = r.k_steps()
    first = gl.program_id(0)
    stride = gl.num_programs(0)
    total = gl.cdiv(m_tiles * n_tiles - first, stride) * k_steps      # this program's (tile, k) steps
    for p in gl.static_range(STAGES - 1):                             # prologue
        if p < total:
            r.load(p, first + (p // k_steps) * stride, p % k_steps)
    acc = gl.zeros([TM, TN], gl.float32, acc_layout)
    for t in range(total):
        s, phase = stage_of(t, STAGES)
        kk = t % k_steps
        mbarrier.wait(r.ready.index(s), phase)
        acc = hopper.warpgroup_mma(r.a_bufs.index(s), r.b_bufs.index(s), acc, use_acc=kk > 0, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])     # step t-1's MMA is done: its stage is free here
        j = t + STAGES - 1                                 # ... and step j reuses that stage
        if j < total:
            if t > 0:                                      # every CTA must be done with it (multicast)
                prev, prev_phase = stage_of(t - 1, STAGES)
                release(prev, r.empty, r.go, prev_phase, RELEASE)
            r.load(j % STAGES, first + (j // k_steps) * stride, j % k_steps)
        if kk == k_steps - 1:
            acc = hopper.warpgroup_mma_wait(0, deps=[acc])
            tm, tn = r.tile(first + (t // k_steps) * stride)
            store_tile(c_desc, c_smem, acc, tm * TM, tn * TN, SPLIT, 0, STORE_POLICY)
    tma.store_wait(0)


# --------------------------------------------------------------------- 2. with warp specialisation

@gluon.jit
def producer_partition(r):
    k_steps = r.k_steps()
    it = 0
    for lin in range(gl.program_id(0), r.units(), gl.num_programs(0)):
        off_m, off_n, k0, _ = r.unit(lin)                        # once per tile, not per K step
        for k in range(k0, k0 + k_steps):
            s, phase = stage_of(it, r.STAGES)
            if it >= r.STAGES:                                   # the stage was used before: wait for
                with scope("wait_free", r.INSTRUMENT):           # every CTA of the cluster to free it
                    ph = phase ^ 1                               # (CTA 0 only: the group's leader)
                    mbarrier.wait(r.empty.index(s), ph)
                    if gl.num_ctas() > 1:                        # alone, nobody else needs telling
                        mbarrier.arrive(r.go.index(s), from_cta=0)   # CTA 0 tells every CTA
                        mbarrier.wait(r.go.index(s), ph)
            with scope("load", r.INSTRUMENT):
                r.load_at(s, off_m, off_n, k)
            it += 1


@gluon.jit
def consumer_partition(r, c_smem, turn, acc_layout: gl.constexpr, WHICH: gl.constexpr, CONSUMERS: gl.constexpr,
                       SPLIT: gl.constexpr, STORE_POLICY: gl.constexpr):
    """Consumer WHICH takes every CONSUMERS-th tile of this cluster's sequence. With two consumers
    they take turns: one may start waiting on a tile's stages only once the other has waited on all
    of its own. That keeps the tensor cores with one consumer at a time (the other drains its
    epilogue), and it is required: a wait on `ready[s]` checks only the phase's parity, so a consumer
    that ran more than one lap of the ring ahead would see an old phase as complete."""
    TM: gl.constexpr = r.a_desc.block_shape[0]
    TN: gl.constexpr = r.b_desc.block_shape[1]
    k_steps = r.k_steps()
    first = gl.program_id(0)
    stride = gl.num_programs(0)
    acc = gl.zeros([TM, TN], gl.float32, acc_layout)
    j = 0                                                        # this consumer's tile count
    for lin in range(first + WHICH * stride, r.units(), CONSUMERS * stride):
        if CONSUMERS == 2:                                       # my turn: the other issued its last tile
            with scope("turn", r.INSTRUMENT):
                if WHICH == 1:
                    mbarrier.wait(turn.index(1), j & 1)
                elif j > 0:
                    mbarrier.wait(turn.index(0), (j - 1) & 1)
        it = (lin - first) // stride * k_steps                  # the ring position of this tile's first step
        for k in range(k_steps):
            s, phase = stage_of(it, r.STAGES)
            with scope("wait_ready", r.INSTRUMENT):
                mbarrier.wait(r.ready.index(s), phase)
            with scope("mma", r.INSTRUMENT):
                acc = hopper.warpgroup_mma(r.a_bufs.index(s), r.b_bufs.index(s), acc, use_acc=k > 0, is_async=True)
                acc = hopper.warpgroup_mma_wait(1, deps=[acc])   # the previous step's MMA is done ...
                if k > 0:
                    mbarrier.arrive(r.empty.index((it - 1) % r.STAGES))   # ... so its stage goes back (to CTA 0)
            it += 1
        if CONSUMERS == 2:
            mbarrier.arrive(turn.index(1 - WHICH))              # the other consumer's turn
        j += 1
        with scope("epilogue", r.INSTRUMENT):
            acc = hopper.warpgroup_mma_wait(0, deps=[acc])
            mbarrier.arrive(r.empty.index((it - 1) % r.STAGES))
            _, off_n, _, row = r.unit(lin)
            store_tile(r.c_desc, c_smem, acc, row, off_n, SPLIT, WHICH * (2 if SPLIT > 1 else 1), STORE_POLICY)
    tma.store_wait(0)


@gluon.jit
def hopper_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, MINOR_DIM: gl.constexpr,
                         TILE_WIDTH: gl.constexpr, SPLIT: gl.constexpr, CONSUMERS: gl.constexpr,
                         acc_layout: gl.constexpr, group_all: gl.constexpr, INSTRUMENT: gl.constexpr = False,
                         LOAD_POLICY: gl.constexpr = None, STORE_POLICY: gl.constexpr = None,
                         SPLIT_K: gl.constexpr = 1):
    r = _ring(a_desc, b_desc, c_desc, M, N, K, STAGES, 1, MINOR_DIM, TILE_WIDTH, group_all, INSTRUMENT,  # inits
              LOAD_POLICY, SPLIT_K)
    c_smem = _staging(c_desc, SPLIT, CONSUMERS)                                               # warp_specialize
    if CONSUMERS == 1:
        gl.warp_specialize([(consumer_partition, (r, c_smem, r.ready, acc_layout, 0, 1, SPLIT, STORE_POLICY)),
                            (producer_partition, (r,))], [1], [40])
    else:      # ping-pong: the producer takes the default warps, each consumer an aligned warpgroup
        turn = mbarrier.allocate_mbarrier(batch=2)               # turn[c]: consumer c may start a tile
        for c in gl.static_range(2):
            mbarrier.init(turn.index(c), count=1)
        gl.warp_specialize([(producer_partition, (r,)),
                            (consumer_partition, (r, c_smem, turn, acc_layout, 0, 2, SPLIT, STORE_POLICY)),
                            (consumer_partition, (r, c_smem, turn, acc_layout, 1, 2, SPLIT, STORE_POLICY))], [4, 4], [232, 232])


# ------------------------------------------------------------------- 3. split-K: the partials' sum

@gluon.jit
def split_k_sum_kernel(ws_ptr, out_ptr, M, N, slice_rows, out_stride, SPLIT_K: gl.constexpr, BM: gl.constexpr,
                       BN: gl.constexpr, layout: gl.constexpr):
    """out = the SPLIT_K fp32 partials summed in K order, rounded once to out's dtype. Partial s of row m is
    row s * slice_rows + m of the workspace (row stride N)."""
    rows = gl.program_id(0) * BM + gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.program_id(1) * BN + gl.arange(0, BN, gl.SliceLayout(0, layout))
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    at = rows[:, None] * N + cols[None, :]
    acc = gl.load(ws_ptr + at, mask=mask)
    for s in gl.static_range(1, SPLIT_K):
        acc += gl.load(ws_ptr + s * slice_rows * N + at, mask=mask)
    gl.store(out_ptr + rows[:, None] * out_stride + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)


# ------------------------------------------------------------ 4. stream-K: tiles shared across programs

@gluon.jit
def stream_k_segment(r, it, end):
    """The run of (tile, K step) steps that starts at step ``it`` of the whole matmul (steps are numbered tile by
    tile, K within a tile) and ends at ``end`` or at the tile's end: its tile and its first and last K steps."""
    k_steps = r.k_steps()
    return it // k_steps, it % k_steps, gl.minimum(k_steps, it % k_steps + end - it)


@gluon.jit
def stream_k_range(r, per):
    """Program p takes the ``per`` consecutive steps from p * per: every program the same share of the work."""
    m_tiles, n_tiles = r.tiles()
    start = gl.program_id(0) * per
    return start, gl.minimum(start + per, m_tiles * n_tiles * r.k_steps())


@gluon.jit
def _slot(ptr, q, TM: gl.constexpr, TN: gl.constexpr, layout: gl.constexpr):
    """Pointers to this thread's elements of workspace slot q (a [TM, TN] fp32 tile, row-major)."""
    rows = gl.arange(0, TM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, TN, gl.SliceLayout(0, layout))
    return ptr + q * (TM * TN) + rows[:, None] * TN + cols[None, :]


@gluon.jit
def _flags(flag_ptr, q):
    """Slot q's flags: one a thread, so a thread's release (or acquire) orders its own part of the tile."""
    THREADS: gl.constexpr = gl.num_warps() * 32
    return flag_ptr + q * THREADS + gl.arange(0, THREADS, gl.BlockedLayout([1], [32], [gl.num_warps()], [0]))


@gluon.jit
def post_partial(ws_ptr, flag_ptr, q, acc, layout: gl.constexpr):
    """Slot q := this program's partial tile; then each thread sets its flag with release semantics (its own
    stores happen before the flag, for a thread that acquires it: PTX ISA, Memory Consistency Model, release and
    acquire patterns)."""
    gl.store(_slot(ws_ptr, q, acc.shape[0], acc.shape[1], layout), acc)
    gl.atomic_xchg(_flags(flag_ptr, q), 1, sem="release", scope="gpu")


@gluon.jit
def add_partial(ws_ptr, flag_ptr, q, acc, layout: gl.constexpr):
    """acc + slot q, once program q has posted it: each thread polls its own flag (acquire), then reads the
    elements the same thread of program q wrote, then clears the flag for the next launch."""
    gl.atomic_poll(_flags(flag_ptr, q), 1, sem="acquire", scope="gpu")
    acc += gl.load(_slot(ws_ptr, q, acc.shape[0], acc.shape[1], layout))
    gl.store(_flags(flag_ptr, q), 0)
    return acc


@gluon.jit
def stream_k_producer(r, per):
    TM: gl.constexpr = r.a_desc.block_shape[0]
    TN: gl.constexpr = r.b_desc.block_shape[1]
    it, end = stream_k_range(r, per)
    n = 0                                                        # this program's ring position
    while it < end:
        lin, kb, ke = stream_k_segment(r, it, end)
        tm, tn = r.tile(lin)
        for k in range(kb, ke):
            s, phase = stage_of(n, r.STAGES)
            if n >= r.STAGES:
                mbarrier.wait(r.empty.index(s), phase ^ 1)       # the consumer is done with the stage
            r.load_at(s, tm * TM, tn * TN, k)
            n += 1
        it += ke - kb


@gluon.jit
def stream_k_consumer(r, c_smem, ws_ptr, flag_ptr, per, acc_layout: gl.constexpr, SPLIT: gl.constexpr,
                      STORE_POLICY: gl.constexpr):
    """A run that does not start at its tile's first K step is always this program's first: its fp32 partial goes
    to the workspace slot of this program, and each thread flags its own part (release). The program whose run
    starts the tile waits for the flags of the programs after it (acquire), adds their partials, and stores."""
    TM: gl.constexpr = r.a_desc.block_shape[0]
    TN: gl.constexpr = r.b_desc.block_shape[1]
    k_steps = r.k_steps()
    pid = gl.program_id(0)
    it, end = stream_k_range(r, per)
    acc = gl.zeros([TM, TN], gl.float32, acc_layout)
    n = 0
    while it < end:
        lin, kb, ke = stream_k_segment(r, it, end)
        for k in range(kb, ke):
            s, phase = stage_of(n, r.STAGES)
            mbarrier.wait(r.ready.index(s), phase)
            acc = hopper.warpgroup_mma(r.a_bufs.index(s), r.b_bufs.index(s), acc, use_acc=k > kb, is_async=True)
            acc = hopper.warpgroup_mma_wait(1, deps=[acc])
            if k > kb:
                mbarrier.arrive(r.empty.index((n - 1) % r.STAGES))
            n += 1
        acc = hopper.warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(r.empty.index((n - 1) % r.STAGES))
        if kb > 0:                                               # a later part of a tile: hand it on
            post_partial(ws_ptr, flag_ptr, pid, acc, acc_layout)
        else:                                                    # the tile's start: gather its later parts
            done = ke
            q = pid + 1
            while done < k_steps:
                acc = add_partial(ws_ptr, flag_ptr, q, acc, acc_layout)
                done = gl.minimum(k_steps, done + per)
                q += 1
            tm, tn = r.tile(lin)
            store_tile(r.c_desc, c_smem, acc, tm * TM, tn * TN, SPLIT, 0, STORE_POLICY)
        it += ke - kb
    tma.store_wait(0)


@gluon.jit
def stream_k_matmul_kernel(a_desc, b_desc, c_desc, ws_ptr, flag_ptr, M, N, K, per, STAGES: gl.constexpr,
                           MINOR_DIM: gl.constexpr, TILE_WIDTH: gl.constexpr, SPLIT: gl.constexpr,
                           acc_layout: gl.constexpr, group_all: gl.constexpr, LOAD_POLICY: gl.constexpr = None,
                           STORE_POLICY: gl.constexpr = None):
    """Stream-K: the matmul's tiles * k_steps steps cut into equal runs of ``per`` consecutive steps, one per
    program, so every SM has the same work however the tiles fall (the launch must make every program resident:
    a program waits for the ones after it)."""
    r = _ring(a_desc, b_desc, c_desc, M, N, K, STAGES, 1, MINOR_DIM, TILE_WIDTH, group_all, False, LOAD_POLICY)
    c_smem = _staging(c_desc, SPLIT, 1)
    gl.warp_specialize([(stream_k_consumer, (r, c_smem, ws_ptr, flag_ptr, per, acc_layout, SPLIT, STORE_POLICY)),
                        (stream_k_producer, (r, per))], [1], [40])


SUM_BLOCK = (32, 128)         # the sum kernel's tile: 4 warps, 4 consecutive fp32 (16 bytes) a thread and a row
SUM_LAYOUT = gl.BlockedLayout([1, 4], [1, 32], [4, 1], [1, 0])


# Defaults: the configuration that was fastest at most shapes measured on the H200 (results/h200/hopper_matmul*.json,
# chapter 6 counts them): one CTA per cluster. num_ctas=2 or 4 multicasts B; without warp specialisation it cuts L2
# traffic, and it was faster than one CTA only at a few shapes, none of them in both recorded runs.
# (The defaults are HopperPlan's field defaults below; CONFIG is read from them.)
# L2 eviction hints (l2_hints=True): A and B are read again by other tiles, so their loads are marked evict_last;
# each C tile is written once, so its stores are marked evict_first and do not push A and B out of L2.
EVICT_LAST = CachePolicy(l2=FractionalEvictionPolicy("evict_last", 1.0))
EVICT_FIRST = CachePolicy(l2=FractionalEvictionPolicy("evict_first", 1.0))


@dataclass(frozen=True)
class HopperPlan:
    """A validated configuration and everything built from it: what the launch and the lens spec use. Its fields
    after ``dtype`` are the options of ``hopper_matmul`` and ``prepare`` with their defaults, the one list of
    them: ``CONFIG`` is read from it and :func:`plan` checks names against it."""
    dtype: object
    block_m: int = 128              # rows of the output tile per CTA: 64 or 128 (one or two warpgroups)
    block_n: int = 256
    block_k: int = 64
    stages: int = 3                 # depth of the TMA ring
    num_ctas: int = 1               # CTAs per cluster, stacked along M, sharing B by multicast
    minor_dim: int = 0              # planar-snake tile order: the minor dimension ...
    tile_width: int = 8             # ... and the width of its bands
    epilogue_n: int | None = None   # width of the epilogue's store slices (None: block_n, one slice)
    consumers: int = 1              # 2: two consumer warpgroups take turns (ping-pong)
    warp_specialize: bool = True    # a producer warp and consumer warps (False: the pipelined kernel)
    persistent: bool = True         # as many clusters as fit at once (False: one per tile)
    l2_hints: bool = False          # evict_last on the A and B loads, evict_first on the C stores
    instrument: bool = False        # timeline scopes compiled in (warp-specialised kernel)
    split_k: int = 1                # K slices per tile: > 1 writes fp32 partials, summed by a second kernel
    stream_k: bool = False          # every program the same number of K steps, tiles shared across programs

    @property
    def tile_m(self) -> int:
        return self.block_m * self.num_ctas

    @property
    def split(self) -> int:                 # the epilogue's column slices per tile
        return self.block_n // self.epilogue_n

    @property
    def num_warps(self) -> int:             # a ping-pong consumer is one warpgroup
        return 4 if self.consumers == 2 else self.block_m // 16

    @property
    def out_dtype(self):                    # what the epilogue stores: the output, or split-K's fp32 partials
        return gl.float32 if self.split_k > 1 else self.dtype

    @property
    def smem_bytes(self) -> int:
        staging = self.consumers * (1 if self.split == 1 else 2) * self.block_m * self.epilogue_n
        out_bytes = 4 if self.split_k > 1 else 2
        return 2 * self.stages * (self.block_m * self.block_k + self.block_k * self.block_n) + out_bytes * staging + 1024

    def slice_rows(self, M: int) -> int:
        """Rows of one K slice in split-K's workspace: M padded to whole tiles."""
        return math.ceil(M / self.tile_m) * self.tile_m

    def _bases(self):
        acc = stacked_along_m(self.num_ctas)                      # CTAs stacked along M ...
        return (acc, *operand_cga_layouts(acc))                   # ... each its own A rows, B shared

    @property
    def a(self):
        return nvmma_layout([self.tile_m, self.block_k], self.dtype, self._bases()[1])

    @property
    def b(self):
        return nvmma_layout([self.block_k, self.block_n], self.dtype, self._bases()[2])

    @property
    def c(self):
        return nvmma_layout([self.tile_m, self.epilogue_n], self.out_dtype, self._bases()[0])

    @property
    def kernel(self):
        if self.stream_k:
            return stream_k_matmul_kernel
        return hopper_matmul_kernel if self.warp_specialize else pipelined_matmul_kernel

    def constexprs(self) -> dict:
        acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[self.num_warps, 1],
                                        instr_shape=[16, self.block_n, 16],
                                        cga_layout=[list(b) for b in self._bases()[0]])
        meta = dict(STAGES=self.stages, MINOR_DIM=self.minor_dim, TILE_WIDTH=self.tile_width, SPLIT=self.split,
                    acc_layout=acc, group_all=group_barrier_layout(self.num_ctas),
                    LOAD_POLICY=EVICT_LAST if self.l2_hints else None, STORE_POLICY=EVICT_FIRST if self.l2_hints else None)
        if self.stream_k:
            return meta
        if self.warp_specialize:
            return dict(meta, CONSUMERS=self.consumers, INSTRUMENT=self.instrument, SPLIT_K=self.split_k)
        return dict(meta, RELEASE=RELEASE_GATHER if self.num_ctas > 1 else RELEASE_NONE)


def plan(M, N, K, dtype, **options) -> HopperPlan:
    """Validate a configuration for an (M, N, K) problem; raises ValueError naming what to change. ``options``
    are fields of :class:`HopperPlan` (the others keep their defaults); another name is a TypeError."""
    p = HopperPlan(dtype, **with_defaults(options, CONFIG, "hopper_matmul"))
    validate.one_of(p.block_m, "block_m", (64, 128), " (one or two warpgroups per tile)")
    validate.one_of(p.block_k, "block_k", (32, 64))
    validate.integer(p.block_n, "block_n")
    validate.count(p.stages, "stages", high=16)
    validate.one_of(p.num_ctas, "num_ctas", (1, 2, 4), " (CTAs stacked along M sharing B)")
    validate.one_of(p.minor_dim, "minor_dim", (0, 1))
    validate.count(p.tile_width, "tile_width", high=1 << 16)
    validate.optional_count(p.epilogue_n, "epilogue_n", high=256)
    validate.one_of(p.consumers, "consumers", (1, 2))
    validate.count(p.split_k, "split_k", high=16)
    for flag in ("warp_specialize", "persistent", "l2_hints", "instrument", "stream_k"):
        validate.boolean(getattr(p, flag), flag)
    if p.block_n & (p.block_n - 1) or not 8 <= p.block_n <= 256:
        raise ValueError(f"block_n must be a power of two from 8 to 256 (one wgmma; a TMA box), got {p.block_n}")
    if p.consumers == 2 and (p.block_m * p.block_n > 128 * 128 or not p.warp_specialize):
        raise ValueError("consumers must be 1, or 2 (ping-pong: one warpgroup per tile, so block_m * block_n at "
                         "most 128 * 128 registers' worth, and warp_specialize=True)")
    p = dataclasses.replace(p, epilogue_n=p.epilogue_n or p.block_n)
    if p.block_n % p.epilogue_n or p.block_n // p.epilogue_n not in (1, 2, 4, 8) or p.epilogue_n % 8:
        raise ValueError(f"epilogue_n = {p.epilogue_n} must be block_n / 1, 2, 4 or 8 (got block_n = {p.block_n})")
    if K < 1 or K % 8 or N % 8:
        raise ValueError(f"K and N must be positive multiples of 8 (16-byte aligned rows for TMA), got K={K}, N={N}")
    steps = math.ceil(K / p.block_k)
    if p.split_k > 1 and not p.warp_specialize:
        raise ValueError("split_k > 1 needs warp_specialize=True (the pipelined kernel walks whole tiles)")
    if steps % p.split_k:
        fits = [d for d in range(1, 17) if steps % d == 0]
        raise ValueError(f"split_k = {p.split_k} must divide a tile's K steps (ceil(K / block_k) = {steps}): "
                         f"one of {fits}")
    if p.split_k > 1 and p.split_k * p.slice_rows(M) * N >= 2 ** 31:
        raise ValueError(f"split_k = {p.split_k}: the fp32 partials ({p.split_k} x {p.slice_rows(M)} x {N}) need "
                         "2**31 elements or more (32-bit offsets); use a smaller split_k, or none")
    if p.stream_k and (p.num_ctas, p.consumers, p.split_k, p.warp_specialize, p.persistent, p.instrument) != (
            1, 1, 1, True, True, False):
        raise ValueError("stream_k=True needs num_ctas=1, consumers=1, split_k=1, warp_specialize=True, "
                         "persistent=True and instrument=False (one CTA per program, every program resident)")
    if p.stream_k and p.smem_bytes <= SMEM_PER_CTA // 2:
        raise ValueError(f"stream_k=True needs more than half a CTA's shared memory, so that one CTA fills an SM and "
                         f"the occupancy count that sizes the grid is exact (every program must be resident): "
                         f"{p.smem_bytes // 1024} KiB here; use more stages or a wider tile")
    if p.stages < 2 or p.smem_bytes > SMEM_PER_CTA:
        raise ValueError(f"{p.stages} stages need {p.smem_bytes // 1024} KiB of shared memory per CTA (at most "
                         f"{SMEM_PER_CTA // 1024} KiB, at least 2 stages): use fewer stages, a smaller "
                         "epilogue_n or a smaller block_n"
                         + (" (split_k > 1 stages fp32 partials: twice the bytes)" if p.split_k > 1 else ""))
    return p


CONFIG = options(HopperPlan)      # the options and their defaults, read from the plan's fields


# With no options, the wrapper picks by K and by shape (pick_config). At short K a tile is only a few K steps and its epilogue
# (the C store above all) is a large share of it: measured by copies of the kernel without the epilogue
# (tools/explore_hopper_matmul.py --diagnose). There two consumers take turns (ping-pong, 128 x 128 each), so one
# stores while the other multiplies, with the L2 hints on: the fastest of our configurations at K = 512 in both
# recorded runs (results/h200/hopper_matmul*.json), and slower than the 1-CTA kernel at K = 4096.
SHORT_K = 512
SHORT_K_CONFIG = dict(num_ctas=1, consumers=2, block_m=128, block_n=128, stages=5, l2_hints=True)
# The same ping-pong where it balances the SMs' work much better than the default does. A persistent CTA walks
# ceil(tiles / SMs) tiles while the average is tiles / SMs; with tiles of equal length, their ratio is the share
# of the run's SM time that does work. The ping-pong's 128 x 128 tiles are half the size of the default's
# 128 x 256, so that share can be higher; but its tile costs more per FLOP (1.02x to 1.19x at K >= 3072 in the
# recorded runs, where the share is the same), so it is picked only where its share is PINGPONG_GAIN times the
# default's or more (compared exactly, as fractions: 6/5 is a ratio the tile counts reach): at 768 x 8192 x 4096
# (192 tiles on 132 SMs) it ran 1.24x faster than the default, at 3072^3 (a gain of exactly 6/5) 1.13x, at
# 128 x 14336 x 4096 (56 tiles) 1.3x; at 4096 x 3584 x 18944 (a gain of 8/7) the default was faster
# (results/h200/hopper_matmul_shapes.json).
PINGPONG_GAIN = 1.2
# Split-K where even the ping-pong's tiles leave most SMs idle: each tile's K is cut into split_k slices, one work
# unit each, so tiles * split_k units fill the SMs. The fp32 partials cost a second kernel that reads them back
# (8 to 23 microseconds timed alone on the H200, about 4 in the pipeline at 128 x 4096 x 14336:
# tools/explore_split_k.py), and where K is short the split's matmul is no faster. So a split is taken only where
# the K it takes off each tile's critical path, K * (1 - 1 / split_k), is SPLIT_K_SAVED or more: at 128 x 4096 x
# 14336 (32 tiles, split_k 4, 10752 of K saved) the split ran 1.5x faster; at 1024^3 (64 tiles, split_k 2, 512)
# 1.5x slower. Its configuration is the ping-pong's with one stage fewer and 32-column store slices: fp32 staging
# buffers are twice the size.
# Without the L2 hints: a split unit reads its own K slice of B once, so evict_last keeps nothing another unit reads,
# and evict_first on the partials may push out of L2 what the sum reads next (not profiled). Measured at
# 128 x 4096 x 14336 on an H100, fp16: 258 TFLOP/s without the hints, 245 with them (tools/explore_small_tiles.py,
# results/h100/hopper_matmul_small_tiles.json).
SPLIT_K_SAVED = 8192
SPLIT_K_CONFIG = dict(SHORT_K_CONFIG, stages=4, epilogue_n=32, l2_hints=False)


def _share(tiles: int, sms: int) -> Fraction:
    return Fraction(tiles, sms * math.ceil(tiles / sms))


def balance(tiles: int, sms: int) -> float:
    """The share of a persistent kernel's SM time that does work when every tile takes as long:
    (tiles / sms) / ceil(tiles / sms)."""
    validate.count(tiles, "tiles", high=1 << 40)
    validate.count(sms, "sms", high=1 << 20)
    return float(_share(tiles, sms))


def split_k_for(M: int, N: int, K: int, sms: int) -> int:
    """The K slices the pick cuts each ping-pong tile into (1: none): the largest of 8, 4 and 2 that divides the
    tile's K steps, keeps tiles * split_k within one wave of ``sms`` and saves SPLIT_K_SAVED of K or more."""
    tiles = math.ceil(M / SHORT_K_CONFIG["block_m"]) * math.ceil(N / SHORT_K_CONFIG["block_n"])
    steps = math.ceil(K / CONFIG["block_k"])
    fits = [s for s in (8, 4, 2) if steps % s == 0 and tiles * s <= sms and K - K // s >= SPLIT_K_SAVED]
    return fits[0] if fits else 1


def pick_config(K: int, M: int | None = None, N: int | None = None, sms: int | None = None) -> dict:
    """The options ``hopper_matmul(a, b)`` uses when given none: SHORT_K_CONFIG up to K = SHORT_K, or (with the
    shape and the GPU's SM count) SPLIT_K_CONFIG with ``split_k_for``'s slices where that is more than 1, or
    SHORT_K_CONFIG where its tiles balance the SMs PINGPONG_GAIN times better than the default's
    (:func:`balance`); else CONFIG."""
    validate.count(K, "K", high=1 << 31)
    for v, name in ((M, "M"), (N, "N"), (sms, "sms")):
        validate.optional_count(v, name, high=1 << 31)
    if K <= SHORT_K:
        return dict(SHORT_K_CONFIG)
    if M is not None and N is not None and sms is not None:
        split = split_k_for(M, N, K, sms)
        if split > 1:
            return dict(SPLIT_K_CONFIG, split_k=split)
        default = math.ceil(M / CONFIG["block_m"]) * math.ceil(N / CONFIG["block_n"])
        pingpong = math.ceil(M / SHORT_K_CONFIG["block_m"]) * math.ceil(N / SHORT_K_CONFIG["block_n"])
        if _share(pingpong, sms) >= Fraction(PINGPONG_GAIN).limit_denominator(1000) * _share(default, sms):
            return dict(SHORT_K_CONFIG)
    return {}


def prepare(a, b, out=None, *, programs: int | None = None, **config):
    """Validate once, build the TMA descriptors once, compile, size the grid, and return ``launch()``,
    which only launches (what a benchmark should time: the timer then sees the GPU, not the Python front).
    ``launch.grid`` is the number of clusters. Options: see CONFIG and ``hopper_matmul``; with none,
    ``pick_config(K, M, N, SMs)`` chooses."""
    validate.optional_count(programs, "programs", high=1 << 20)
    M, N, K = check_operands(a, b)
    p = plan(M, N, K, gl_dtype(a), **(config or pick_config(K, M, N, hardware.device().sms)))
    call = prepare_matmul(a, b, out, p, WGMMA, "hopper_matmul",
                          partials=(p.split_k * p.slice_rows(M), N) if p.split_k > 1 else None)
    tiles = math.ceil(call.M / p.tile_m) * math.ceil(call.N / p.block_n) * p.split_k     # work units
    args = dict(a_desc=call.a_desc, b_desc=call.b_desc, c_desc=call.c_desc, M=call.M, N=call.N, K=call.K,
                **p.constexprs())
    if p.stream_k:                      # compiled with stand-ins for the arguments sized by the grid
        args.update(per=2, **_stream_k_workspace(call.out.device, 1, p))
    names = p.kernel.arg_names
    compiled = p.kernel.warmup(*[args[n] for n in names], grid=(1,), num_warps=p.num_warps, num_ctas=p.num_ctas)
    resident = max_clusters(compiled, p.num_ctas) if p.persistent else tiles
    if p.stream_k:                      # the grid: runs of equal steps, none empty
        grid, per = stream_k_grid(tiles * math.ceil(call.K / p.block_k), resident, programs)
        args.update(per=per, **_stream_k_workspace(call.out.device, grid, p))
    else:
        grid = min(tiles, resident if programs is None else programs)
    args = [args[n] for n in names]
    run = compiled[(grid, 1, 1)]
    out = call.out
    total = _split_k_sum(call, p) if p.split_k > 1 else (lambda: None)

    def launch():
        run(*args)
        total()
        return out
    launch.grid = grid
    launch.workspace = {k: args[names.index(k)] for k in ("ws_ptr", "flag_ptr")} if p.stream_k else None
    launch.parts = {"matmul": lambda: run(*args), "sum": total}     # for timing each launch alone
    return launch


def stream_k_grid(steps: int, resident: int, programs: int | None) -> tuple[int, int]:
    """Stream-K's grid: ``programs`` (default: as many as are resident at once) runs of ``per`` steps each, as
    equal as whole steps allow; trimmed so that none is empty. More programs than are resident is refused: a
    program waits for later ones, which could then never start."""
    validate.count(steps, "steps", high=1 << 40)
    validate.count(resident, "resident", high=1 << 20)
    validate.optional_count(programs, "programs", high=1 << 20)
    if programs is not None and programs > resident:
        raise ValueError(f"programs = {programs}: stream_k=True needs every program resident at once (a program "
                         f"waits for later ones); at most {resident} on this GPU with this configuration")
    per = math.ceil(steps / min(steps, programs or resident))
    return math.ceil(steps / per), per


def _stream_k_workspace(device, programs: int, p) -> dict:
    """One fp32 tile-sized slot a program for the partial it hands on, and a flag a consumer thread (zeroed
    once; the program that reads a slot clears its flags). A prepared launch owns them: two launches of it must not
    run at once (on two streams)."""
    import torch
    ws = torch.empty((programs, p.tile_m * p.block_n), device=device, dtype=torch.float32)
    flags = torch.zeros((programs, p.num_warps * 32), device=device, dtype=torch.int32)
    return dict(ws_ptr=ws, flag_ptr=flags)


def _split_k_sum(call, p):
    """The second launch of a split-K matmul, compiled once: the partials in call.partials summed into call.out."""
    BM, BN = SUM_BLOCK
    args = (call.partials, call.out, call.M, call.N, p.slice_rows(call.M), call.out.stride(0), p.split_k, BM, BN,
            SUM_LAYOUT)
    grid = (math.ceil(call.M / BM), math.ceil(call.N / BN), 1)
    run = split_k_sum_kernel.warmup(*args, grid=grid, num_warps=4)[grid]
    return lambda: run(*args)


def hopper_matmul(a, b, out=None, *, programs: int | None = None, **config):
    """C = A @ B (fp16 or bf16 in and out, fp32 accumulation) on Hopper. Options (see CONFIG):
    block_m/block_n/block_k (per-CTA tile), stages, num_ctas (CTAs per cluster sharing B by multicast),
    minor_dim/tile_width (planar-snake order), epilogue_n (store slice width), consumers (2 = ping-pong),
    warp_specialize, persistent (as many clusters as fit on the GPU at once, or one per tile), l2_hints
    (evict_last on A and B, evict_first on C), split_k (K slices per tile, each unit of work one slice of
    one tile, their fp32 partials summed by a second kernel), stream_k (every program the same run of K steps, a
    tile shared by the programs whose runs cross it, their partials added by the one that starts it). With no
    options, ``pick_config(K, M, N, SMs)`` chooses.
    ``programs`` overrides the number of clusters launched."""
    return prepare(a, b, out, programs=programs, **config)()


def operand_bytes(M: int, N: int, K: int, block_m: int = 128, block_n: int = 256, num_ctas: int = 1,
                  itemsize: int = 2, **_) -> int:
    """Bytes of A and B that the SMs fetch from L2 for the whole matmul (the model, no caching in
    shared memory across tiles): each CTA tile reads its block_m rows of A and the B tile, and a
    cluster of num_ctas CTAs fetches its shared B tile once (multicast)."""
    for name, v in (("M", M), ("N", N), ("K", K), ("block_m", block_m), ("block_n", block_n), ("itemsize", itemsize)):
        validate.count(v, name, high=1 << 31)
    validate.cluster_size(num_ctas)
    tiles = math.ceil(M / block_m) * math.ceil(N / block_n)
    return tiles * K * itemsize * (block_m + block_n / num_ctas)


BASELINES = ("cublas_tflops", "torch_tflops")


def against_baseline(table) -> list[dict]:
    """Per row of a recorded matmul sweep (a result or one of its ``tables``): the best of our variants,
    its TFLOP/s, the better of cuBLAS and torch.matmul, and the ratio of the two."""
    from .results import store
    ours = [c for c in table["columns"] if c.endswith("_tflops") and c not in BASELINES]
    out = []
    for r in store.records(table):
        best = max(ours, key=lambda c: r[c])
        base = max(r[c] for c in BASELINES)
        out.append({"M": r["M"], "N": r["N"], "K": r["K"], "best": best.removesuffix("_tflops"), "tflops": r[best],
                    "baseline": base, "ratio": r[best] / base})
    return out


def per_tile(trace, K: int, block_k: int | None = None) -> dict:
    """A consumer warp's tile in a recorded timeline (``measure.traces``) of ``hopper_matmul_kernel`` at depth ``K``:
    the K steps per tile (K / block_k), ``step`` the mean K step (from one wgmma issue to the next within a tile),
    ``epilogue`` the mean epilogue, ``estimate`` a tile from those parts, ``measured`` the mean tile measured from
    one epilogue's end to the next of the same warp (None where the trace keeps no whole tile: it keeps each
    warp's last records) and ``kept`` the most wgmma records a warp kept."""
    steps, tiles, kept = [], [], 0
    warps = {}
    for r in sorted(trace.records(), key=lambda r: r["start_ns"]):
        if r["partition"] == "consumer":
            warps.setdefault((r["cta"], r["warp"]), []).append(r)
    for recs in warps.values():
        issues, last_end = [], None
        kept = max(kept, sum(r["scope"] == "mma" for r in recs))
        for r in recs:
            if r["scope"] == "mma":
                issues.append(r["start_ns"])
            elif r["scope"] == "epilogue":
                steps += [b - a for a, b in zip(issues, issues[1:])]
                if last_end is not None:
                    tiles.append(r["end_ns"] - last_end)
                issues, last_end = [], r["end_ns"]
    epilogue = statistics.mean(r["end_ns"] - r["start_ns"] for r in trace.records() if r["scope"] == "epilogue")
    k_steps = K // (block_k or CONFIG["block_k"])
    estimate = k_steps * statistics.mean(steps) + epilogue          # a tile, from its parts
    return dict(k_steps=k_steps, kept=kept, step=statistics.mean(steps), epilogue=epilogue, estimate=estimate,
                measured=statistics.mean(tiles) if tiles else None)


# The chapter's ablation: each step adds one idea to the one before.
ABLATION = {
    "pipelined": dict(warp_specialize=False, persistent=False, num_ctas=1),
    "+ persistent": dict(warp_specialize=False, persistent=True, num_ctas=1),
    "+ 2-CTA multicast": dict(warp_specialize=False, persistent=True, num_ctas=2),
    "+ 4-CTA multicast": dict(warp_specialize=False, persistent=True, num_ctas=4),
    "+ warp specialised": dict(warp_specialize=True, persistent=True, num_ctas=2),
    "+ L2 hints": dict(warp_specialize=True, persistent=True, num_ctas=2, l2_hints=True),
    "+ ping-pong 128 x 128": dict(warp_specialize=True, persistent=True, num_ctas=2, l2_hints=True, consumers=2,
                                  block_m=128, block_n=128, stages=5),
}


def hopper_matmul_spec(dtype: str = "float16", **config):
    dtype = validate.dtype(dtype)
    p = plan(8192, 8192, 4096, DTYPES[dtype].gl, **config)
    expect = ("wgmma.mma_async", "cp.async.bulk.tensor") + (
        (".multicast::cluster", ".reqnctapercluster", "mbarrier.arrive.shared::cluster") if p.num_ctas > 1 else ())
    extra = dict(ws_ptr="*fp32", flag_ptr="*i32", per="i32") if p.stream_k else None
    return matmul_spec("hopper_matmul", p.kernel, p, p.num_warps, ("sm_90a",), expect, extra)


# ------------------------------------------------------------------------------------ the ceiling

@gluon.jit
def mma_peak_kernel(out_ptr, ITERS, a_layout: gl.constexpr, b_layout: gl.constexpr, acc_layout: gl.constexpr,
                    fill_layout: gl.constexpr):
    """Tensor cores with nothing else to do: ITERS wgmmas on operands that never leave shared memory,
    one MMA in flight behind the next, as in the matmul's main loop. Its rate is the dense fp16
    ceiling the matmul is measured against (same GPU, same run, same clocks)."""
    BM: gl.constexpr = acc_layout.warps_per_cta[0] * 16
    BN: gl.constexpr = acc_layout.instr_shape[1]
    BK: gl.constexpr = 64
    a = gl.allocate_shared_memory(gl.float16, [BM, BK], a_layout, gl.full([BM, BK], 0.01, gl.float16, fill_layout))
    b = gl.allocate_shared_memory(gl.float16, [BK, BN], b_layout, gl.full([BK, BN], 0.01, gl.float16, fill_layout))
    hopper.fence_async_shared()
    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    for _ in range(ITERS):
        acc = hopper.warpgroup_mma(a, b, acc, is_async=True)
        acc = hopper.warpgroup_mma_wait(1, deps=[acc])
    acc = hopper.warpgroup_mma_wait(0, deps=[acc])
    gl.store(out_ptr + gl.program_id(0), gl.max(gl.max(acc, axis=1), axis=0))   # keeps the MMAs alive


# ---------------------------------------------------------------------------------- the benchmark

VARIANTS = {            # the configurations the benchmark sweeps (a small, honest config table)
    "picked by K": {},                                  # no options: pick_config chooses (by K at M = N = 8192)
    "1-CTA": dict(num_ctas=1),
    "2-CTA": dict(num_ctas=2),
    "4-CTA": dict(num_ctas=4),
    "1-CTA, L2 hints": dict(num_ctas=1, l2_hints=True),
    "ping-pong": dict(num_ctas=1, consumers=2, block_m=64, stages=4),
    "ping-pong 128x128": dict(num_ctas=1, consumers=2, block_m=128, block_n=128, stages=5),
    "ping-pong 128x128, L2 hints": SHORT_K_CONFIG,
}


# (M, N, K) of real layers: Llama-3-8B (hidden 4096, MLP 14336; fused QKV 6144) and -70B (hidden 8192)
MODEL_SHAPES = [(m, n, k) for m in (4096, 16384) for n, k in ((6144, 4096), (14336, 4096), (4096, 14336),
                                                             (8192, 8192), (28672, 8192))]
