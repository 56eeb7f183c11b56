"""Chapter 6's last gaps: an output tile as wide as the SM count needs, made of two accumulators.

Where the pick is behind cuBLAS, each busy SM's main loop already runs at the tensor cores' rate (a K step of
128 x 256 x 64 takes 1024 cycles: results/h100/hopper_matmul_phases.json); the gap is the SMs without a tile.
wgmma takes any N that is a multiple of 8 up to 256, but a Gluon 3.9 tensor has a power-of-two shape, so a
128 x 192 tile cannot be one accumulator. Here it is two, side by side: 128 x N0 (N0 = 128) and 128 x N1
(N1 = 16, 32 or 64). A stage of the ring holds A's 128 x 64 rows and B's 64 x N0 and 64 x N1 boxes, three TMA
loads on one ``ready`` barrier; a K step issues one wgmma into each accumulator, then waits for the previous
step's two before it gives that stage back. One CTA per SM, persistent, a producer warp and two consumer
warpgroups: chapter 6's default kernel, with B split in two. No cluster, no multicast, no split-K.

``plan(a_regs=True)`` loads each step's A into registers once (``regs_step``: two sets, even and odd steps, since a
wgmma reads its A registers until a wait covers it) and gives both wgmmas the registers. It was built to test
whether A's bytes make the narrow wgmma slow; measured, they do not (results/h100/hopper_matmul_wide_regs.json:
every traced step longer, 128 x 192 slower at all eight shapes), so the rule uses the descriptor path.

``best_extra`` says where they beat the default kernel by the rounds model; ``benchmarks.hopper_matmul``'s
``prepare_picked`` takes them there in place of hopper_matmul's pick (tested on shapes the model was not fitted
to: results/h100/hopper_matmul_wide_pick.json). This module does not import hopper_matmul: that would stand it
a floor higher than a chapter may (tests/test_layers.py).

``tall_matmul`` cuts the tile the other way, 192 x 128, to give every wgmma the full n128 and no narrow tail:
three consumer warpgroups each own 64 of the rows (one m64n128k16 accumulator each) and share a stage's
128-column B box. A stage holds A's three 64 x 64 boxes and B's, four loads on one ``ready``; its ``empty``
counts three arrivals, so the producer (one warp) refills it only after every warpgroup has given it back.
Tall tiles are not in the pick. Measured on an H100 (results/h100/hopper_matmul_tall_tiles.json) they are correct
and win at 3072^3-like shapes, but the rule set down before that run did not admit them; a second rule
(``benchmarks.hopper_matmul.pick_tall``) waits for its held-out run (tools/validate_tall_pick.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from . import lens
from .core import hardware, validate
from .core.dtypes import DTYPES
from .core.hardware import SMEM_PER_CTA, WGMMA, check_on_gpu, require
from .core.occupancy import max_clusters
from .gluon.matmul import check_out
from .gluon.operands import check_operands, check_tma_tensor, descriptor_type, gl_dtype, nvmma_layout
from .gluon.ring import stage_of
from .gluon.scope import scope
from .gluon.tile_order import snake_tile

BLOCK_M, BLOCK_N0, BLOCK_K = 128, 128, 64
EXTRAS = (16, 32, 64)            # the second accumulator's widths: tiles 144, 160 and 192 wide


@gluon.aggregate
class Wide:
    """The operands, the ring of A and both B boxes, and its barriers."""
    a_desc: tma.tensor_descriptor
    b0_desc: tma.tensor_descriptor
    b1_desc: tma.tensor_descriptor
    c0_desc: tma.tensor_descriptor
    c1_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b0_bufs: gl.shared_memory_descriptor
    b1_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor      # stage s has landed: A's rows and both B boxes
    empty: gl.shared_memory_descriptor      # the consumers are done with stage s
    M: gl.tensor
    N: gl.tensor
    K: gl.tensor
    STAGES: gl.constexpr
    INSTRUMENT: gl.constexpr

    @gluon.jit
    def tiles(self):
        TN: gl.constexpr = self.b0_desc.block_shape[1] + self.b1_desc.block_shape[1]
        return gl.cdiv(self.M, self.a_desc.block_shape[0]), gl.cdiv(self.N, TN)

    @gluon.jit
    def offsets(self, lin):
        TN: gl.constexpr = self.b0_desc.block_shape[1] + self.b1_desc.block_shape[1]
        m_tiles, n_tiles = self.tiles()
        tm, tn = snake_tile(lin, m_tiles, n_tiles, 0, 8)
        return tm * self.a_desc.block_shape[0], tn * TN


@gluon.jit
def wide_producer(w):
    BK: gl.constexpr = w.a_desc.block_shape[1]
    N0: gl.constexpr = w.b0_desc.block_shape[1]
    m_tiles, n_tiles = w.tiles()
    it = 0
    for lin in range(gl.program_id(0), m_tiles * n_tiles, gl.num_programs(0)):
        off_m, off_n = w.offsets(lin)
        for k in range(gl.cdiv(w.K, BK)):
            s, phase = stage_of(it, w.STAGES)
            if it >= w.STAGES:                                   # the stage was used before: wait until freed
                with scope("wait_free", w.INSTRUMENT):
                    mbarrier.wait(w.empty.index(s), phase ^ 1)
            with scope("load", w.INSTRUMENT):                    # three boxes, one barrier: it expects their sum
                mbarrier.expect(w.ready.index(s), w.a_desc.nbytes_per_cta + w.b0_desc.nbytes_per_cta
                                + w.b1_desc.nbytes_per_cta)
                tma.async_load(w.a_desc, [off_m, k * BK], w.ready.index(s), w.a_bufs.index(s))
                tma.async_load(w.b0_desc, [k * BK, off_n], w.ready.index(s), w.b0_bufs.index(s))
                tma.async_load(w.b1_desc, [k * BK, off_n + N0], w.ready.index(s), w.b1_bufs.index(s))
            it += 1


@gluon.jit
def regs_step(w, it, k, acc0, acc1, a_prev, a_layout: gl.constexpr):
    """One K step with A's operand in registers: read from shared memory once (ldmatrix), then both wgmmas take it.
    A wgmma may read its A registers until a wait covers it (PTX ISA 9.7.15.7.3, wgmma.wait_group: accessing them
    before is undefined), so the caller alternates two call sites, and a_prev, the other site's A, stays live until
    this step's wait covers it."""
    s, phase = stage_of(it, w.STAGES)
    with scope("wait_ready", w.INSTRUMENT):
        mbarrier.wait(w.ready.index(s), phase)
    with scope("mma", w.INSTRUMENT):
        a = w.a_bufs.index(s).load(a_layout)
        acc0 = hopper.warpgroup_mma(a, w.b0_bufs.index(s), acc0, use_acc=k > 0, is_async=True)
        acc1 = hopper.warpgroup_mma(a, w.b1_bufs.index(s), acc1, use_acc=k > 0, is_async=True)
        acc0, acc1, a, a_prev = hopper.warpgroup_mma_wait(2, deps=[acc0, acc1, a, a_prev])
        if k > 0:
            mbarrier.arrive(w.empty.index((it - 1) % w.STAGES))
    return acc0, acc1, a


