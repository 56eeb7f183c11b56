"""Chapter 5: a persistent, warp-specialised 2-CTA matmul scheduled by cluster launch control.

The grid launches one cluster per output tile. A running cluster's *scheduler* partition keeps
stealing not-yet-started clusters with ``clc.try_cancel`` (issued by one CTA, its 16-byte answer
multicast to every CTA of the cluster) and computes their tiles itself, so a cluster runs until no
work is left. Four partitions share each CTA:

* scheduler (1 warp): asks for the next tile, and stops at the first failed cancel;
* loader (1 warp): TMA loads of A and B (multicast where the layout shares them) into a ring;
* MMA (1 warp): 2-CTA ``tcgen05_mma`` into double-buffered tensor-memory accumulators;
* epilogue (default warps): drains an accumulator in sub-tiles through TMA stores.

Every barrier is allocated and initialised before ``warp_specialize`` (chapter 2).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, clc,
                                                                 tcgen05_mma, tcgen05_mma_barrier_count,
                                                                 tensor_memory_descriptor)
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from . import lens
from .core import validate
from .core.dtypes import DTYPES
from .core.hardware import SMEM_PER_CTA, TCGEN05, TMA_BOX_MAX, TMEM_COLUMNS, log2
from .gluon.matmul import matmul_spec, options, prepare_matmul, with_defaults
from .gluon.operands import check_m_split, check_operands, gl_dtype, nvmma_layout, operand_cga_layouts
from .gluon.ring import stage_of
from .gluon.scope import scope
from .gluon.tile_order import snake_tile


CLC_SLOTS = gl.constexpr(2)          # CLC answers in flight
CLC_READERS = gl.constexpr(4)        # scheduler, loader, MMA and epilogue each read every answer


@gluon.aggregate
class Shared:
    """What all partitions see: descriptors, buffers, barriers and the tiling."""
    a_desc: tma.tensor_descriptor
    b_desc: tma.tensor_descriptor
    c_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b_bufs: gl.shared_memory_descriptor
    load_ready: gl.shared_memory_descriptor   # stage landed (2-CTA: the pair's leader waits for both halves)
    load_empty: gl.shared_memory_descriptor   # stage read by every MMA that needs it (multicast commit)
    acc_bufs: tensor_memory_descriptor
    acc_ready: gl.shared_memory_descriptor    # accumulator complete (the last K step's commit)
    acc_empty: gl.shared_memory_descriptor    # accumulator drained by both epilogues of the pair
    clc_result: gl.shared_memory_descriptor
    clc_ready: gl.shared_memory_descriptor    # this CTA received the CLC answer
    clc_empty: gl.shared_memory_descriptor    # this CTA's four readers are done with the slot
    M: gl.tensor
    N: gl.tensor
    K: gl.tensor
    TILE_M: gl.constexpr
    TILE_N: gl.constexpr
    BK: gl.constexpr
    STAGES: gl.constexpr
    ACC_STAGES: gl.constexpr
    EPI_N: gl.constexpr
    MINOR_DIM: gl.constexpr
    TILE_WIDTH: gl.constexpr
    INSTRUMENT: gl.constexpr                  # timeline scopes (no code unless proton records)

    @gluon.jit
    def tile(self, lin):
        m_tiles = gl.cdiv(self.M, self.TILE_M)
        n_tiles = gl.cdiv(self.N, self.TILE_N)
        tm, tn = snake_tile(lin, m_tiles, n_tiles, self.MINOR_DIM, self.TILE_WIDTH)
        return tm * self.TILE_M, tn * self.TILE_N

    @gluon.jit
    def next_tile(self, i):
        # Read CLC answer i (the tile after this partition's i-th tile) and release its slot.
        slot, phase = stage_of(i, CLC_SLOTS)
        mbarrier.wait(self.clc_ready.index(slot), phase)
        answer = clc.load_result(self.clc_result.index(slot))
        mbarrier.arrive(self.clc_empty.index(slot))          # local: this CTA's reader is done
        canceled = answer.is_canceled()
        lin = gl.to_tensor(-1)                               # no tile: the loop ends on `canceled`
        if canceled:                                         # a failed answer's ctaid is undefined (PTX ISA,
            lin = answer.program_id(0)                       # query_cancel): read it only on success
        return canceled, lin


@gluon.jit
def scheduler_partition(p):
    i = 0
    has_work = True
    while has_work:
        slot, phase = stage_of(i, CLC_SLOTS)
        with scope("ask", p.INSTRUMENT):
            mbarrier.wait(p.clc_empty.index(slot), phase ^ 1)               # my CTA's readers freed it
            # Every CTA's readers, not only CTA 0's: the answer lands in every CTA's slot. A rendezvous
            # of the schedulers at cluster scope (3.9 lowers it to a cross-CTA mbarrier hand-shake). The
            # fence.proxy.async.shared::cluster before try_cancel is not this barrier's: Triton's proxy-fence
            # pass puts it there because load_result read the slot (generic proxy) that try_cancel now
            # writes (async proxy); a copy without the barrier has it too (answer_reuse_kernel shows why).
            hopper.cluster.barrier()
            mbarrier.expect(p.clc_ready.index(slot), 16)                     # every CTA gets the 16 bytes
            clc.try_cancel(p.clc_result.index(slot), p.clc_ready.index(slot))   # CTA 0 asks, all receive
        with scope("answer", p.INSTRUMENT):
            has_work, _ = p.next_tile(i)         # stop at the first failed cancel: retrying is undefined
        i += 1


@gluon.jit
def load_partition(p):
    k_tiles = gl.cdiv(p.K, p.BK)
    nbytes: gl.constexpr = p.a_desc.nbytes_per_cta + p.b_desc.nbytes_per_cta
    it = 0
    i = 0
    has_work = True
    lin = gl.program_id(0)
    while has_work:
        off_m, off_n = p.tile(lin)
        for k in range(k_tiles):
            s, phase = stage_of(it, p.STAGES)
            with scope("wait_free", p.INSTRUMENT):
                mbarrier.wait(p.load_empty.index(s), phase ^ 1)                 # fresh barriers pass
            with scope("load", p.INSTRUMENT):
                mbarrier.expect(p.load_ready.index(s), nbytes)                  # per CTA
                tma.async_load(p.a_desc, [off_m, k * p.BK], p.load_ready.index(s), p.a_bufs.index(s),
                               multicast=True)
                tma.async_load(p.b_desc, [k * p.BK, off_n], p.load_ready.index(s), p.b_bufs.index(s),
                               multicast=True)
            it += 1
        has_work, lin = p.next_tile(i)
        i += 1
    # Producer tail. Nobody waits for the commits that free the last STAGES stages, and at 4 CTAs
    # the other pair's MMA commits into this CTA's load_empty too. The exit cluster barrier orders
    # threads, not tcgen05.commit arrivals still in flight: wait them out, so none lands in a CTA
    # that has exited (CUTLASS's producer_tail). A stage never filled passes on its fresh barrier.
    for j in gl.static_range(p.STAGES):
        s, phase = stage_of(it + j, p.STAGES)
        mbarrier.wait(p.load_empty.index(s), phase ^ 1)


@gluon.jit
def mma_partition(p):
    k_tiles = gl.cdiv(p.K, p.BK)
    it = 0
    t = 0
    i = 0
    has_work = True
    while has_work:
        a, acc_phase = stage_of(t, p.ACC_STAGES)
        with scope("wait_acc", p.INSTRUMENT):
            mbarrier.wait(p.acc_empty.index(a), acc_phase ^ 1)                # both epilogues drained it
        acc = p.acc_bufs.index(a)
        for k in range(k_tiles):
            s, phase = stage_of(it, p.STAGES)
            with scope("wait_ready", p.INSTRUMENT):
                mbarrier.wait(p.load_ready.index(s), phase)
            with scope("mma", p.INSTRUMENT):
                tcgen05_mma(p.a_bufs.index(s), p.b_bufs.index(s), acc, use_acc=k > 0, multicast=True,
                            mbarriers=[p.load_empty.index(s), p.acc_ready.index(a)],
                            mbarrier_preds=[True, k == k_tiles - 1])
            it += 1
        t += 1
        has_work, _ = p.next_tile(i)
        i += 1
    # Producer tail of the accumulators: wait for both epilogues' last releases (the pair's leader
    # waits; in the other CTA this is no wait), so no arrival is owed to this CTA when it exits.
    for j in gl.static_range(p.ACC_STAGES):
        a, acc_phase = stage_of(t + j, p.ACC_STAGES)
        mbarrier.wait(p.acc_empty.index(a), acc_phase ^ 1)


@gluon.jit
def epilogue_partition(p):
    dtype: gl.constexpr = p.c_desc.dtype
    SUBTILES: gl.constexpr = p.TILE_N // p.EPI_N
    c_bufs = gl.allocate_shared_memory(dtype, [2] + p.c_desc.block_shape, p.c_desc.layout)
    stores = 0                                       # TMA stores issued so far, across tiles
    t = 0
    i = 0
    has_work = True
    lin = gl.program_id(0)
    while has_work:
        off_m, off_n = p.tile(lin)
        a, acc_phase = stage_of(t, p.ACC_STAGES)
        with scope("wait_acc", p.INSTRUMENT):
            mbarrier.wait(p.acc_ready.index(a), acc_phase)
        acc = p.acc_bufs.index(a)
        with scope("store", p.INSTRUMENT):
            for j in gl.static_range(SUBTILES):
                part = acc.slice(j * p.EPI_N, p.EPI_N).load()
                buf = c_bufs.index(stores % 2)       # alternate across tiles too: with one sub-tile per
                tma.store_wait(1)                    # tile, restarting at 0 would overwrite a buffer the
                buf.store(part.to(dtype))            # previous tile's store may still be reading
                fence_async_shared()
                tma.async_store(p.c_desc, [off_m, off_n + j * p.EPI_N], buf)
                stores += 1
        mbarrier.arrive(p.acc_empty.index(a))        # group of the pair: lands on the leader
        t += 1
        has_work, lin = p.next_tile(i)
        i += 1
    tma.store_wait(0)


@gluon.jit
def clc_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, ACC_STAGES: gl.constexpr,
                      EPI_N: gl.constexpr, MINOR_DIM: gl.constexpr, TILE_WIDTH: gl.constexpr,
                      acc_layout: gl.constexpr, answer_layout: gl.constexpr, INSTRUMENT: gl.constexpr = False):
    TILE_M: gl.constexpr = a_desc.block_shape[0]
    BK: gl.constexpr = a_desc.block_shape[1]
    TILE_N: gl.constexpr = b_desc.block_shape[1]
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_shape, b_desc.layout)
    acc_bufs = allocate_tensor_memory(gl.float32, [ACC_STAGES, TILE_M, TILE_N], acc_layout)
    commits: gl.constexpr = tcgen05_mma_barrier_count([a_bufs.index(0), b_bufs.index(0)], multicast=True,
                                                      two_ctas=True)

    load_ready = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)
    load_empty = mbarrier.allocate_mbarrier(batch=STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.init(load_ready.index(s), count=1)
        mbarrier.init(load_empty.index(s), count=commits)
    acc_ready = mbarrier.allocate_mbarrier(batch=ACC_STAGES)
    acc_empty = mbarrier.allocate_mbarrier(batch=ACC_STAGES, two_ctas=True)
    for s in gl.static_range(ACC_STAGES):
        mbarrier.init(acc_ready.index(s), count=commits)
        mbarrier.init(acc_empty.index(s), count=1)
    clc_result = gl.allocate_shared_memory(gl.int64, [CLC_SLOTS, 2], answer_layout)   # every CTA holds the answer
    clc_ready = mbarrier.allocate_mbarrier(batch=CLC_SLOTS)
    clc_empty = mbarrier.allocate_mbarrier(batch=CLC_SLOTS)      # per CTA: its own four readers
    for s in gl.static_range(CLC_SLOTS):
        mbarrier.init(clc_ready.index(s), count=1)
        mbarrier.init(clc_empty.index(s), count=CLC_READERS)

    p = Shared(a_desc, b_desc, c_desc, a_bufs, b_bufs, load_ready, load_empty, acc_bufs, acc_ready, acc_empty,
               clc_result, clc_ready, clc_empty, gl.to_tensor(M), gl.to_tensor(N), gl.to_tensor(K),   # 1 -> constexpr
               TILE_M, TILE_N, BK, STAGES, ACC_STAGES, EPI_N, MINOR_DIM, TILE_WIDTH, INSTRUMENT)
    gl.warp_specialize([(epilogue_partition, (p,)), (load_partition, (p,)), (mma_partition, (p,)),
                        (scheduler_partition, (p,))], [1, 1, 1], [48, 48, 48])


# ------------------------------------------- where the fence before try_cancel comes from: lens only

@gluon.jit
def answer_reuse_kernel(out_ptr, answer_layout: gl.constexpr, SAME_SLOT: gl.constexpr):
    """Two CLC requests; the second writes its answer into the slot the first answer was read from
    (SAME_SLOT) or into the other one. Lens only, never launched (it would cancel clusters of nobody's
    grid): it shows that Triton fences the async proxy before a try_cancel exactly when a generic read
    of that slot (load_result) comes before it, with or without any cluster barrier."""
    result = gl.allocate_shared_memory(gl.int64, [2, 2], answer_layout)
    ready = mbarrier.allocate_mbarrier(batch=2)
    mbarrier.init(ready.index(0), count=1)
    mbarrier.init(ready.index(1), count=1)
    mbarrier.expect(ready.index(0), 16)
    clc.try_cancel(result.index(0), ready.index(0))
    mbarrier.wait(ready.index(0), 0)
    first = clc.load_result(result.index(0))          # a generic-proxy read of slot 0
    slot: gl.constexpr = 0 if SAME_SLOT else 1
    mbarrier.expect(ready.index(1), 16)
    clc.try_cancel(result.index(slot), ready.index(1))  # an async-proxy write of slot 0 or 1
    mbarrier.wait(ready.index(1), 0)
    second = clc.load_result(result.index(slot))
    gl.store(out_ptr, first.is_canceled().to(gl.int32) + second.is_canceled().to(gl.int32))


def answer_reuse_spec(same_slot: bool = True, num_ctas: int = 2) -> lens.KernelSpec:
    """The lens spec of ``answer_reuse_kernel`` on a cluster of ``num_ctas`` (every CTA holds the answer)."""
    validate.boolean(same_slot, "same_slot")
    validate.cluster_size(num_ctas)
    answer = gl.SwizzledSharedLayout(1, 1, 1, [0], cga_layout=[[0]] * log2(num_ctas))
    return lens.KernelSpec("answer_reuse", answer_reuse_kernel, {"out_ptr": "*i32", "answer_layout": "constexpr",
                                                                  "SAME_SLOT": "constexpr"},
                           {"answer_layout": answer, "SAME_SLOT": same_slot}, {"num_warps": 4, "num_ctas": num_ctas},
                           targets=("sm_100a",), expect=("clusterlaunchcontrol.try_cancel",))




# Bytes of proton's per-CTA record buffer when CONFIG is timed: its default buffer does not fit beside the
# 6-stage ring in a Blackwell CTA's shared memory (tests/test_timeline.py checks both facts).
TIMELINE_BUFFER = 16384


@dataclass(frozen=True)
class ClcPlan:
    """A validated configuration and everything built from it: what the launch and the lens spec use. Its fields
    after ``dtype`` are the options of ``clc_matmul`` and ``prepare`` with their defaults, the one list of them:
    ``CONFIG`` is read from it and :func:`plan` checks names against it."""
    dtype: object
    block_m: int = 128               # rows per CTA (the MMA's M)
    block_n: int = 256
    block_k: int = 64
    stages: int = 6                  # depth of the TMA ring
    acc_stages: int = 2              # tensor-memory accumulators (double-buffered)
    epilogue_n: int = 32             # width of the epilogue's store slices
    minor_dim: int = 0               # planar-snake tile order: the minor dimension ...
    tile_width: int = 16             # ... and the width of its bands
    cga_layout: tuple = ((1, 0),)    # the accumulator's bases: (1, 0) first (the 2-CTA pair), then more M splits
    instrument: bool = False         # timeline scopes compiled in

    @property
    def num_ctas(self) -> int:
        return 1 << len(self.cga_layout)

    @property
    def tile_m(self) -> int:
        return self.block_m * self.num_ctas

    @property
    def smem_bytes(self) -> int:
        """The ring and the two staging buffers, per CTA (each CTA holds its share of A and B)."""
        a_bases, b_bases = operand_cga_layouts(self.cga_layout, two_ctas=True)
        per_cta_a = self.tile_m * self.block_k >> sum(1 for x in a_bases if any(x))
        per_cta_b = self.block_k * self.block_n >> sum(1 for x in b_bases if any(x))
        return 2 * (self.stages * (per_cta_a + per_cta_b) + 2 * self.block_m * self.epilogue_n) + 1024  # + barriers

    @property
    def a(self):
        return nvmma_layout([self.tile_m, self.block_k], self.dtype, operand_cga_layouts(self.cga_layout, True)[0])

    @property
    def b(self):
        return nvmma_layout([self.block_k, self.block_n], self.dtype, operand_cga_layouts(self.cga_layout, True)[1])

    @property
    def c(self):
        return nvmma_layout([self.tile_m, self.epilogue_n], self.dtype, self.cga_layout)

    def constexprs(self) -> dict:
        acc = TensorMemoryLayout(block=(self.block_m, self.block_n), col_stride=1,
                                 cga_layout=[list(b) for b in self.cga_layout], two_ctas=True)
        answer = gl.SwizzledSharedLayout(1, 1, 1, [0], cga_layout=[[0]] * log2(self.num_ctas))  # every CTA holds it
        return dict(STAGES=self.stages, ACC_STAGES=self.acc_stages, EPI_N=self.epilogue_n, MINOR_DIM=self.minor_dim,
                    TILE_WIDTH=self.tile_width, acc_layout=acc, answer_layout=answer, INSTRUMENT=self.instrument)


def _power_of_two(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0 and not n & (n - 1)


def plan(M, N, K, dtype, **options) -> ClcPlan:
    """Validate a configuration for an (M, N, K) problem; raises ValueError naming what to change. ``options``
    are fields of :class:`ClcPlan` (the others keep their defaults); another name is a TypeError."""
    p = ClcPlan(dtype, **with_defaults(options, CONFIG, "clc_matmul"))
    validate.one_of(p.block_m, "block_m", (64, 128), " (the per-CTA MMA M)")
    validate.one_of(p.block_k, "block_k", (32, 64), " (a 64- or 128-byte swizzled row)")
    validate.count(p.stages, "stages", high=16)
    validate.count(p.acc_stages, "acc_stages", high=4)
    validate.one_of(p.minor_dim, "minor_dim", (0, 1))
    validate.count(p.tile_width, "tile_width", high=1 << 16)
    validate.boolean(p.instrument, "instrument")
    validate.integer(p.block_n, "block_n")
    validate.integer(p.epilogue_n, "epilogue_n")
    validate.bases(p.cga_layout, "cga_layout", rank=2)
    validate.cluster_size(1 << len(p.cga_layout), "1 << len(cga_layout)", low=2)
    acc = tuple(tuple(b) for b in p.cga_layout)
    if not acc or acc[0] != (1, 0):
        raise ValueError(f"cga_layout must start with (1, 0): the 2-CTA pair splits M; got {list(p.cga_layout)}")
    check_m_split(acc, "clc_matmul")
    operand_cga_layouts(acc, two_ctas=True)                        # validates the bases
    # block_n and epilogue_n are TMA boxes (B's and C's): powers of two of at most TMA_BOX_MAX, as Triton's
    # TensorDescriptor and operands.check_tma_tensor require; 16 is the narrowest B a 2-CTA MMA reads (8 per CTA).
    if not _power_of_two(p.block_n) or not 16 <= p.block_n <= TMA_BOX_MAX:
        raise ValueError(f"block_n must be a power of two from 16 to {TMA_BOX_MAX} (a TMA box of B, at most "
                         f"{TMA_BOX_MAX} tensor-memory columns per CTA), got {p.block_n!r}")
    if p.acc_stages * p.block_n > TMEM_COLUMNS:
        raise ValueError(f"{p.acc_stages} accumulators of {p.block_n} fp32 columns exceed the {TMEM_COLUMNS} columns "
                         "of tensor memory")
    if not _power_of_two(p.epilogue_n) or not 8 <= p.epilogue_n <= p.block_n:
        raise ValueError(f"epilogue_n must be a power of two from 8 to block_n = {p.block_n} (a TMA box of C that "
                         f"divides the tile), got {p.epilogue_n!r}")
    if K < 1 or K % 8 or N % 8:
        raise ValueError(f"K and N must be positive multiples of 8 (16-byte aligned rows for TMA), got K={K}, N={N}")
    p = dataclasses.replace(p, cga_layout=acc)
    if p.smem_bytes > SMEM_PER_CTA:
        raise ValueError(f"{p.stages} stages need about {p.smem_bytes // 1024} KiB of shared memory per CTA (at most "
                         f"{SMEM_PER_CTA // 1024} KiB); lower stages, block_k or block_n")
    return p


CONFIG = options(ClcPlan)      # the options and their defaults, read from the plan's fields


def prepare(a, b, out=None, *, kernel=None, **config):
    """Validate once, build the TMA descriptors once, size the grid (one cluster per output tile; CLC
    then lets running clusters take the tiles of clusters that have not started), and return
    ``launch()``, which only launches (what a benchmark should time: the timer then sees the GPU, not
    the Python front). Triton's JIT compiles the kernel at the first ``launch()`` and finds it in its
    cache after that. ``launch.grid`` is the number of clusters; ``launch.compile()`` compiles without launching
    and returns the compiled kernel.

    ``kernel`` launches another ``@gluon.jit`` function with ``clc_matmul_kernel``'s parameters instead
    (a copy you changed, as in chapter 5's "Change it and see"). Options: see CONFIG and ``clc_matmul``."""
    from triton.experimental.gluon._runtime import GluonJITFunction
    kernel = clc_matmul_kernel if kernel is None else kernel
    if not isinstance(kernel, GluonJITFunction):
        raise TypeError(f"kernel must be a @gluon.jit function, got {type(kernel).__name__}")
    if kernel.arg_names != clc_matmul_kernel.arg_names:
        raise ValueError(f"kernel must take clc_matmul_kernel's parameters {clc_matmul_kernel.arg_names}, "
                         f"got {kernel.arg_names}")
    M, N, K = check_operands(a, b)
    p = plan(M, N, K, gl_dtype(a), **config)
    call = prepare_matmul(a, b, out, p, TCGEN05, "clc_matmul")
    tiles = math.ceil(call.M / p.tile_m) * math.ceil(call.N / p.block_n)
    args = dict(a_desc=call.a_desc, b_desc=call.b_desc, c_desc=call.c_desc, M=call.M, N=call.N, K=call.K,
                **p.constexprs())
    args = [args[name] for name in kernel.arg_names]
    run = kernel[(tiles,)]
    out = call.out

    def launch():
        run(*args, num_warps=4, num_ctas=p.num_ctas)
        return out

    def compile():
        """The kernel compiled for this launch (Triton's warm-up: nothing runs), e.g. for occupancy.max_clusters."""
        return kernel.warmup(*args, grid=(tiles,), num_warps=4, num_ctas=p.num_ctas)
    launch.grid = tiles
    launch.compile = compile
    return launch


def clc_matmul(a, b, out=None, **config):
    """C = A @ B (fp16 or bf16 in and out, fp32 accumulation) on Blackwell. ``config`` overrides
    CONFIG: block_m (per CTA), block_n, block_k, stages, acc_stages, epilogue_n, minor_dim,
    tile_width, cga_layout (starting with (1, 0), e.g. ((1, 0),) or ((1, 0), (2, 0)))."""
    return prepare(a, b, out, **config)()


def clc_matmul_spec(dtype: str = "float16", **config):
    dtype = validate.dtype(dtype)
    p = plan(8192, 8192, 4096, DTYPES[dtype].gl, **config)
    return matmul_spec("clc_matmul", clc_matmul_kernel, p, 4, ("sm_100a",),
                       ("clusterlaunchcontrol.try_cancel", "multicast::cluster::all", "tcgen05.mma.cta_group::2",
                        "cp.async.bulk.tensor", ".reqnctapercluster"))


# ------------------------------------------------------------------------ the anatomy, as data

BARRIERS = [
    # name, per, count at init, two_ctas, who arrives, who waits
    ("load_ready[s]", "stage", "1 (x2 on the pair's leader)", True,
     "the loader's expect in both CTAs of the pair, then the TMA bytes", "the MMA warp of the pair's leader"),
    ("load_empty[s]", "stage", "tcgen05_mma_barrier_count(..., multicast=True, two_ctas=True)", False,
     "the multicast commit of every MMA that read the stage", "the loader of every CTA"),
    ("acc_ready[a]", "accumulator", "same count as load_empty", False,
     "the commit of a tile's last MMA", "the epilogue of every CTA"),
    ("acc_empty[a]", "accumulator", "1 (x2 on the pair's leader)", True,
     "the epilogue of both CTAs of the pair", "the MMA warp of the pair's leader"),
    ("clc_ready[c]", "CLC slot", "1, plus 16 bytes", False,
     "the scheduler's expect, then the CLC answer multicast by CTA 0", "all four partitions of every CTA"),
    ("clc_empty[c]", "CLC slot", f"{CLC_READERS.value}, in every CTA", False,
     "the four partitions of the same CTA, once they read the answer",
     "the scheduler of the same CTA; then all schedulers meet at a cluster barrier before CTA 0's next try_cancel"),
]


def makespan(durations, workers: int, dynamic: bool, speeds=None) -> float:
    """Time to finish tiles of the given durations on ``workers`` clusters running at ``speeds``
    (default all 1): static round-robin (a persistent grid: tile i on worker i % workers) or
    dynamic (a worker takes the next tile when it is free, as with cluster launch control)."""
    import heapq
    if workers < 1:
        raise ValueError("workers must be at least 1")
    speeds = list(speeds) if speeds is not None else [1.0] * workers
    if len(speeds) != workers or min(speeds) <= 0:
        raise ValueError("speeds needs one positive number per worker")
    if not dynamic:
        load = [0.0] * workers
        for i, d in enumerate(durations):
            load[i % workers] += d / speeds[i % workers]
        return max(load)
    free = [(0.0, w) for w in range(workers)]
    heapq.heapify(free)
    end = 0.0
    for d in durations:
        t, w = heapq.heappop(free)
        t += d / speeds[w]
        end = max(end, t)
        heapq.heappush(free, (t, w))
    return end


# ---------------------------------------------------------------------------------- benchmark

VARIANTS = {"clc_2cta": dict(cga_layout=((1, 0),)), "clc_4cta": dict(cga_layout=((1, 0), (2, 0)))}
