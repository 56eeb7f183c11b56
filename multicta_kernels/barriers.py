"""Chapter 2: multi-CTA mbarriers, as a model you can step through and as kernels that prove it.

The model (groups, leaders, the four rules Triton 3.9 applies to a barrier's ``cga_layout``, the stepped
scripts of the chapter's explorer) is pure Python and lives in :mod:`multicta_kernels.barrier_model`; its
names are re-exported here, so the chapter writes ``barriers.BarrierSim``. This module holds the kernels:
probes that check the model against Triton's PTX, the exchange, the ping-pong, the pair sums and the
barrier-cost kernels, and their lens specs.
"""
from __future__ import annotations

import re

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from . import lens
# The chapter's model, re-exported: the notebook and the workshop write barriers.BarrierSim, barriers.barrier_steps.
from .barrier_model import (HAND_OFF, LOST_PHASE, OPS, OPS_HELP, TMA_BYTES, BarrierLayoutModel,  # noqa: F401
                            BarrierSim, BarrierState, barrier_steps, broadcast_targets, check_barrier_layout,
                            parse_script, trace_table)
from .core import validate
from .core.hardware import CLUSTERS, check_cluster_size, check_on_gpu, log2, require
from .gluon.scope import scope
from .gluon.sync import acquire_wait, cluster_fence, cluster_rank, release_arrive, sync_inits


# -------------------------------------------------------------------------- checking against Triton

@gluon.jit
def barrier_probe_kernel(NBARS: gl.constexpr, LAYOUT: gl.constexpr, COUNT: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [NBARS], LAYOUT)
    mbarrier.init(bar, count=COUNT)
    mbarrier.arrive(bar)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)


@gluon.jit
def expect_probe_kernel(NBARS: gl.constexpr, LAYOUT: gl.constexpr, NBYTES: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [NBARS], LAYOUT)
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, NBYTES)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)


def _probe(name, fn, bases, num_ctas, extra: dict, target: str):
    """Compile a barrier probe kernel for a layout: its PTX, and the count of its first ``mbarrier.init``."""
    model = BarrierLayoutModel.of(bases, num_ctas)
    spec = lens.KernelSpec(
        name, fn, {"NBARS": "constexpr", "LAYOUT": "constexpr", **{k: "constexpr" for k in extra}},
        {"NBARS": model.num_barriers, "LAYOUT": mbarrier.MBarrierLayout([list(b) for b in model.bases]), **extra},
        {"num_warps": 4, "num_ctas": num_ctas})
    ptx = lens.compile(spec, target).ptx
    init = lens.mbarrier_init_counts(ptx)
    return ptx, init[0] if init else None


def probe_ptx(bases, num_ctas: int, count: int = 3, target: str = "sm_90a") -> str:
    """The PTX of ``barrier_probe_kernel`` (init with ``count``, arrive, wait) on a barrier layout: what Triton makes
    of a user's barrier operations, read by :func:`compiled_facts` and by the chapter's rule-4 check."""
    return _probe("barrier_probe", barrier_probe_kernel, bases, num_ctas, {"COUNT": count}, target)[0]


def expect_facts(bases, num_ctas: int, nbytes: int = 1024, target: str = "sm_90a") -> dict:
    """What Triton emits for ``expect(bar, nbytes)`` on a barrier layout: the init count, the bytes each
    CTA's ``arrive.expect_tx`` carries, and whether it goes to another CTA's barrier."""
    ptx, init = _probe("expect_probe", expect_probe_kernel, bases, num_ctas, {"NBYTES": nbytes}, target)
    tx = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::(\w+)\.b64 _, \[[^\]]+\], (\d+);", ptx)
    return {"init_count": init, "bytes_per_arrival": int(tx[0][1]) if tx else None,
            "remote": bool(tx) and tx[0][0] == "cluster"}


def compiled_facts(bases, num_ctas: int, count: int = 3, target: str = "sm_90a") -> dict:
    """What Triton actually emits for a barrier layout: the init count, whether arrivals go
    remote, whether the init fence and cluster barrier are inserted."""
    ptx, init = _probe("barrier_probe", barrier_probe_kernel, bases, num_ctas, {"COUNT": count}, target)
    return {"init_count": init,
            "remote_arrive": "mbarrier.arrive.shared::cluster" in ptx,
            "init_fence": "fence.mbarrier_init.release.cluster" in ptx,
            "relaxed_cluster_barrier": "barrier.cluster.arrive.relaxed" in ptx}