@gluon.jit
def wide_consumer(w, c0_smem, c1_smem, acc0_layout: gl.constexpr, acc1_layout: gl.constexpr, A_REGS: gl.constexpr):
    TM: gl.constexpr = w.a_desc.block_shape[0]
    BK: gl.constexpr = w.a_desc.block_shape[1]
    N0: gl.constexpr = w.b0_desc.block_shape[1]
    N1: gl.constexpr = w.b1_desc.block_shape[1]
    k_steps = gl.cdiv(w.K, BK)
    m_tiles, n_tiles = w.tiles()
    acc0 = gl.zeros([TM, N0], gl.float32, acc0_layout)
    acc1 = gl.zeros([TM, N1], gl.float32, acc1_layout)
    it = 0
    for lin in range(gl.program_id(0), m_tiles * n_tiles, gl.num_programs(0)):
        if A_REGS:                                               # two steps a turn: even and odd A registers
            A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc0_layout, k_width=2)
            a_odd = gl.zeros([TM, BK], w.a_desc.dtype, A_LAYOUT)
            for k in range(0, k_steps, 2):
                acc0, acc1, a_even = regs_step(w, it, k, acc0, acc1, a_odd, A_LAYOUT)
                it += 1
                if k + 1 < k_steps:
                    acc0, acc1, a_odd = regs_step(w, it, k + 1, acc0, acc1, a_even, A_LAYOUT)
                    it += 1
        else:
            for k in range(k_steps):
                s, phase = stage_of(it, w.STAGES)
                with scope("wait_ready", w.INSTRUMENT):
                    mbarrier.wait(w.ready.index(s), phase)
                with scope("mma", w.INSTRUMENT):
                    acc0 = hopper.warpgroup_mma(w.a_bufs.index(s), w.b0_bufs.index(s), acc0, use_acc=k > 0,
                                                is_async=True)
                    acc1 = hopper.warpgroup_mma(w.a_bufs.index(s), w.b1_bufs.index(s), acc1, use_acc=k > 0,
                                                is_async=True)
                    acc0, acc1 = hopper.warpgroup_mma_wait(2, deps=[acc0, acc1])   # the previous step's two are done
                    if k > 0:
                        mbarrier.arrive(w.empty.index((it - 1) % w.STAGES))      # ... so its stage goes back
                it += 1
        with scope("epilogue", w.INSTRUMENT):
            acc0, acc1 = hopper.warpgroup_mma_wait(0, deps=[acc0, acc1])
            mbarrier.arrive(w.empty.index((it - 1) % w.STAGES))
            off_m, off_n = w.offsets(lin)
            tma.store_wait(0)                                    # the last tile's stores have read the staging
            c0_smem.store(acc0.to(w.c0_desc.dtype))
            c1_smem.store(acc1.to(w.c1_desc.dtype))
            hopper.fence_async_shared()
            tma.async_store(w.c0_desc, [off_m, off_n], c0_smem)
            tma.async_store(w.c1_desc, [off_m, off_n + N0], c1_smem)    # past N: TMA writes nothing
    tma.store_wait(0)


