"""Chapter 2: multi-CTA mbarriers, as a model you can step through and as kernels that prove it.

An mbarrier's ``cga_layout`` maps CTA-id bits to barriers. Identity bases (``[[1], [2], [4]]``,
what ``mbarrier.allocate_mbarrier()`` builds) give every CTA its own barrier. A zero basis merges
the CTAs that differ in that bit into one *group* sharing one barrier, which lives in the group's
lowest CTA id, the *leader*. Triton 3.9 then applies four rules:

1. ``init(count)`` runs on the leader only, with ``count * group_size``;
2. ``expect(bytes)``, in every CTA of the group, is one arrival on the leader's barrier carrying that
   CTA's own bytes (``mbarrier.arrive.expect_tx.shared::cluster``): the barrier expects the group's
   bytes in all, bytes x group size per phase;
3. every ``arrive`` of any CTA in the group lands on the leader's barrier;
4. only the leader ``wait``s.

``arrive(bar, from_cta=mask)`` on per-CTA barriers is different: a *leader broadcast*. ``mask``
names the CTA-id bits that are kept; only CTAs whose other bits are zero send, and each sender's
single arrival reaches every CTA that shares its kept bits.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import multicta_kernels  # noqa: F401
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from . import lens
from .timeline import scope
from .hardware import CLUSTERS, check_cluster_size, check_on_gpu, log2, require

# --------------------------------------------------------------------------------------- the model


def check_barrier_layout(bases, num_ctas: int, two_ctas: bool = False) -> list:
    """Validate an mbarrier ``cga_layout``; return it as a list of one-element lists.

    It has log2(num_ctas) bases; the non-zero ones are 1, 2, 4, ... in order (so barriers are
    numbered densely), zeros may sit anywhere. ``two_ctas`` needs basis 0 to be zero (CTA pairs).
    """
    check_cluster_size(num_ctas)
    bases = [list(b) if isinstance(b, (list, tuple)) else [b] for b in bases]
    need = log2(num_ctas)
    if len(bases) != need:
        raise ValueError(f"a barrier layout for {num_ctas} CTAs has exactly {need} bases, got {len(bases)}: {bases}")
    nxt = 1
    for i, b in enumerate(bases):
        if len(b) != 1:
            raise ValueError(f"basis {i} {b}: barrier arrays are 1-D, each basis has one entry")
        if b[0] == 0:
            continue
        if b[0] != nxt:
            raise ValueError(f"basis {i} {b}: non-zero bases must be 1, 2, 4, ... in order; expected [{nxt}]")
        nxt *= 2
    if two_ctas and (not bases or bases[0] != [0]):
        raise ValueError("two_ctas barriers pair CTAs 2k and 2k+1: basis 0 must be [0]")
    return bases


@dataclass(frozen=True)
class BarrierLayoutModel:
    """Groups and leaders of a multi-CTA mbarrier layout."""
    bases: tuple
    num_ctas: int

    @classmethod
    def of(cls, bases, num_ctas):
        return cls(tuple(tuple(b) for b in check_barrier_layout(bases, num_ctas)), num_ctas)

    @property
    def num_barriers(self) -> int:
        return 1 << sum(1 for b in self.bases if b[0])

    def barrier_of(self, cta: int) -> int:
        """Which barrier CTA ``cta`` uses: XOR of the bases its id bits select."""
        idx = 0
        for bit, b in enumerate(self.bases):
            if cta >> bit & 1:
                idx ^= b[0]
        return idx

    @property
    def group_size(self) -> int:
        return self.num_ctas // self.num_barriers

    def groups(self) -> list[list[int]]:
        out = [[] for _ in range(self.num_barriers)]
        for c in range(self.num_ctas):
            out[self.barrier_of(c)].append(c)
        return out

    def leader(self, cta: int) -> int:
        """The lowest CTA id of ``cta``'s group: where the shared barrier lives."""
        mask = sum(1 << bit for bit, b in enumerate(self.bases) if b[0] == 0)
        return cta & ~mask

    def init_count(self, count: int) -> int:
        return count * self.group_size

    def expect_bytes(self, bytes_per_cta: int) -> int:
        """Bytes the shared barrier waits for per phase: every CTA of the group expects its own."""
        return bytes_per_cta * self.group_size