@gluon.jit
def exchange_kernel(x_ptr, out_ptr, W: gl.constexpr, rows: gl.constexpr, everyone_rows: gl.constexpr,
                    smem_rows: gl.constexpr, group_all: gl.constexpr):
    """Every CTA publishes its row in its own shared memory; after a shared barrier every CTA
    reads all rows (its peers' through DSMEM) and writes out[c] = x[c] + sum of all rows."""
    C: gl.constexpr = gl.num_ctas()
    r = gl.arange(0, C, gl.SliceLayout(1, rows))[:, None]
    c = gl.arange(0, W, gl.SliceLayout(0, rows))[None, :]
    mine = gl.load(x_ptr + r * W + c)                 # CTA i holds row i (layout `rows`)

    pub = gl.allocate_shared_memory(gl.int32, [C, W], smem_rows)
    arrived = gl.allocate_shared_memory(gl.int64, [1], group_all)   # one barrier, in CTA 0
    go = mbarrier.allocate_mbarrier()                                # one per CTA
    mbarrier.init(arrived, count=1)
    mbarrier.init(go, count=1)
    sync_inits()                          # every init seen cluster-wide before any CTA arrives

    me = cluster_rank()
    pub.store(mine)
    gl.barrier()                          # every thread's part of my row is thread 0's to release ...
    release_arrive(arrived, 0)            # ... at cluster scope, on CTA 0's barrier
    acquire_wait(arrived, 0, me == 0)     # only CTA 0 waits: every row is published, and acquired
    release_arrive(go, 0, me == 0, C)     # CTA 0 passes them on: lane i arrives on CTA i's `go`
    acquire_wait(go, 0)                   # now every CTA has acquired every row
    everything = pub.load(everyone_rows)  # peers' rows arrive through ld.shared::cluster
    mbarrier.invalidate(arrived)          # retired: every arrival on them landed before my waits returned (and
    mbarrier.invalidate(go)               # the compiler, which cannot see inside inline asm, sees a use here)
    total = gl.convert_layout(gl.sum(everything, axis=0), gl.SliceLayout(0, rows))
    gl.store(out_ptr + r * W + c, mine + total[None, :])


@gluon.jit
def ping_pong_kernel(out_ptr, ROUNDS, ONE_PHASE: gl.constexpr, slot: gl.constexpr, everyone: gl.constexpr,
                     smem_slot: gl.constexpr, group_all: gl.constexpr, INSTRUMENT: gl.constexpr = False):
    """ROUNDS rounds: every CTA writes a round-dependent value into its slot; CTA 0 gathers the
    arrivals, then releases everybody; every CTA reads all slots and checks them. A CTA that
    reads a slot of the wrong round counts an error. ``ONE_PHASE`` reproduces the classic bug of
    never flipping the phase (the waits stop waiting after round 0)."""
    C: gl.constexpr = gl.num_ctas()
    ids = gl.arange(0, C, slot)                       # CTA i holds element i
    ids_all = gl.arange(0, C, everyone)               # every CTA holds all C
    box = gl.allocate_shared_memory(gl.int32, [C], smem_slot)
    arrived = gl.allocate_shared_memory(gl.int64, [1], group_all)
    go = mbarrier.allocate_mbarrier()
    freed = gl.allocate_shared_memory(gl.int64, [1], group_all)
    freed_go = mbarrier.allocate_mbarrier()
    mbarrier.init(arrived, count=1)
    mbarrier.init(go, count=1)
    mbarrier.init(freed, count=1)
    mbarrier.init(freed_go, count=1)
    sync_inits()                                      # once, before the loop: not at the first use inside it

    me = cluster_rank()
    errors = gl.zeros([C], gl.int32, slot)
    phase = 0
    for r in range(ROUNDS):
        with scope("write", INSTRUMENT):              # timeline scopes: no code unless proton records
            box.store(ids * 1000 + r)                 # my slot: CTA id * 1000 + round
        with scope("gather", INSTRUMENT):
            gl.barrier()
            release_arrive(arrived, 0)                # my slot, released at cluster scope to CTA 0
            acquire_wait(arrived, phase, me == 0)     # CTA 0: all slots written
            release_arrive(go, 0, me == 0, C)         # CTA 0 passes them on, one lane per CTA
            acquire_wait(go, phase)                   # everyone: safe to read
        with scope("read", INSTRUMENT):
            seen = box.load(everyone)
            errors += gl.sum((seen != ids_all * 1000 + r).to(gl.int32), axis=0) + ids * 0   # local sum
        with scope("free", INSTRUMENT):
            gl.barrier()                              # my reads are done before I release the slots
            release_arrive(freed, 0)
            acquire_wait(freed, phase, me == 0)
            release_arrive(freed_go, 0, me == 0, C)
            acquire_wait(freed_go, phase)             # nobody overwrites a slot another CTA still reads
        if not ONE_PHASE:
            phase ^= 1
    mbarrier.invalidate(arrived)                      # every arrival landed before the last waits returned
    mbarrier.invalidate(go)
    mbarrier.invalidate(freed)
    mbarrier.invalidate(freed_go)
    gl.store(out_ptr + ids, errors)