@gluon.jit
def wide_matmul_kernel(a_desc, b0_desc, b1_desc, c0_desc, c1_desc, M, N, K, STAGES: gl.constexpr,
                       acc0_layout: gl.constexpr, acc1_layout: gl.constexpr, INSTRUMENT: gl.constexpr = False,
                       A_REGS: gl.constexpr = False):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape, a_desc.layout)
    b0_bufs = gl.allocate_shared_memory(b0_desc.dtype, [STAGES] + b0_desc.block_shape, b0_desc.layout)
    b1_bufs = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_shape, b1_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    empty = mbarrier.allocate_mbarrier(batch=STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    c0_smem = gl.allocate_shared_memory(c0_desc.dtype, c0_desc.block_shape, c0_desc.layout)
    c1_smem = gl.allocate_shared_memory(c1_desc.dtype, c1_desc.block_shape, c1_desc.layout)
    w = Wide(a_desc, b0_desc, b1_desc, c0_desc, c1_desc, a_bufs, b0_bufs, b1_bufs, ready, empty,
             gl.to_tensor(M), gl.to_tensor(N), gl.to_tensor(K), STAGES, INSTRUMENT)
    gl.warp_specialize([(wide_consumer, (w, c0_smem, c1_smem, acc0_layout, acc1_layout, A_REGS)),
                        (wide_producer, (w,))], [1], [40])


# ------------------------------------------------------------------------- tall tiles: three warpgroups

@gluon.aggregate
class Tall:
    """A 192 x 128 tile as three 64-row warpgroups' own accumulators: the ring of A's three 64 x 64 boxes and B's
    64 x 128 box a stage, and its barriers."""
    a_desc: tma.tensor_descriptor          # box 64 x 64: one warpgroup's rows
    b_desc: tma.tensor_descriptor          # box 64 x 128
    c_desc: tma.tensor_descriptor          # box 64 x 128
    a_bufs: gl.shared_memory_descriptor    # STAGES * GROUPS boxes: stage s, warpgroup g at s * GROUPS + g
    b_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor     # stage s has landed: the GROUPS boxes of A and B's
    empty: gl.shared_memory_descriptor     # every warpgroup is done with stage s (GROUPS arrivals)
    M: gl.tensor
    N: gl.tensor
    K: gl.tensor
    STAGES: gl.constexpr
    GROUPS: gl.constexpr
    INSTRUMENT: gl.constexpr

    @gluon.jit
    def tiles(self):
        TM: gl.constexpr = self.a_desc.block_shape[0] * self.GROUPS
        return gl.cdiv(self.M, TM), gl.cdiv(self.N, self.b_desc.block_shape[1])

    @gluon.jit
    def offsets(self, lin):
        m_tiles, n_tiles = self.tiles()
        tm, tn = snake_tile(lin, m_tiles, n_tiles, 0, 8)
        return tm * (self.a_desc.block_shape[0] * self.GROUPS), tn * self.b_desc.block_shape[1]


@gluon.jit
def tall_producer(t):
    BK: gl.constexpr = t.a_desc.block_shape[1]
    GM: gl.constexpr = t.a_desc.block_shape[0]
    m_tiles, n_tiles = t.tiles()
    it = 0
    for lin in range(gl.program_id(0), m_tiles * n_tiles, gl.num_programs(0)):
        off_m, off_n = t.offsets(lin)
        for k in range(gl.cdiv(t.K, BK)):
            s, phase = stage_of(it, t.STAGES)
            if it >= t.STAGES:                                   # every warpgroup gave the stage back
                with scope("wait_free", t.INSTRUMENT):
                    mbarrier.wait(t.empty.index(s), phase ^ 1)
            with scope("load", t.INSTRUMENT):                    # GROUPS + 1 boxes, one barrier: it expects their sum
                mbarrier.expect(t.ready.index(s), t.GROUPS * t.a_desc.nbytes_per_cta + t.b_desc.nbytes_per_cta)
                for g in gl.static_range(t.GROUPS):
                    tma.async_load(t.a_desc, [off_m + g * GM, k * BK], t.ready.index(s),
                                   t.a_bufs.index(s * t.GROUPS + g))
                tma.async_load(t.b_desc, [k * BK, off_n], t.ready.index(s), t.b_bufs.index(s))
            it += 1


@gluon.jit
def tall_consumer(t, c_smem, acc_layout: gl.constexpr, G: gl.constexpr):
    """Warpgroup G: rows G * 64 ... G * 64 + 63 of every tile, with its own accumulator, at every K step."""
    GM: gl.constexpr = t.a_desc.block_shape[0]
    BK: gl.constexpr = t.a_desc.block_shape[1]
    BN: gl.constexpr = t.b_desc.block_shape[1]
    k_steps = gl.cdiv(t.K, BK)
    m_tiles, n_tiles = t.tiles()
    acc = gl.zeros([GM, BN], gl.float32, acc_layout)
    it = 0
    for lin in range(gl.program_id(0), m_tiles * n_tiles, gl.num_programs(0)):
        for k in range(k_steps):
            s, phase = stage_of(it, t.STAGES)
            with scope("wait_ready", t.INSTRUMENT):
                mbarrier.wait(t.ready.index(s), phase)
            with scope("mma", t.INSTRUMENT):
                acc = hopper.warpgroup_mma(t.a_bufs.index(s * t.GROUPS + G), t.b_bufs.index(s), acc, use_acc=k > 0,
                                           is_async=True)
                acc = hopper.warpgroup_mma_wait(1, deps=[acc])           # the previous step's wgmma is done
                if k > 0:
                    mbarrier.arrive(t.empty.index((it - 1) % t.STAGES))  # ... so this warpgroup gives its stage back
            it += 1
        with scope("epilogue", t.INSTRUMENT):
            acc = hopper.warpgroup_mma_wait(0, deps=[acc])
            mbarrier.arrive(t.empty.index((it - 1) % t.STAGES))
            off_m, off_n = t.offsets(lin)
            tma.store_wait(0)                                    # the last tile's store has read the staging
            c_smem.store(acc.to(t.c_desc.dtype))
            hopper.fence_async_shared()
            tma.async_store(t.c_desc, [off_m + G * GM, off_n], c_smem)   # past M or N: TMA writes nothing
    tma.store_wait(0)


@gluon.jit
def tall_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, acc_layout: gl.constexpr,
                       INSTRUMENT: gl.constexpr = False):
    GROUPS: gl.constexpr = 3
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * GROUPS] + a_desc.block_shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape, b_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    empty = mbarrier.allocate_mbarrier(batch=STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=GROUPS)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [GROUPS] + c_desc.block_shape, c_desc.layout)
    t = Tall(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, gl.to_tensor(M), gl.to_tensor(N), gl.to_tensor(K),
             STAGES, GROUPS, INSTRUMENT)
    # warpgroup 0 is the default partition; the producer is one warp, since a partition of several warps puts a
    # bar.sync of all of them before every TMA issue
    gl.warp_specialize([(tall_consumer, (t, c_smem.index(0), acc_layout, 0)),
                        (tall_producer, (t,)),
                        (tall_consumer, (t, c_smem.index(1), acc_layout, 1)),
                        (tall_consumer, (t, c_smem.index(2), acc_layout, 2))], [1, 4, 4], [24, 160, 160])