def broadcast_targets(from_cta: int, num_ctas: int) -> dict[int, list[int]]:
    """``arrive(bar, from_cta=mask)`` on per-CTA barriers: sender -> the CTAs its arrival reaches."""
    if not 0 <= from_cta < num_ctas:
        raise ValueError(f"from_cta is a mask of CTA-id bits in [0, {num_ctas - 1}], got {from_cta}")
    dropped = (num_ctas - 1) & ~from_cta
    senders = [c for c in range(num_ctas) if c & dropped == 0]
    return {s: [c for c in range(num_ctas) if c & from_cta == s & from_cta] for s in senders}


@dataclass
class _Barrier:
    pending: int          # arrivals still missing in the current phase
    count: int            # arrivals per phase
    tx: int = 0           # bytes still expected in the current phase
    phase: int = 0        # number of completed phases


@dataclass
class BarrierSim:
    """Step through multi-CTA mbarrier operations; every step is recorded in ``trace``."""
    model: BarrierLayoutModel
    barriers: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)

    def _log(self, cta, op, detail):
        self.trace.append((len(self.trace), cta, op, detail))

    def init(self, count: int):
        for g in self.model.groups():
            leader = g[0]
            n = self.model.init_count(count)
            self.barriers[leader] = _Barrier(n, n)
            self._log(leader, "init", f"count {count} x group {len(g)} = {n} on leader CTA {leader}")

    def _land(self, leader, arrivals=1, tx=0):
        b = self.barriers[leader]
        b.pending -= arrivals
        b.tx += tx
        if b.pending < 0:
            raise RuntimeError(f"barrier of CTA {leader} got more arrivals than its count {b.count}")
        if b.pending == 0 and b.tx == 0:
            b.phase += 1
            b.pending = b.count
            self._log(leader, "complete", f"phase {b.phase - 1} completes, parity is now {b.phase & 1}")

    def arrive(self, cta: int):
        leader = self.model.leader(cta)
        self._log(cta, "arrive", f"lands on leader CTA {leader}" + (" (remote)" if leader != cta else ""))
        self._land(leader)

    def expect(self, cta: int, bytes_per_cta: int):
        leader = self.model.leader(cta)
        where = "its own barrier" if leader == cta else f"leader CTA {leader}'s barrier (remote)"
        self._log(cta, "expect", f"one arrival on {where}, expecting {bytes_per_cta} B more")
        self._land(leader, 1, bytes_per_cta)

    def bytes_arrive(self, cta: int, nbytes: int):
        leader = self.model.leader(cta)
        b = self.barriers[leader]
        b.tx -= nbytes
        self._log(cta, "bytes", f"{nbytes} B land on leader CTA {leader}'s transaction count")
        if b.tx < 0:
            raise RuntimeError(f"CTA {leader}'s barrier received more bytes than expected")
        self._land(leader, 0)

    def wait(self, cta: int, phase: int) -> bool:
        """True if the wait would return now (the barrier's ``phase`` parity has completed)."""
        leader = self.model.leader(cta)
        if cta != leader:
            self._log(cta, "wait", f"not the leader: Triton emits no wait here (leader is CTA {leader})")
            return True
        done = (self.barriers[leader].phase & 1) != phase
        self._log(cta, "wait", f"parity {phase}: " + ("returns" if done else "blocks"))
        return done


def trace_table(sim: BarrierSim):
    return [[i, cta, op, detail] for i, cta, op, detail in sim.trace]


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


# ------------------------------------------------------------------------------------ the kernels