@gluon.jit
def pair_sum_kernel(x_ptr, out_ptr, slot: gl.constexpr, pairs: gl.constexpr, smem_slot: gl.constexpr,
                    pair_layout: gl.constexpr, PAIR_MASK: gl.constexpr):
    """8 CTAs, 4 shared barriers (layout [[0], [1], [2]]): CTAs 2k and 2k+1 share one, led by 2k.
    Each CTA publishes x[c]; the leader waits for both arrivals, then releases its pair with a
    broadcast arrival (from_cta keeps bits 1 and 2); both CTAs then add the pair's values.
    Values are viewed as [4, 2]: row k is pair k, CTA c holds element (c // 2, c % 2)."""
    k = gl.arange(0, 4, gl.SliceLayout(1, slot))[:, None]
    j = gl.arange(0, 2, gl.SliceLayout(0, slot))[None, :]
    mine = gl.load(x_ptr + 2 * k + j)
    box = gl.allocate_shared_memory(gl.int32, [4, 2], smem_slot)
    pair_bar = gl.allocate_shared_memory(gl.int64, [4], pair_layout)
    go = mbarrier.allocate_mbarrier()
    mbarrier.init(pair_bar, count=1)                  # count 1 x group of 2, on each leader
    mbarrier.init(go, count=1)
    sync_inits()
    lead = cluster_rank() & ~1                        # the pair's leader: CTA 2k
    box.store(mine)
    gl.barrier()
    release_arrive(pair_bar, lead)                    # both CTAs of a pair arrive on the leader's barrier
    acquire_wait(pair_bar, 0, cluster_rank() == lead) # only the leader waits, for both
    release_arrive(go, lead, cluster_rank() == lead, 2)   # the leader releases its pair: CTAs 2k and 2k+1
    acquire_wait(go, 0)
    both = box.load(pairs)                            # CTAs 2k and 2k+1 both hold row k
    mbarrier.invalidate(pair_bar)
    mbarrier.invalidate(go)
    s = gl.sum(both, axis=1)                          # local: the pair's row is whole in each CTA
    gl.store(out_ptr + gl.arange(0, 4, s.type.layout), s)


@gluon.jit
def count_in(seen_ptr, r, slot: gl.constexpr):
    """The cost kernel's check (nothing without ``seen_ptr``): every CTA counts itself into round ``r``."""
    if seen_ptr is not None:
        i = gl.arange(0, gl.num_ctas(), slot)                 # one element per CTA: no scalar, no broadcast
        gl.atomic_add(seen_ptr + r + i * 0, 1 + i * 0, sem="relaxed")


@gluon.jit
def count_seen(seen_ptr, r, ROUNDS, slot: gl.constexpr):
    """The cost kernel's check: how many CTAs had entered round ``r`` when each left it."""
    if seen_ptr is not None:
        i = gl.arange(0, gl.num_ctas(), slot)
        gl.store(seen_ptr + ROUNDS + r * gl.num_ctas() + i, gl.atomic_add(seen_ptr + r + i * 0, i * 0, sem="relaxed"))