# ------------------------------------------------------------------------------------------------ the host

NUM_WARPS = 8                    # two consumer warpgroups, 64 rows each


@dataclass(frozen=True)
class WidePlan:
    dtype: object
    extra: int = 64              # N1: the second accumulator's width
    stages: int = 4
    a_regs: bool = False
    # the descriptors in the kernel's order (box name, operand), and the box each operand is checked against: B's
    # narrower box and the output's, the stricter checks
    DESCRIPTORS = (("a", "a"), ("b0", "b"), ("b1", "b"), ("c0", "out"), ("c1", "out"))
    CHECKED = {"a": "a", "b": "b1", "out": "c1"}
    num_warps = NUM_WARPS

    @property
    def kernel(self):
        return wide_matmul_kernel

    @property
    def block_n(self) -> int:
        return BLOCK_N0 + self.extra

    def tiles(self, M: int, N: int) -> int:
        return tiles(M, N, self.extra)

    @property
    def smem_bytes(self) -> int:
        return 2 * self.stages * (BLOCK_M * BLOCK_K + BLOCK_K * self.block_n) + 2 * BLOCK_M * self.block_n + 1024

    def boxes(self) -> dict:
        return {"a": [BLOCK_M, BLOCK_K], "b0": [BLOCK_K, BLOCK_N0], "b1": [BLOCK_K, self.extra],
                "c0": [BLOCK_M, BLOCK_N0], "c1": [BLOCK_M, self.extra]}

    def layouts(self) -> dict:
        return {n: nvmma_layout(box, self.dtype, []) for n, box in self.boxes().items()}

    def constexprs(self, instrument: bool = False) -> dict:
        acc = [gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, n, 16])
               for n in (BLOCK_N0, self.extra)]
        return dict(STAGES=self.stages, acc0_layout=acc[0], acc1_layout=acc[1], INSTRUMENT=instrument,
                    A_REGS=self.a_regs)