@gluon.jit
def cluster_fence():
    """``fence.acq_rel.cluster``. A user's ``mbarrier.arrive`` is a release, and its ``wait`` an acquire,
    at CTA scope only (PTX's default). Between CTAs, data written before the arrive is formally visible
    to a peer after its wait only at cluster scope. Byte-counted hand-offs (TMA, tcgen05 commits, CLC
    answers) need no fence: their completion carries the data."""
    gl.inline_asm_elementwise("fence.acq_rel.cluster;\nmov.u32 $0, 0;", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def publish():
    """Before an arrive that hands this CTA's shared-memory writes (or the end of its reads) to peers:
    every thread is done (a CTA barrier: the arrive is issued by one thread), then a cluster-scope fence,
    so the arrive releases all of it at cluster scope."""
    gl.barrier()
    cluster_fence()


@gluon.jit
def acquire():
    """After a wait that hands peers' writes to this CTA: a cluster-scope fence before reading them."""
    cluster_fence()


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

    pub.store(mine)
    publish()                             # my row is released at cluster scope ...
    mbarrier.arrive(arrived)              # ... by my arrival, which lands on CTA 0
    mbarrier.wait(arrived, 0)             # only CTA 0 waits: all rows are published
    acquire()                             # CTA 0 acquires them, and passes them on:
    mbarrier.arrive(go, from_cta=0)       # CTA 0's one arrival reaches every CTA's `go`
    mbarrier.wait(go, 0)
    acquire()                             # now every CTA may read every row
    everything = pub.load(everyone_rows)  # peers' rows arrive through ld.shared::cluster
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

    errors = gl.zeros([C], gl.int32, slot)
    phase = 0
    for r in range(ROUNDS):
        with scope("write", INSTRUMENT):              # timeline scopes: no code unless proton records
            box.store(ids * 1000 + r)                 # my slot: CTA id * 1000 + round
        with scope("gather", INSTRUMENT):
            publish()
            mbarrier.arrive(arrived)
            mbarrier.wait(arrived, phase)             # CTA 0: all slots written
            acquire()
            mbarrier.arrive(go, from_cta=0)
            mbarrier.wait(go, phase)                  # everyone: safe to read
            acquire()
        with scope("read", INSTRUMENT):
            seen = box.load(everyone)
            errors += gl.sum((seen != ids_all * 1000 + r).to(gl.int32), axis=0) + ids * 0   # local sum
        with scope("free", INSTRUMENT):
            publish()                                 # my reads are done before I release the slots
            mbarrier.arrive(freed)
            mbarrier.wait(freed, phase)
            acquire()
            mbarrier.arrive(freed_go, from_cta=0)
            mbarrier.wait(freed_go, phase)            # nobody overwrites a slot another CTA still reads
            acquire()
        if not ONE_PHASE:
            phase ^= 1
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
    box.store(mine)
    publish()
    mbarrier.arrive(pair_bar)                         # both CTAs of a pair arrive on the leader
    mbarrier.wait(pair_bar, 0)                        # only the leader waits, for both
    acquire()
    mbarrier.arrive(go, from_cta=PAIR_MASK)           # the leader releases its pair
    mbarrier.wait(go, 0)
    acquire()
    both = box.load(pairs)                            # CTAs 2k and 2k+1 both hold row k
    s = gl.sum(both, axis=1)                          # local: the pair's row is whole in each CTA
    gl.store(out_ptr + gl.arange(0, 4, s.type.layout), s)


@gluon.jit
def barrier_cost_kernel(out_ptr, ROUNDS, MODE: gl.constexpr, group_all: gl.constexpr):
    """ROUNDS hand-offs of one kind, to time: MODE 0 an mbarrier inside one CTA, MODE 1 a
    cross-CTA round (gather on CTA 0, broadcast release), MODE 2 a full cluster barrier, MODE 3 the
    round of MODE 1 with the cluster-scope fences a data hand-off needs."""
    phase = 0
    if MODE == 0:
        own = mbarrier.allocate_mbarrier()
        mbarrier.init(own, count=1)
        for r in range(ROUNDS):
            mbarrier.arrive(own)
            mbarrier.wait(own, phase)
            phase ^= 1
    elif MODE == 1:
        arrived = gl.allocate_shared_memory(gl.int64, [1], group_all)
        go = mbarrier.allocate_mbarrier()
        mbarrier.init(arrived, count=1)
        mbarrier.init(go, count=1)
        for r in range(ROUNDS):
            mbarrier.arrive(arrived)
            mbarrier.wait(arrived, phase)
            mbarrier.arrive(go, from_cta=0)
            mbarrier.wait(go, phase)
            phase ^= 1
    elif MODE == 2:
        for r in range(ROUNDS):
            hopper.cluster.barrier()
            phase ^= 1
    else:
        arrived = gl.allocate_shared_memory(gl.int64, [1], group_all)
        go = mbarrier.allocate_mbarrier()
        mbarrier.init(arrived, count=1)
        mbarrier.init(go, count=1)
        for r in range(ROUNDS):
            publish()
            mbarrier.arrive(arrived)
            mbarrier.wait(arrived, phase)
            acquire()
            mbarrier.arrive(go, from_cta=0)
            mbarrier.wait(go, phase)
            acquire()
            phase ^= 1
    gl.store(out_ptr + gl.program_id(0), phase)


# --------------------------------------------------------------------------------- host wrappers

def _layouts(num_ctas: int, width: int = 1):
    """The layouts the kernels share: one row (or element) per CTA, or everything on every CTA."""
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
    exchange_kernel[(1,)](x, out, W=W, **_layouts(C, W), num_warps=4, num_ctas=C)
    return out


def ping_pong(num_ctas: int, rounds: int, one_phase: bool = False, instrument: bool = False):
    """Run ``rounds`` gather/release rounds on one cluster; return the per-CTA error counts."""
    import torch
    check_cluster_size(num_ctas, low=2)
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    require(CLUSTERS, "ping_pong")
    out = torch.full((num_ctas,), -1, device="cuda", dtype=torch.int32)
    ping_pong_kernel[(1,)](out, rounds, ONE_PHASE=one_phase, **_layouts(num_ctas), INSTRUMENT=instrument,
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


_REMOTE = ("mbarrier.arrive.shared::cluster", "fence.mbarrier_init.release.cluster",
           "barrier.cluster.arrive.relaxed", "barrier.cluster.wait", ".reqnctapercluster")


def exchange_spec(num_ctas: int = 4, W: int = 128):
    return proof_spec("cluster_exchange", exchange_kernel, {"W": W, **_layouts(num_ctas, W)}, num_ctas, 4,
                 {"x_ptr": "*i32", "out_ptr": "*i32"}, _REMOTE + ("mapa", "ld.shared::cluster"))


def ping_pong_spec(num_ctas: int = 4):
    return proof_spec("ping_pong", ping_pong_kernel, {"ONE_PHASE": False, **_layouts(num_ctas), "INSTRUMENT": False},
                      num_ctas, 1,
                 {"out_ptr": "*i32", "ROUNDS": "i32"}, _REMOTE + ("ld.shared::cluster", "mbarrier.try_wait.parity"))


def pair_sum_spec():
    return proof_spec("pair_sum", pair_sum_kernel, _pair_layouts(), 8, 1, {"x_ptr": "*i32", "out_ptr": "*i32"}, _REMOTE)


def barrier_cost_spec(num_ctas: int = 4, mode: int = 1):
    expect = {0: ("mbarrier.arrive.shared::cta", "mbarrier.try_wait.parity.shared::cta"),
              1: ("mbarrier.arrive.shared::cluster", "mbarrier.try_wait.parity"),
              2: ("barrier.cluster.arrive.aligned", "barrier.cluster.wait.aligned"),
              3: ("mbarrier.arrive.shared::cluster", "fence.acq_rel.cluster")}[mode]
    return proof_spec("barrier_cost", barrier_cost_kernel, {"MODE": mode, "group_all": _layouts(num_ctas)["group_all"]},
                 num_ctas, 1, {"out_ptr": "*i32", "ROUNDS": "i32"}, expect)


# ------------------------------------------------------------------------------------- benchmark

MODES = {0: "mbarrier inside one CTA", 1: "cross-CTA round (gather + broadcast)", 2: "cluster barrier",
         3: "cross-CTA round with cluster fences (a data hand-off)"}


def benchmark(quick: bool = False, log=print) -> dict:
    """Cost per round of each hand-off, for clusters of 2 to 16 CTAs: the slope of kernel time
    between two round counts, so launch overhead cancels."""
    import torch
    from . import bench
    require(CLUSTERS, "the barriers benchmark")
    lo, hi = (100, 1100) if quick else (200, 5200)
    rows = []
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    for num_ctas in (2, 4, 8, 16):
        group_all = _layouts(num_ctas)["group_all"]
        for mode, what in MODES.items():
            def run(n):
                return bench.time_ms(lambda: barrier_cost_kernel[(1,)](out, n, MODE=mode, group_all=group_all,
                                                                      num_warps=1, num_ctas=num_ctas),
                                     cudagraph=False)
            t_lo, t_hi = run(lo), run(hi)
            ns = (t_hi - t_lo) * 1e6 / (hi - lo)
            rows.append([num_ctas, mode, what, round(ns, 1), round(t_lo * 1e3, 2), round(t_hi * 1e3, 2)])
            log(f"[barriers] {num_ctas:>2} CTAs, {what}: {ns:.0f} ns per round")
    errors = [[c, ping_pong(c, 1000).sum().item()] for c in (2, 4, 8, 16)]
    log(f"[barriers] ping-pong errors over 1000 rounds: {errors}")
    return {"method": {"timer": "do_bench", "statistic": "median",
                       "cost": f"(t({hi} rounds) - t({lo} rounds)) / {hi - lo}, one cluster, 1 warp per CTA"},
            "ceilings": {},
            "columns": ["num_ctas", "mode", "what", "ns_per_round", "us_low_rounds", "us_high_rounds"],
            "rows": rows, "checks": {"ping_pong_errors_1000_rounds": errors}}


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
    fn = {"init_inside": init_inside_partition_kernel,
          "cluster_barrier_inside": cluster_barrier_in_partition_kernel}[kind]
    if kind == "init_inside":
        return lens.KernelSpec(f"warp_specialize_{kind}", fn, {"group_all": "constexpr"},
                               {"group_all": _layouts(num_ctas)["group_all"]}, {"num_warps": 4, "num_ctas": num_ctas})
    return lens.KernelSpec(f"warp_specialize_{kind}", fn, {"out_ptr": "*i32", "slot": "constexpr"},
                           {"slot": _slot4(num_ctas)}, {"num_warps": 4, "num_ctas": num_ctas})


def _slot4(num_ctas):
    # CTA i holds element i, for the 4 warps of the default partition
    return gl.BlockedLayout([1], [32], [4], [0], cga_layout=[[1 << i] for i in range(log2(num_ctas))])


def draw_groups(model: BarrierLayoutModel, ax=None, title: str | None = None):
    """CTAs as boxes coloured by the barrier they share; the leader of each group is starred."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    from .layouts import PALETTE
    ax = ax or plt.subplots(figsize=(0.8 * model.num_ctas + 1, 1.6))[1]
    for c in range(model.num_ctas):
        b = model.barrier_of(c)
        ax.add_patch(FancyBboxPatch((c + 0.08, 0.1), 0.84, 0.8, boxstyle="round,pad=0.02",
                                    facecolor=PALETTE[b % len(PALETTE)], edgecolor="black", lw=0.6))
        leader = model.leader(c) == c
        ax.text(c + 0.5, 0.62, f"CTA {c}", ha="center", va="center", fontsize=8, weight="bold" if leader else None)
        ax.text(c + 0.5, 0.32, ("* " if leader else "") + f"bar {b}", ha="center", va="center", fontsize=7)
    ax.set_xlim(0, model.num_ctas)
    ax.set_ylim(0, 1)
    ax.axis("off")
    bases = [list(b) for b in model.bases]
    ax.set_title(title or f"cga_layout={bases}: {model.num_barriers} barrier(s), groups of "
                          f"{model.group_size} (* = leader)", fontsize=9)
    return ax


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