@gluon.jit
def barrier_cost_kernel(out_ptr, ROUNDS, MODE: gl.constexpr, group_all: gl.constexpr, seen_ptr=None,
                        slot: gl.constexpr = None):
    """ROUNDS hand-offs of one kind, to time (see MODES): 0 an mbarrier inside one CTA; 1 a cross-CTA round as a
    user's arrive and wait compile (gather on CTA 0, broadcast release; CTA scope: it orders no data); 2 a
    cluster barrier; 3 a relaxed cluster barrier; 4 the round of MODE 1 as a data hand-off (release and acquire
    at cluster scope); 5 the round of MODE 1 with a fence.acq_rel.cluster around each arrive and wait.
    ``seen_ptr`` (a test's, never the benchmark's; ``slot``: cluster_layouts' slot): each CTA counts itself into
    round r before the hand-off and records the count after it, which a hand-off that holds makes num_ctas."""
    phase = 0
    if MODE == 0:
        own = mbarrier.allocate_mbarrier()
        mbarrier.init(own, count=1)
        for r in range(ROUNDS):
            mbarrier.arrive(own)
            mbarrier.wait(own, phase)
            phase ^= 1
    elif MODE == 2:
        for r in range(ROUNDS):
            count_in(seen_ptr, r, slot)
            hopper.cluster.barrier()
            count_seen(seen_ptr, r, ROUNDS, slot)
            phase ^= 1
    elif MODE == 3:
        for r in range(ROUNDS):
            count_in(seen_ptr, r, slot)
            hopper.cluster.barrier(relaxed=True)
            count_seen(seen_ptr, r, ROUNDS, slot)
            phase ^= 1
    else:
        arrived = gl.allocate_shared_memory(gl.int64, [1], group_all)
        go = mbarrier.allocate_mbarrier()
        mbarrier.init(arrived, count=1)
        mbarrier.init(go, count=1)
        sync_inits()
        me = cluster_rank()
        for r in range(ROUNDS):
            count_in(seen_ptr, r, slot)
            if MODE == 4:
                release_arrive(arrived, 0)
                acquire_wait(arrived, phase, me == 0)
                release_arrive(go, 0, me == 0, gl.num_ctas())
                acquire_wait(go, phase)
            else:
                if MODE == 5:
                    cluster_fence()
                mbarrier.arrive(arrived)
                mbarrier.wait(arrived, phase)
                if MODE == 5:
                    cluster_fence()
                mbarrier.arrive(go, from_cta=0)
                mbarrier.wait(go, phase)
                if MODE == 5:
                    cluster_fence()
            count_seen(seen_ptr, r, ROUNDS, slot)
            phase ^= 1
        mbarrier.invalidate(arrived)
        mbarrier.invalidate(go)
    gl.store(out_ptr + gl.program_id(0), phase)


def cluster_layouts(num_ctas: int, width: int = 1):
    """The layouts the kernels share: one row (or element) per CTA, or everything on every CTA."""
    validate.cluster_size(num_ctas)
    validate.count(width, "width", high=1 << 16)
    n = log2(num_ctas)
    if width == 1:
        return dict(slot=gl.BlockedLayout([1], [32], [1], [0], cga_layout=[[1 << i] for i in range(n)]),
                    everyone=gl.BlockedLayout([1], [32], [1], [0], cga_layout=[[0]] * n),
                    smem_slot=gl.SwizzledSharedLayout(1, 1, 1, [0], cga_layout=[[1 << i] for i in range(n)]),
                    group_all=mbarrier.MBarrierLayout([[0]] * n))
    return dict(rows=gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0], cga_layout=[[1 << i, 0] for i in range(n)]),
                everyone_rows=gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0], cga_layout=[[0, 0]] * n),
                smem_rows=gl.SwizzledSharedLayout(1, 1, 1, [1, 0], cga_layout=[[1 << i, 0] for i in range(n)]),
                group_all=mbarrier.MBarrierLayout([[0]] * n))


def cluster_exchange(x):
    """x: (C, W) int32 on the GPU, C a power of two in 2..16, W a power of two >= 32.
    Returns out with out[c] = x[c] + x.sum(0), computed by the C CTAs of one cluster."""
    import torch
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.int32:
        raise TypeError("x must be a 2-D int32 tensor (one row per CTA)")
    C, W = x.shape
    check_cluster_size(C, low=2, name="the number of rows (one per CTA)")
    if W < 32 or W & (W - 1) or W > 4096:
        raise ValueError(f"the row width must be a power of two from 32 to 4096, got {W}")
    require(CLUSTERS, "cluster_exchange")
    check_on_gpu(x, "x")
    x = x.contiguous()
    out = torch.empty_like(x)
    exchange_kernel[(1,)](x, out, W=W, **cluster_layouts(C, W), num_warps=4, num_ctas=C)
    return out