TALL_GROUPS, TALL_GROUP_M, TALL_N = 3, 64, 128     # tall tiles: three warpgroups of 64 rows, 128 columns


@dataclass(frozen=True)
class TallPlan:
    """192 x 128 tiles: three consumer warpgroups (64 rows each, 64 x 128 wgmmas) and a producer warp."""
    dtype: object
    stages: int = 4
    DESCRIPTORS = (("a", "a"), ("b", "b"), ("c", "out"))
    CHECKED = {"a": "a", "b": "b", "out": "c"}
    num_warps = 4                # warpgroup 0's, the default partition; the other two and the producer are workers

    @property
    def kernel(self):
        return tall_matmul_kernel

    @property
    def block_m(self) -> int:
        return TALL_GROUPS * TALL_GROUP_M

    def tiles(self, M: int, N: int) -> int:
        return tall_tiles(M, N)

    @property
    def smem_bytes(self) -> int:
        return 2 * self.stages * (self.block_m * BLOCK_K + BLOCK_K * TALL_N) + 2 * self.block_m * TALL_N + 1024

    def boxes(self) -> dict:
        return {"a": [TALL_GROUP_M, BLOCK_K], "b": [BLOCK_K, TALL_N], "c": [TALL_GROUP_M, TALL_N]}

    def layouts(self) -> dict:
        return {n: nvmma_layout(box, self.dtype, []) for n, box in self.boxes().items()}

    def constexprs(self, instrument: bool = False) -> dict:
        acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TALL_N, 16])
        return dict(STAGES=self.stages, acc_layout=acc, INSTRUMENT=instrument)


def _check_shape(p, M, N, K, stages):
    if K < 1 or K % 8 or N % 8:
        raise ValueError(f"K and N must be positive multiples of 8 (16-byte aligned rows for TMA), got K={K}, N={N}")
    if p.stages < 2 or p.smem_bytes > SMEM_PER_CTA:
        what = f"extra = {p.extra}" if isinstance(p, WidePlan) else "192 x 128 tiles"
        raise ValueError(f"stages = {stages} with {what} needs {p.smem_bytes // 1024} KiB of shared memory "
                         f"per CTA (at most {SMEM_PER_CTA // 1024} KiB, at least 2 stages): use fewer stages")
    return p


def plan(M, N, K, dtype, *, extra: int = 64, stages: int = 4, a_regs: bool = False) -> WidePlan:
    """Validate a configuration; raises ValueError naming the parameter and what it accepts."""
    validate.one_of(extra, "extra", EXTRAS, " (the second accumulator's width: tiles 144, 160 or 192 wide)")
    validate.count(stages, "stages", high=16)
    validate.boolean(a_regs, "a_regs")
    return _check_shape(WidePlan(dtype, extra, stages, a_regs), M, N, K, stages)


def tall_plan(M, N, K, dtype, *, stages: int = 4) -> TallPlan:
    """Validate a tall-tile configuration; raises ValueError naming the parameter and what it accepts."""
    validate.count(stages, "stages", high=16)
    return _check_shape(TallPlan(dtype, stages), M, N, K, stages)


def tiles(M: int, N: int, extra: int = 64) -> int:
    """Output tiles of an M x N problem with 128 x (128 + extra) tiles."""
    return math.ceil(M / BLOCK_M) * math.ceil(N / (BLOCK_N0 + extra))


def tall_tiles(M: int, N: int) -> int:
    """Output tiles of an M x N problem with 192 x 128 tiles."""
    return math.ceil(M / (TALL_GROUPS * TALL_GROUP_M)) * math.ceil(N / TALL_N)


# ------------------------------------------------------------------------------------------------ the pick

# A K step's SM cycles, traced at 1536^3 on an NVIDIA H100 (results/h100/hopper_matmul_wide_tiles.json, "phases";
# 128 x 160 from results/h100/hopper_matmul_wide_pick.json): the narrow second wgmma keeps them above the
# tensor cores' 2 * 128 * N * 64 / 4096. The default kernel's 128 x 256 step runs at that rate: 1024 cycles
# (results/h100/hopper_matmul_phases.json).
STEP_CYCLES = {16: 877, 32: 910, 64: 957}
DEFAULT_TILE = (128, 256)        # hopper_matmul.CONFIG's block_m x block_n (tests/test_wide_tiles.py checks)
DEFAULT_STEP_CYCLES = 1024
# Take wide tiles where they are predicted at most this share of the default kernel's time: the rule's margin.
WIDE_GAIN = 0.95