def ping_pong(num_ctas: int, rounds: int, one_phase: bool = False, instrument: bool = False):
    """Run ``rounds`` gather/release rounds on one cluster; return the per-CTA error counts."""
    import torch
    check_cluster_size(num_ctas, low=2)
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    require(CLUSTERS, "ping_pong")
    out = torch.full((num_ctas,), -1, device="cuda", dtype=torch.int32)
    ping_pong_kernel[(1,)](out, rounds, ONE_PHASE=one_phase, **cluster_layouts(num_ctas), INSTRUMENT=instrument,
                           num_warps=1, num_ctas=num_ctas)
    return out


PAIR_LAYOUT = [[0], [1], [2]]


def pair_sums(x):
    """x: 8 int32 values, one per CTA. Returns the 4 sums x[2k] + x[2k+1], each computed after the
    pair's shared barrier (layout [[0], [1], [2]]) has seen both arrivals."""
    import torch
    if not isinstance(x, torch.Tensor) or x.shape != (8,) or x.dtype != torch.int32:
        raise TypeError("x must be an int32 tensor of 8 values (one per CTA)")
    require(CLUSTERS, "pair_sums")
    check_on_gpu(x, "x")
    out = torch.full((4,), -1, device="cuda", dtype=torch.int32)
    pair_sum_kernel[(1,)](x.contiguous(), out, **_pair_layouts(), num_warps=1, num_ctas=8)
    return out


def _pair_layouts():
    per_cta = [[0, 1], [1, 0], [2, 0]]               # CTA c holds element (c // 2, c % 2)
    per_pair = [[0, 0], [1, 0], [2, 0]]              # both CTAs of pair k hold row k
    return dict(slot=gl.BlockedLayout([1, 1], [32, 1], [1, 1], [1, 0], cga_layout=per_cta),
                pairs=gl.BlockedLayout([1, 1], [32, 1], [1, 1], [1, 0], cga_layout=per_pair),
                smem_slot=gl.SwizzledSharedLayout(1, 1, 1, [1, 0], cga_layout=per_cta),
                pair_layout=mbarrier.MBarrierLayout(PAIR_LAYOUT), PAIR_MASK=0b110)


# ------------------------------------------------------------------------------------------ lens

def proof_spec(name, fn, constexprs, num_ctas, num_warps, runtime, expect):
    """The lens spec of one of this chapter's kernels: runtime arguments, then the constexprs."""
    sig = {**runtime, **{k: "constexpr" for k in constexprs}}
    return lens.KernelSpec(name=name, fn=fn, signature=sig, constexprs=constexprs,
                           options={"num_warps": num_warps, "num_ctas": num_ctas}, expect=expect)


_REMOTE = ("mbarrier.arrive.release.cluster.shared::cluster", "mbarrier.try_wait.parity.acquire.cluster",
           "fence.mbarrier_init.release.cluster", "barrier.cluster.arrive.relaxed", "barrier.cluster.wait",
           ".reqnctapercluster")


def exchange_spec(num_ctas: int = 4, W: int = 128):
    validate.cluster_size(num_ctas)
    validate.count(W, "W", high=1 << 16)
    return proof_spec("cluster_exchange", exchange_kernel, {"W": W, **cluster_layouts(num_ctas, W)}, num_ctas, 4,
                 {"x_ptr": "*i32", "out_ptr": "*i32"}, _REMOTE + ("mapa", "ld.shared::cluster"))


def ping_pong_spec(num_ctas: int = 4):
    validate.cluster_size(num_ctas)
    return proof_spec("ping_pong", ping_pong_kernel, {"ONE_PHASE": False, **cluster_layouts(num_ctas), "INSTRUMENT": False},
                      num_ctas, 1, {"out_ptr": "*i32", "ROUNDS": "i32"}, _REMOTE + ("ld.shared::cluster",))


def pair_sum_spec():
    return proof_spec("pair_sum", pair_sum_kernel, _pair_layouts(), 8, 1, {"x_ptr": "*i32", "out_ptr": "*i32"}, _REMOTE)