def rounds_cycles(M: int, N: int, K: int, sms: int, extra: int | None = None) -> int:
    """The rounds model: ceil(tiles / sms) rounds of a persistent grid, each K / 64 steps of a tile's K step
    (STEP_CYCLES[extra] with wide tiles, DEFAULT_STEP_CYCLES with the default kernel's 128 x 256 ones, extra=None).
    It leaves out everything but the main loop: the fill, the epilogue and the launch."""
    for v, name in ((M, "M"), (N, "N"), (K, "K"), (sms, "sms")):
        validate.count(v, name, high=1 << 31)
    if extra is None:
        count, step = math.ceil(M / DEFAULT_TILE[0]) * math.ceil(N / DEFAULT_TILE[1]), DEFAULT_STEP_CYCLES
    else:
        validate.one_of(extra, "extra", EXTRAS, " (the second accumulator's width: tiles 144, 160 or 192 wide)")
        count, step = tiles(M, N, extra), STEP_CYCLES[extra]
    return math.ceil(count / sms) * math.ceil(K / BLOCK_K) * step


def best_share(M: int, N: int, K: int, sms: int) -> tuple:
    """(share, extra): the second accumulator's width whose rounds_cycles are fewest, and those cycles as a share of
    the default kernel's."""
    base = rounds_cycles(M, N, K, sms)                 # validates
    cycles, extra = min((rounds_cycles(M, N, K, sms, e), e) for e in EXTRAS)
    return cycles / base, extra


def best_extra(M: int, N: int, K: int, sms: int) -> int | None:
    """The width of :func:`best_share`, where its share is at most WIDE_GAIN; else None (the default kernel)."""
    share, extra = best_share(M, N, K, sms)
    return extra if share <= WIDE_GAIN else None


def _call(a, b, out, make, what: str):
    """Validate the operands, the output and the options (``make(M, N, K, dtype)`` builds the plan) before any
    hardware is touched, then the hardware, and build the TMA descriptors: (plan, out, descriptors, M, N, K)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    M, N, K = check_operands(a, b)
    p = make(M, N, K, gl_dtype(a))
    boxes, layouts = p.boxes(), p.layouts()
    check_tma_tensor(a, "a", boxes[p.CHECKED["a"]])
    check_tma_tensor(b, "b", boxes[p.CHECKED["b"]])
    if out is not None:
        check_out(out, M, N, a.dtype, boxes[p.CHECKED["out"]])
    require(WGMMA, what)
    for t, name in ((a, "a"), (b, "b")) + (((out, "out"),) if out is not None else ()):
        check_on_gpu(t, name)
    out = torch.empty((M, N), device=a.device, dtype=a.dtype) if out is None else out
    tensors = {"a": a, "b": b, "out": out}
    desc = [TensorDescriptor.from_tensor(tensors[t], boxes[n], layouts[n]) for n, t in p.DESCRIPTORS]
    return p, out, desc, M, N, K


def _prepare(call, programs):
    validate.optional_count(programs, "programs", high=1 << 20)
    p, out, desc, M, N, K = call()
    args = desc + [M, N, K]
    meta = p.constexprs()
    compiled = p.kernel.warmup(*args, **meta, grid=(1,), num_warps=p.num_warps)
    grid = min(p.tiles(M, N), max_clusters(compiled, 1) if programs is None else programs)
    run = compiled[(grid, 1, 1)]
    vals = args + list(meta.values())

    def launch():
        run(*vals)
        return out
    launch.grid = grid
    return launch


def _instrumented(call, programs):
    validate.optional_count(programs, "programs", high=1 << 20)
    p, out, desc, M, N, K = call()
    grid = min(p.tiles(M, N), programs or hardware.device().sms)
    p.kernel[(grid,)](*desc, M, N, K, **p.constexprs(True), num_warps=p.num_warps)
    return out


def prepare(a, b, out=None, *, extra: int = 64, stages: int = 4, a_regs: bool = False, programs: int | None = None):
    """Validate, build the descriptors, compile, size the persistent grid (one CTA per SM, as many as are resident)
    and return ``launch()``, which only launches."""
    return _prepare(lambda: _call(a, b, out, lambda M, N, K, dt: plan(M, N, K, dt, extra=extra, stages=stages,
                                                                       a_regs=a_regs), "wide_matmul"), programs)


def wide_matmul(a, b, out=None, *, extra: int = 64, stages: int = 4, a_regs: bool = False, programs: int | None = None,
                instrument: bool = False):
    """C = A @ B (fp16 or bf16, fp32 accumulation) on Hopper with 128 x (128 + extra) tiles of two accumulators.
    ``instrument=True`` launches through the JIT with the timeline scopes, so that they compile inside proton's
    session (``traces.record``)."""
    validate.boolean(instrument, "instrument")
    if not instrument:
        return prepare(a, b, out, extra=extra, stages=stages, a_regs=a_regs, programs=programs)()
    return _instrumented(lambda: _call(a, b, out, lambda M, N, K, dt: plan(M, N, K, dt, extra=extra, stages=stages,
                                                                            a_regs=a_regs), "wide_matmul"), programs)


def prepare_tall(a, b, out=None, *, stages: int = 4, programs: int | None = None):
    """:func:`prepare` for 192 x 128 tiles (``tall_matmul_kernel``)."""
    return _prepare(lambda: _call(a, b, out, lambda M, N, K, dt: tall_plan(M, N, K, dt, stages=stages),
                                  "tall_matmul"), programs)


def tall_matmul(a, b, out=None, *, stages: int = 4, programs: int | None = None, instrument: bool = False):
    """C = A @ B (fp16 or bf16, fp32 accumulation) on Hopper with 192 x 128 tiles: three warpgroups of 64 rows."""
    validate.boolean(instrument, "instrument")
    if not instrument:
        return prepare_tall(a, b, out, stages=stages, programs=programs)()
    return _instrumented(lambda: _call(a, b, out, lambda M, N, K, dt: tall_plan(M, N, K, dt, stages=stages),
                                       "tall_matmul"), programs)


def _spec(name, p, instrument, expect=("wgmma.mma_async", "cp.async.bulk.tensor")):
    boxes, layouts = p.boxes(), p.layouts()
    sig = {f"{n}_desc": descriptor_type(p.dtype, boxes[n], layouts[n]) for n, _ in p.DESCRIPTORS}
    sig.update(M="i32", N="i32", K="i32", **{k: "constexpr" for k in p.constexprs(instrument)})
    return lens.KernelSpec(name, p.kernel, sig, p.constexprs(instrument), {"num_warps": p.num_warps, "num_ctas": 1},
                           targets=("sm_90a",), expect=expect)


def wide_matmul_spec(dtype: str = "float16", extra: int = 64, stages: int = 4, instrument: bool = False,
                     a_regs: bool = False):
    """The lens spec at an 8192 x 8192 x 4096 problem's descriptors."""
    dtype = validate.dtype(dtype)
    return _spec("wide_matmul", plan(8192, 8192, 4096, DTYPES[dtype].gl, extra=extra, stages=stages, a_regs=a_regs),
                 instrument)


def tall_matmul_spec(dtype: str = "float16", stages: int = 4, instrument: bool = False):
    """The lens spec of 192 x 128 tiles at an 8192 x 8192 x 4096 problem's descriptors."""
    dtype = validate.dtype(dtype)
    return _spec("tall_matmul", tall_plan(8192, 8192, 4096, DTYPES[dtype].gl, stages=stages), instrument)