def barrier_cost_spec(num_ctas: int = 4, mode: int = 1):
    validate.one_of(mode, "mode", (0, 1, 2, 3, 4, 5))
    validate.cluster_size(num_ctas)
    expect = {0: ("mbarrier.arrive.shared::cta", "mbarrier.try_wait.parity.shared::cta"),
              1: ("mbarrier.arrive.shared::cluster", "mbarrier.try_wait.parity"),
              2: ("barrier.cluster.arrive.aligned", "barrier.cluster.wait.aligned"),
              3: ("barrier.cluster.arrive.relaxed", "barrier.cluster.wait.aligned"),
              4: ("mbarrier.arrive.release.cluster.shared::cluster", "mbarrier.try_wait.parity.acquire.cluster"),
              5: ("mbarrier.arrive.shared::cluster", "fence.acq_rel.cluster")}[mode]
    return proof_spec("barrier_cost", barrier_cost_kernel, {"MODE": mode, "group_all": cluster_layouts(num_ctas)["group_all"],
                                                           "seen_ptr": None, "slot": None},
                 num_ctas, 1, {"out_ptr": "*i32", "ROUNDS": "i32"}, expect)


# ------------------------------------------------------------------------------------- benchmark

MODES = {0: "mbarrier inside one CTA", 1: "cross-CTA round, CTA scope (orders no data)", 2: "cluster barrier",
         3: "relaxed cluster barrier", 4: "cross-CTA round, release/acquire at cluster scope (a data hand-off)",
         5: "cross-CTA round with fence.acq_rel.cluster (the previous recipe)"}


# ------------------------------------------------------------- barriers and warp specialization

@gluon.jit
def _init_in_partition(bar):
    mbarrier.init(bar, count=1)          # not allowed: inits belong before warp_specialize
    mbarrier.arrive(bar)


@gluon.jit
def _wait_partition(bar):
    mbarrier.wait(bar, 0)


@gluon.jit
def init_inside_partition_kernel(group_all: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], group_all)
    gl.warp_specialize([(_wait_partition, (bar,)), (_init_in_partition, (bar,))], [1], [24])


@gluon.jit
def _cluster_barrier_partition(bar):
    hopper.cluster.barrier()             # every CTA of the cluster, this partition's warps only
    mbarrier.arrive(bar)


@gluon.jit
def _report_partition(bar, out_ptr, slot: gl.constexpr):
    mbarrier.wait(bar, 0)                # the worker passed the cluster barrier
    ids = gl.arange(0, gl.num_ctas(), slot)
    gl.store(out_ptr + ids, ids * 0 + 1)  # CTA i writes out[i]


@gluon.jit
def cluster_barrier_in_partition_kernel(out_ptr, slot: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)          # at the top level: the compiler fences it for the cluster
    gl.warp_specialize([(_report_partition, (bar, out_ptr, slot)), (_cluster_barrier_partition, (bar,))],
                       [1], [24])


def warp_specialize_spec(kind: str, num_ctas: int = 2) -> lens.KernelSpec:
    """``kind``: "init_inside" (rejected by the compiler) or "cluster_barrier_inside" (compiles)."""
    validate.one_of(kind, "kind", ("init_inside", "cluster_barrier_inside"))
    validate.cluster_size(num_ctas)
    fn = {"init_inside": init_inside_partition_kernel,
          "cluster_barrier_inside": cluster_barrier_in_partition_kernel}[kind]
    if kind == "init_inside":
        return lens.KernelSpec(f"warp_specialize_{kind}", fn, {"group_all": "constexpr"},
                               {"group_all": cluster_layouts(num_ctas)["group_all"]}, {"num_warps": 4, "num_ctas": num_ctas})
    return lens.KernelSpec(f"warp_specialize_{kind}", fn, {"out_ptr": "*i32", "slot": "constexpr"},
                           {"slot": _slot4(num_ctas)}, {"num_warps": 4, "num_ctas": num_ctas})


def _slot4(num_ctas):
    # CTA i holds element i, for the 4 warps of the default partition
    return gl.BlockedLayout([1], [32], [4], [0], cga_layout=[[1 << i] for i in range(log2(num_ctas))])


def cluster_barrier_in_partition(num_ctas: int = 2):
    """Launch the kernel whose worker partition calls ``hopper.cluster.barrier()``; each CTA's default
    partition writes 1 into out[cta] once its worker has passed the barrier (3.9 lowers a cluster
    barrier inside a partition to a cross-CTA mbarrier hand-shake). Returns ``out`` (not synchronised:
    wrap the call in ``notebook.run_live`` or synchronise before reading)."""
    import torch
    check_cluster_size(num_ctas, low=2)
    require(CLUSTERS, "cluster_barrier_in_partition")
    out = torch.zeros(num_ctas, device="cuda", dtype=torch.int32)
    cluster_barrier_in_partition_kernel[(1,)](out, slot=_slot4(num_ctas), num_warps=4, num_ctas=num_ctas)
    return out
