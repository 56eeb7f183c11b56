"""Check every kernel's mbarrier protocol on the CPU: every interleaving, a trace for every failure.

A GPU shows a wrong barrier count or phase only as a hang, or as tiles silently corrupted. This
module writes down, for each kernel of the book, what every partition of every CTA does to its
barriers and buffers, and explores the ways the hardware may interleave those steps. The answer is
"no deadlock, no phase overrun, no overwrite before release, in every interleaving", or one of the
shortest schedules that breaks it, as a trace in the style of chapter 2's ``barriers.trace_table``::

    from multicta_kernels import protocols
    r = protocols.check(protocols.ping_pong(num_ctas=2, one_phase=True))
    print(r)             # phase overrun after 20 steps: CTA 0 main's wait ...
    print(r.table())     # step, CTA, partition, op, detail

**The language.** A :class:`Protocol` declares barriers with their ``cga_layout`` (chapter 2's
rules: count x group size on the leader, every arrival lands on the leader, only the leader waits)
and one program per (CTA, partition), built with :class:`Thread`: ``arrive`` (also the ``from_cta``
broadcast), ``expect``, ``wait``, ``read`` / ``write`` of a buffer slot tagged with the version it
must hold, ``tma_load`` (its bytes land later, in every receiver of a multicast), ``mma`` (reads its
operands until its ``tcgen05_commit`` arrives, multicast to every CTA that fed it), ``try_cancel``
(a 16-byte CLC answer landing in every CTA), ``tma_store`` / ``store_wait(n)``, ``wgmma`` /
``wgmma_wait(n)`` and ``cluster_barrier``. Loops are unrolled while building, with the kernel's
own index and phase arithmetic. Every wait and every arrival names the phase it is *meant* for.

**The semantics** are PTX's: a wait on parity ``p`` returns iff the barrier's count of completed
phases has the other parity, so a wait can only tell two consecutive phases apart. The checker
reports a **phase overrun** when a wait returns on an older phase, when a barrier runs past a phase
a waiter still expects, or when an arrival lands in a phase it was not meant for; an **overwrite
before release** when a write (a TMA, an MMA, a store into a staging buffer) starts while a reader
of the previous version has not released it; a **read before write** when a read finds an older
version; and a **deadlock** when every unfinished thread is blocked.

**The explorer** is a breadth-first search over states (program counters; each barrier's pending
arrivals, pending bytes and completed phases; each buffer's version; the asynchronous operations in
flight) with a visited set, so the first failure found is one of the shortest. Partial-order
reduction (stubborn sets: steps on different barriers, phases or buffer versions are explored in one
order only) keeps most protocols to thousands of states; :func:`simulate` runs random schedules
where even that is too big. :func:`compare` ties each model to its kernel: the code sites of every
barrier operation, and every init count, equal what the compiled PTX contains.

What the model leaves out: a multicast TMA or commit lands in all its receivers at once (a landing
that comes later in one receiver looks, there, like that CTA running late, which is explored);
a thread's MMAs complete in issue order, and so do its TMA stores (what ``tcgen05_commit`` and
``store_wait`` rely on); memory ordering is not modelled (a wait that returns makes visible what its
arrivals published: the kernels add the cluster-scope fences 3.9 needs for that).
"""
from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

# The kernels these protocols model: every count, mask, layout and slot number comes from here.
# (Imports kept in one place: the modules may move.)
from triton.experimental.gluon.language.nvidia.blackwell import tcgen05_mma_barrier_count
from triton.experimental.gluon.language.nvidia.hopper.mbarrier import MBarrierLayout

from . import barriers as ch2
from . import catalog, lens
from . import clc_matmul as ch5
from . import cluster
from . import hopper_matmul as ch6
from . import multicast as ch3
from . import two_cta as ch4
from .hardware import check_cluster_size, log2

HEADER = ("step", "CTA", "partition", "op", "detail")


# ============================================================================== the language


@dataclass(frozen=True)
class Barrier:
    """An array of ``slots`` mbarriers sharing one ``cga_layout`` (chapter 2's BarrierLayoutModel)."""
    name: str
    slots: int
    count: int
    layout: ch2.BarrierLayoutModel

    def __getitem__(self, slot):
        if not 0 <= slot < self.slots:
            raise IndexError(f"{self.name} has {self.slots} slots, not {slot}")
        return (self, slot)


def _ref(bar):
    """``bar[slot]`` is (Barrier, slot); a bare Barrier means slot 0."""
    return bar if isinstance(bar, tuple) else bar[0]


def _label(ref):
    bar, slot = ref
    return f"{bar.name}[{slot}]" if bar.slots > 1 else bar.name


@dataclass
class Op:
    """One step of one thread; which fields matter depends on ``kind``."""
    kind: str
    site: str                       # the code site, for the PTX census
    bar: tuple = None               # (Barrier, slot)
    phase: int | None = None        # wait: the phase it waits for; arrive/expect: the phase it arrives in
    parity: int = 0                 # wait: what the code passes
    nbytes: int = 0
    targets: tuple = ()             # CTAs whose barrier an arrival reaches (wait: the leader)
    reads: tuple = ()               # (cta, buffer, slot, version)
    writes: tuple = ()              # writes begun here (checked against readers of the previous version)
    completes: tuple = ()           # writes that end here (or when the asynchronous part lands)
    lands: tuple = ()               # (barrier ref, CTA, arrivals, bytes, phase) when the asynchronous part lands
    frees: tuple = ()               # buffers (name, or (name, slot)) whose reads this thread releases here
    asynchronous: str = ""          # "tma", "mma", "store", "clc": something lands later
    n: int = 0                      # store_wait / wgmma_wait: how many may stay in flight
    name: str = ""                  # cluster barrier
    census: int = 1                 # code sites this op stands for (a load of A and B is two async_loads)
    note: str = ""


class Thread:
    """The program of one partition of one CTA, built op by op (the caller unrolls the loops)."""

    def __init__(self, protocol: "Protocol", cta: int, partition: str):
        self.p, self.cta, self.partition = protocol, cta, partition
        self.ops: list[Op] = []
        self._wgmma: list[tuple] = []

    def _add(self, kind, what, site, **kw):
        self.ops.append(Op(kind, f"{self.partition}.{site or f'{kind} {what}'}", **kw))
        return self.ops[-1]

    # ------------------------------------------------------------------ barriers
    def arrive(self, bar, phase=None, from_cta=None, frees=(), site=None):
        """``mbarrier.arrive``: one arrival, in phase ``phase``, on the barrier's leader. With
        ``from_cta`` a leader broadcast: only senders arrive, once on every CTA they reach."""
        ref = _ref(bar)
        if from_cta is None:
            targets, note = (ref[0].layout.leader(self.cta),), ""
        else:
            if ref[0].layout.group_size != 1:
                raise ValueError("from_cta broadcasts arrive on per-CTA barriers")
            targets, note = tuple(ch2.broadcast_targets(from_cta, self.p.num_ctas).get(self.cta, ())), \
                f"from_cta={from_cta}"
        return self._add("arrive", ref[0].name, site, bar=ref, phase=phase, targets=targets, frees=tuple(frees),
                         note=note)

    def expect(self, bar, nbytes, phase=None, site=None):
        """``mbarrier.expect``: one arrival plus ``nbytes`` expected, on the leader (in PTX each CTA
        of a two_ctas pair arrive.expect_tx's its own bytes on the leader's barrier)."""
        ref = _ref(bar)
        return self._add("expect", ref[0].name, site, bar=ref, phase=phase, nbytes=nbytes,
                         targets=(ref[0].layout.leader(self.cta),))

    def wait(self, bar, phase, parity=None, site=None):
        """``mbarrier.wait(bar, parity)``, meaning "phase ``phase`` has completed" (phase -1: a fresh
        barrier, which passes). ``parity`` defaults to ``phase & 1``; pass the kernel's own expression.
        On a shared barrier only the leader waits (Triton emits no wait elsewhere)."""
        ref = _ref(bar)
        return self._add("wait", ref[0].name, site, bar=ref, phase=phase,
                         parity=phase & 1 if parity is None else parity, targets=(ref[0].layout.leader(self.cta),))

    def cluster_barrier(self, name="cluster", frees=(), site=None):
        """``hopper.cluster.barrier()`` among every thread that calls it with this ``name``: an
        arrival (releasing ``frees``), then a wait for everyone's arrival."""
        self._add("cluster_arrive", name, site and f"{site} arrive", name=name, frees=tuple(frees))
        return self._add("cluster_wait", name, site and f"{site} wait", name=name)

    # ------------------------------------------------------------------- buffers
    def read(self, buf, slot, version, at=None, site=None):
        """Read ``buf[slot]`` of CTA ``at`` (default: this one; a list for several), expecting its
        ``version``-th write. The slot stays held until an op of this thread ``frees`` it (if none
        does, the read itself is the release)."""
        at = (self.cta,) if at is None else (at,) if isinstance(at, int) else tuple(at)
        return self._add("read", buf, site, reads=tuple((c, buf, slot, version) for c in at))

    def write(self, buf, slot, version, site=None):
        """A write of ``buf[slot]`` in this CTA by its threads (registers to shared memory)."""
        w = ((self.cta, buf, slot, version),)
        return self._add("write", buf, site, writes=w, completes=w)

    def wgmma(self, reads, site=None):
        """``warpgroup_mma(is_async=True)`` reading [(buf, slot, version)] of this CTA until a later
        ``wgmma_wait`` retires it."""
        self._wgmma.append(tuple((b, s) for b, s, _ in reads))
        return self._add("wgmma", "", site, reads=tuple((self.cta, b, s, v) for b, s, v in reads))

    def wgmma_wait(self, n, site=None):
        """``warpgroup_mma_wait(n)``: all but the ``n`` newest wgmmas are done reading."""
        done, self._wgmma = self._wgmma[:len(self._wgmma) - n], self._wgmma[len(self._wgmma) - n:]
        return self._add("wgmma_wait", n, site, n=n, frees=tuple(x for group in done for x in group))

    # --------------------------------------------------------- asynchronous units
    def tma_load(self, bar, parts, phase=None, multicast=True, site=None):
        """``tma.async_load`` of each part (buf, slot, version, cga bases, bytes per CTA) into ``bar``'s
        phase ``phase``. A part whose layout shares its tile between CTAs is issued by the lowest of
        them and lands in all (3.9's lowering); its bytes complete on each receiver's barrier."""
        ref = _ref(bar)
        writes, nbytes = [], {}
        for buf, slot, version, bases, b in parts:
            issuer, receivers = _multicast_group(bases, self.cta, self.p.num_ctas, multicast)
            if issuer == self.cta:
                for r in receivers:
                    writes.append((r, buf, slot, version))
                    nbytes[r] = nbytes.get(r, 0) + b
        lands = tuple((ref, r, 0, b, phase) for r, b in sorted(nbytes.items()))
        return self._add("tma_load", "+".join(p[0] for p in parts), site, bar=ref, phase=phase, writes=tuple(writes),
                         completes=tuple(writes), lands=lands, asynchronous="tma" if writes else "",
                         census=len(parts))

    def mma(self, reads, commits, writes=(), completes=(), issue=True, site=None):
        """``tcgen05_mma(..., mbarriers=...)``: reads (cta, buf, slot, version) until it completes, then
        its commits arrive: one per (barrier ref, target CTAs, phase). ``writes`` begin here (the
        accumulator, at the first K step), ``completes`` end when it completes (the last K step).
        Only the issuer (a pair's leader in 2-CTA mode) does anything."""
        lands = tuple((_ref(b), c, 1, 0, ph) for b, ctas, ph in commits for c in sorted(ctas))
        if not issue:
            return self._add("mma", "", site, census=len(commits), note="not the issuer")
        return self._add("mma", "", site, reads=tuple(reads), writes=tuple(writes), completes=tuple(completes),
                         lands=lands, asynchronous="mma", census=len(commits),
                         note=", ".join(_label(_ref(b)) for b, _, _ in commits))

    def tma_store(self, buf, slot, version, site=None):
        """``tma.async_store`` from ``buf[slot]``: the TMA reads it until the store completes."""
        return self._add("tma_store", buf, site, reads=((self.cta, buf, slot, version),), asynchronous="store")

    def store_wait(self, n, site=None):
        """``tma.store_wait(n)``: blocks until at most ``n`` of this thread's stores are in flight."""
        return self._add("store_wait", n, site, n=n)

    def try_cancel(self, result, slot, version, bar, phase=None, issue=True, nbytes=16, site=None):
        """``clc.try_cancel``: CTA 0 asks; the answer lands in ``result[slot]`` of every CTA and
        completes 16 bytes on each CTA's own ``bar`` (in its phase ``phase``)."""
        ref = _ref(bar)
        if not issue:
            return self._add("try_cancel", result, site, note="CTA 0 asks")
        w = tuple((c, result, slot, version) for c in range(self.p.num_ctas))
        return self._add("try_cancel", result, site, bar=ref, writes=w, completes=w, asynchronous="clc",
                         lands=tuple((ref, c, 0, nbytes, phase) for c in range(self.p.num_ctas)))


class Protocol:
    """Barriers and per-(CTA, partition) programs of one kernel configuration.

    For :func:`compare`: ``kernel`` is the (catalog name, parameters, target) of the kernel
    modelled, if the protocol is exactly that kernel; ``warp_specialized``: the threads are
    ``warp_specialize`` partitions (a cluster barrier there is lowered to an mbarrier hand-shake);
    ``compiler_cluster_barriers``: the cluster barriers Triton adds on its own (kernel exit, warp
    specialisation, tensor memory in a cluster); ``ptx_merges``: code sites the compiler merges
    (kind -> how many), the reason in ``notes``."""

    def __init__(self, name: str, num_ctas: int, kernel=None, warp_specialized: bool = False,
                 compiler_cluster_barriers: int = 0, notes: str = ""):
        self.name, self.num_ctas, self.kernel, self.notes = name, check_cluster_size(num_ctas), kernel, notes
        self.warp_specialized, self.compiler_cluster_barriers = warp_specialized, compiler_cluster_barriers
        self.barriers: list[Barrier] = []
        self.threads: list[Thread] = []
        self.ptx_merges: dict = {}

    def barrier(self, name, slots=1, count=1, bases=None, two_ctas=False) -> Barrier:
        """Declare ``slots`` barriers initialised with ``count`` (times the group size, on each
        leader). ``bases``: an MBarrierLayout cga_layout; default what ``allocate_mbarrier`` builds."""
        if bases is None:
            bases = MBarrierLayout.multicta(num_ctas=self.num_ctas, two_cta=two_ctas).cga_layout
        b = Barrier(name, slots, count, ch2.BarrierLayoutModel.of(bases, self.num_ctas))
        self.barriers.append(b)
        return b

    def thread(self, cta: int, partition: str) -> Thread:
        t = Thread(self, cta, partition)
        self.threads.append(t)
        return t

    def recount(self, name: str, count: int) -> "Protocol":
        """Initialise barrier ``name`` with ``count`` instead (times the group size, as
        ``mbarrier.init`` does): what a kernel with that one change would do. Returns the protocol."""
        self._named(name)
        self.barriers = [dataclasses.replace(b, count=count) if b.name == name else b for b in self.barriers]
        self.name += f", {name} count {count}"
        return self

    def rebroadcast(self, name: str, from_cta: int) -> "Protocol":
        """Make every ``arrive(name, from_cta=...)`` broadcast with mask ``from_cta`` instead (chapter 2's
        rule: a CTA sends if its dropped bits are zero, to every CTA sharing its kept bits)."""
        self._named(name)
        reach = ch2.broadcast_targets(from_cta, self.num_ctas)
        ops = [(t, op) for t in self.threads for op in t.ops
               if op.kind == "arrive" and op.bar[0].name == name and op.note.startswith("from_cta=")]
        if not ops:
            raise ValueError(f"no arrive on {name!r} broadcasts with from_cta in {self.name}")
        for t, op in ops:
            op.targets, op.note = tuple(reach.get(t.cta, ())), f"from_cta={from_cta}"
        self.name += f", {name} from_cta={from_cta:#b}"
        return self

    def _named(self, name):
        if all(b.name != name for b in self.barriers):
            raise ValueError(f"{self.name} has no barrier {name!r}; its barriers: {[b.name for b in self.barriers]}")

    def __repr__(self):
        return f"<Protocol {self.name}: {self.num_ctas} CTAs, {len(self.threads)} threads>"


def all_ctas(num_ctas):
    """The cga_layout of one barrier shared by the whole cluster (it lives in CTA 0)."""
    return [list(b) for b in cluster.group_barrier_layout(num_ctas).cga_layout]


def _multicast_group(bases, cta, num_ctas, multicast):
    """(issuer, receivers) of a TMA load into a buffer with ``bases`` (chapter 3): every CTA holding
    the same tile receives it and the lowest of them issues; without multicast each loads its own."""
    if not multicast or not bases:
        return cta, (cta,)
    mask = ch3.multicast_mask([tuple(b) for b in bases], cta, num_ctas)
    group = tuple(c for c in range(num_ctas) if mask >> c & 1)
    return group[0], group


def commit_targets(leader, operand_bases, num_ctas, multicast, two_ctas):
    """The CTAs a ``tcgen05_commit`` of the MMA issued by ``leader`` arrives on. With multicast:
    every CTA (every pair, in 2-CTA mode) holding an operand tile this MMA read, so that each may
    reload its buffers; without: the issuer (or its pair). Tests check that every CTA then receives
    exactly Triton's ``tcgen05_mma_barrier_count`` commits."""
    pair = (lambda c: c & ~1) if two_ctas else (lambda c: c)
    if not multicast:
        return tuple(c for c in range(num_ctas) if pair(c) == leader)
    return tuple(c for c in range(num_ctas)
                 if any(ch3.tile_of(b, pair(c)) == ch3.tile_of(b, leader) for b in operand_bases))


def commit_count(operand_bases, multicast, two_ctas):
    """Triton's own ``tcgen05_mma_barrier_count``, called on stand-ins that carry only the layouts."""
    smems = [SimpleNamespace(layout=SimpleNamespace(cga_layout=[list(x) for x in b])) for b in operand_bases]
    return tcgen05_mma_barrier_count(smems, multicast, two_ctas)


# ============================================================================== the semantics


@dataclass
class _Step:
    """An op, or the landing of its asynchronous part, compiled to integer indices: ``arrivals``
    and ``lands`` are (barrier instance, arrivals, bytes, phase); ``reads`` / ``writes`` /
    ``completes`` are (slot index, version); ``objs`` the (read, add, write) bitmasks of what it
    touches, for the partial-order reduction."""
    op: Op
    tid: int
    idx: int
    wait: int = -1                  # the barrier instance a (leader's) wait reads
    arrivals: tuple = ()
    lands: tuple = ()
    reads: tuple = ()
    writes: tuple = ()
    completes: tuple = ()
    event: int = -1                 # an op: the event it starts; an event: its own id
    pred: int = -1                  # an event: the one to land first (MMAs, stores complete in order)
    objs: tuple = (0, 0, 0)


class Model:
    """A protocol compiled for exploration. A state is one flat tuple: each thread's program
    counter; each barrier instance's (pending arrivals, pending bytes, completed phases); each
    buffer slot's (version, write in flight); a bitmask of the asynchronous operations in flight."""

    def __init__(self, protocol: Protocol):
        self.p, self.threads = protocol, protocol.threads
        self.T = T = len(self.threads)
        self.inst, self.inst_name, self.init_count = {}, [], []         # per (barrier, slot, leader)
        for b in protocol.barriers:
            for s in range(b.slots):
                for g in b.layout.groups():
                    self.inst[(b.name, s, g[0])] = len(self.inst_name)
                    self.inst_name.append(f"CTA {g[0]}'s " + (f"{b.name}[{s}]" if b.slots > 1 else b.name))
                    self.init_count.append(b.count * len(g))
        self.slot, self.slot_key = {}, []                                 # per (CTA, buffer, slot)
        for t in self.threads:
            for op in t.ops:
                for c, buf, s, _ in op.reads + op.writes:
                    if (c, buf, s) not in self.slot:
                        self.slot[(c, buf, s)] = len(self.slot_key)
                        self.slot_key.append((c, buf, s))
        self.slot_name = [f"{buf}[{s}] of CTA {c}" for c, buf, s in self.slot_key]
        B, S = len(self.init_count), len(self.slot_key)
        self.BAR, self.SLOT, self.EV = T, T + 3 * B, T + 3 * B + 2 * S
        self.start = tuple([0] * T + [x for n in self.init_count for x in (n, 0, 0)] + [0, 0] * S + [0])
        self.cluster = {}                                                 # name -> {tid: [arrive indices]}
        for tid, t in enumerate(self.threads):
            for i, op in enumerate(t.ops):
                if op.kind == "cluster_arrive":
                    self.cluster.setdefault(op.name, {}).setdefault(tid, []).append(i)
        self.code, self.events, last = [], [], {}
        for tid, t in enumerate(self.threads):
            self.code.append([])
            for i, op in enumerate(t.ops):
                step = self._compile(tid, i, op)
                if op.asynchronous:
                    unit = (tid, op.asynchronous)
                    ev = _Step(op, tid, i, lands=tuple((self._inst(r, c), a, b, ph) for r, c, a, b, ph in op.lands),
                               reads=step.reads, completes=self._slots(op.completes), event=len(self.events),
                               pred=last.get(unit, -1) if op.asynchronous in ("mma", "store") else -1)
                    step.event = last[unit] = ev.event
                    self.events.append(ev)
                self.code[tid].append(step)
        self.store_mask = [sum(1 << e.event for e in self.events if e.tid == tid and e.op.asynchronous == "store")
                           for tid in range(T)]
        self._holds()
        self._objects()

    def _inst(self, ref, cta):
        bar, slot = ref
        return self.inst[(bar.name, slot, bar.layout.leader(cta))]

    def _slots(self, entries):
        return tuple((self.slot[e[:3]], e[3]) for e in entries)

    def _compile(self, tid, i, op):
        cta = self.threads[tid].cta
        step = _Step(op, tid, i, reads=self._slots(op.reads), writes=self._slots(op.writes))
        if op.kind in ("arrive", "expect"):
            step.arrivals = tuple((self._inst(op.bar, c), 1, op.nbytes, op.phase) for c in op.targets)
        elif op.kind == "wait" and op.bar[0].layout.leader(cta) == cta:     # Triton waits on the leader only
            step.wait = self._inst(op.bar, cta)
        if not op.asynchronous:
            step.completes = self._slots(op.completes)
        return step

    def _who(self, tid):
        t = self.threads[tid]
        return f"CTA {t.cta} {t.partition}"

    # ------------------------------------------------------------------ reads and their release
    def _holds(self):
        """Who reads each (slot, version), and after which point that read is released:
        ``(thread, op index)``, the op that frees it (or the read itself, if nothing does), or
        ``(None, event)``: an asynchronous reader (an MMA, a TMA store) is done when it lands."""
        self.readers, self.freed_at = {}, {}
        for tid, t in enumerate(self.threads):
            held = []                                      # (slot, version, index of the read)
            for i, op in enumerate(t.ops):
                if op.frees:
                    keep = []
                    for k, v, j in held:
                        _, buf, slot = self.slot_key[k]
                        if buf in op.frees or (buf, slot) in op.frees:
                            self._reader(k, v, (tid, i), self._who(tid))
                        else:
                            keep.append((k, v, j))
                    held = keep
                step = self.code[tid][i]
                for k, v in step.reads:
                    if op.asynchronous:
                        self._reader(k, v, (None, step.event), f"{self._who(tid)}'s {op.kind}")
                    else:
                        held.append((k, v, i))
            for k, v, j in held:                           # never freed: the read is its own release
                self._reader(k, v, (tid, j), self._who(tid))

    def _reader(self, k, v, until, who):
        self.readers.setdefault((k, v), []).append((until, who))
        if until[0] is not None:
            self.freed_at.setdefault(until, []).append((k, v))

    def released(self, st, until):
        tid, x = until
        if tid is not None:
            return st[tid] > x
        ev = self.events[x]
        return st[ev.tid] > ev.idx and not st[self.EV] >> x & 1

    # ------------------------------------------------------------ what each step touches (for POR)
    def _objects(self):
        """Each step's objects in three modes: read, add and write. Two steps are dependent iff
        they share an object other than read/read or add/add. The objects:

        * (barrier instance, phase j): an arrival meant for phase j *adds* to it (arrivals of one
          phase commute: each only counts down; the last completes the phase in either order) and
          reads phase j - 1 (it is checked to land after that phase completed); a wait for phase k
          reads phases 0 .. k + 1 (a later completion is an overrun already reported);
        * (slot, version v): a read of v, and the release of that read, read it; the start of the
          write of v + 1 and the landing of v write it (two versions apart nothing interacts);
        * a thread's queue of stores (or MMAs), and each cluster barrier's k-th rendezvous.

        ``future[tid][pc]``: what a thread may still touch, its asynchronous operations included,
        as the masks a conflict test needs: (any mode, read or write, add or write)."""
        bits = {}

        def o(*key):
            if key not in bits:
                bits[key] = 1 << len(bits)
            return bits[key]

        top = {}                                          # the last phase of each barrier anything names
        for steps in self.code:
            for st in steps:
                if st.wait >= 0:
                    top[st.wait] = max(top.get(st.wait, 0), st.op.phase + 2)
        for st in [s for steps in self.code for s in steps] + self.events:
            for inst, _, _, ph in st.arrivals + st.lands:
                top[inst] = max(top.get(inst, 0), (ph or 0) + 2)

        def arrivals(entries):
            add = rd = wr = 0
            for inst, _, _, ph in entries:
                if ph is None:                            # no phase named: conflicts with every phase
                    wr |= sum(o("bar", inst, j) for j in range(top[inst] + 1))
                else:
                    add |= o("bar", inst, ph)
                    rd |= o("bar", inst, ph - 1) if ph > 0 else 0
            return rd, add, wr

        def writes(entries, land):
            w = 0
            for k, v in entries:
                w |= o("slot", k, v - 1) | (o("slot", k, v) if land else 0)
            return w

        for tid, steps in enumerate(self.code):
            for st in steps:
                op = st.op
                r, a, w = arrivals(st.arrivals)
                for k, v in self.freed_at.get((tid, st.idx), ()):
                    r |= o("slot", k, v)
                for k, v in st.reads:
                    r |= o("slot", k, v)
                w |= writes(st.writes, False) | writes(st.completes, True)
                if st.wait >= 0:
                    r |= sum(o("bar", st.wait, j) for j in range(op.phase + 2))
                if op.kind == "store_wait":
                    r |= o("queue", tid, "store")
                if op.kind in ("cluster_arrive", "cluster_wait"):
                    kth = sum(1 for x in self.threads[tid].ops[:st.idx + 1] if x.kind == "cluster_arrive") - 1
                    if op.kind == "cluster_arrive":
                        w |= o("cb", op.name, kth)
                    else:
                        r |= o("cb", op.name, kth)
                if op.asynchronous in ("mma", "store"):
                    w |= o("queue", tid, op.asynchronous)
                st.objs = (r, a, w)
        for ev in self.events:
            r, a, w = arrivals(ev.lands)
            r |= sum(o("slot", k, v) for k, v in set(ev.reads))
            w |= writes(ev.completes, True)
            if ev.op.asynchronous in ("mma", "store"):
                w |= o("queue", ev.tid, ev.op.asynchronous)
            ev.objs = (r, a, w)
        self._bar_bits = {key[1:]: b for key, b in bits.items() if key[0] == "bar"}
        self.future = []                       # per pc: (any mode, read or write, add or write)
        for steps in self.code:
            fut, r, a, w = [(0, 0, 0)], 0, 0, 0
            for st in reversed(steps):
                for x in [st.objs] + ([self.events[st.event].objs] if st.event >= 0 else []):
                    r, a, w = r | x[0], a | x[1], w | x[2]
                fut.append((r | a | w, r | w, a | w))
            self.future.append(fut[::-1])

    def phase_bit(self, inst, phase):
        return self._bar_bits.get((inst, phase), 0)

    # ------------------------------------------------------------------------- stepping
    def done(self, st):
        return all(st[i] == len(s) for i, s in enumerate(self.code)) and not st[self.EV]

    def enabled(self, st):
        """Transitions enabled in ``st``: a thread id (its next op runs) or T + event id (it lands)."""
        out = [tid for tid, steps in enumerate(self.code) if st[tid] < len(steps) and self._can_run(st, steps[st[tid]])]
        pend = st[self.EV]
        while pend:
            e = (pend & -pend).bit_length() - 1
            pend &= pend - 1
            pred = self.events[e].pred
            if pred < 0 or not st[self.EV] >> pred & 1:
                out.append(self.T + e)
        return out

    def can_fire(self, st, tr):
        if tr < self.T:
            return st[tr] < len(self.code[tr]) and self._can_run(st, self.code[tr][st[tr]])
        ev = self.events[tr - self.T]
        return bool(st[self.EV] >> ev.event & 1) and (ev.pred < 0 or not st[self.EV] >> ev.pred & 1)

    def _can_run(self, st, step):
        k = step.op.kind
        if k == "wait":
            return step.wait < 0 or (st[self.BAR + 3 * step.wait + 2] & 1) != step.op.parity
        if k == "store_wait":
            return bin(st[self.EV] & self.store_mask[step.tid]).count("1") <= step.op.n
        if k == "cluster_wait":
            parts = self.cluster[step.op.name]
            kth = parts[step.tid].index(step.idx - 1)
            return all(st[u] > idx[kth] for u, idx in parts.items())
        return True

    def fire(self, st, tr, say=None):
        """Apply transition ``tr``: (new state, error or None). ``say`` collects the trace's words."""
        s = list(st)
        if tr < self.T:
            step = self.code[tr][s[tr]]
            s[tr] += 1
            err = self._run(s, step, say)
        else:
            step = self.events[tr - self.T]
            s[self.EV] &= ~(1 << step.event)
            err = self._land(s, step, say)
        return tuple(s), err

    def _bar(self, s, inst, arrivals, nbytes, phase, say):
        """Arrivals and bytes on one barrier instance; its phase completes when both reach zero."""
        i = self.BAR + 3 * inst
        name = self.inst_name[inst]
        if phase is not None and s[i + 2] != phase:
            return ("phase overrun", f"an arrival meant for phase {phase} of {name} lands while it is in phase "
                                     f"{s[i + 2]}: the barrier cannot tell the two phases apart")
        s[i] -= arrivals
        s[i + 1] += nbytes
        if s[i] < 0:
            return ("phase overrun", f"{name} got more arrivals than its count {self.init_count[inst]}")
        if s[i] == 0 and s[i + 1] == 0:
            s[i + 2] += 1
            s[i] = self.init_count[inst]
            if say is not None:
                say.append(f"{name} completes phase {s[i + 2] - 1}")
        elif say is not None:
            tx = s[i + 1]
            say.append(f"{name}: {s[i]} arrival(s)" + (f", {tx} B" if tx > 0 else "") + " to go" +
                       (f" ({-tx} B landed before their expect)" if tx < 0 else ""))
        return None

    def _check_write(self, s, k, v):
        have, busy = s[self.SLOT + 2 * k], s[self.SLOT + 2 * k + 1]
        if busy or have != v - 1:
            why = "another write to it is in flight" if busy else f"it holds version {have}"
            return ("overwrite before release", f"{self.slot_name[k]} is written (version {v}) while {why}")
        for until, who in self.readers.get((k, v - 1), ()):
            if not self.released(s, until):
                return ("overwrite before release", f"{self.slot_name[k]} is overwritten (version {v}) before "
                                                    f"{who} released version {v - 1}")
        return None

    def _check_read(self, s, k, v):
        have, busy = s[self.SLOT + 2 * k], s[self.SLOT + 2 * k + 1]
        if have == v and not busy:
            return None
        if have > v:
            return ("overwrite before release", f"{self.slot_name[k]} should hold version {v}, but version {have} "
                                                "already overwrote it")
        return ("read before write", f"{self.slot_name[k]} is read expecting version {v} but holds version {have}"
                                     + (" (the next write is in flight)" if busy else ""))

    def _run(self, s, step, say):
        op = step.op
        if op.kind == "wait":
            if step.wait < 0:
                if say is not None:
                    say.append(f"not the leader: no wait (CTA {op.targets[0]} waits)")
                return None
            n = s[self.BAR + 3 * step.wait + 2]
            if say is not None:
                say.append(f"returns: {n} phase(s) completed")
            return self._phase_error(step, n)
        if say is not None and op.kind == "arrive" and not op.targets:
            say.append("not a sender: nothing to do")
        for inst, arrivals, nbytes, phase in step.arrivals:
            err = self._bar(s, inst, arrivals, nbytes, phase, say)
            if err:
                return err
        for k, v in step.reads:
            err = self._check_read(s, k, v)
            if err:
                return err
        for k, v in step.writes:
            err = self._check_write(s, k, v)
            if err:
                return err
            s[self.SLOT + 2 * k + 1] = 1
        if step.event >= 0:
            s[self.EV] |= 1 << step.event
        self._complete(s, step.completes)
        if say is not None:
            say.append(_describe(op))
        return None

    def _complete(self, s, writes):
        for k, v in writes:
            s[self.SLOT + 2 * k], s[self.SLOT + 2 * k + 1] = v, 0

    def _land(self, s, ev, say):
        self._complete(s, ev.completes)
        if say is not None:
            say.append(_describe(ev.op, landed=True))
        for inst, arrivals, nbytes, phase in ev.lands:
            err = self._bar(s, inst, arrivals, -nbytes, phase, say)
            if err:
                return err
        return None

    def _phase_error(self, step, n):
        op = step.op
        if n == op.phase + 1:
            return None
        who, bar = self._who(step.tid), self.inst_name[step.wait]
        if n < op.phase + 1:
            return ("phase overrun", f"{who}'s wait for phase {op.phase} of {bar} (parity {op.parity}) returns after "
                                     f"{n} completed phase(s): parity {op.parity} was an older phase's")
        return ("phase overrun", f"{bar} has completed {n} phases while {who} still waits for phase {op.phase}: "
                                 f"parity {op.parity} cannot tell them apart")

    def check_state(self, st):
        """A barrier that ran past the phase a waiter still waits for (a wait that returns on the
        wrong phase is caught when it runs)."""
        for tid, steps in enumerate(self.code):
            step = steps[st[tid]] if st[tid] < len(steps) else None
            if step and step.wait >= 0 and st[self.BAR + 3 * step.wait + 2] > step.op.phase + 1:
                return self._phase_error(step, st[self.BAR + 3 * step.wait + 2])
        return None

    def blocked(self, st):
        """(CTA, partition, what) of every unfinished thread, for a deadlock report."""
        out = []
        for tid, steps in enumerate(self.code):
            if st[tid] < len(steps):
                step = steps[st[tid]]
                what = op_text(step.op)
                if step.wait >= 0:
                    i = self.BAR + 3 * step.wait
                    what += f": {st[i + 2]} phase(s) completed, {st[i]} arrival(s)" + \
                        (f" and {st[i + 1]} B" if st[i + 1] else "") + " missing"
                out.append((self.threads[tid].cta, self.threads[tid].partition, what))
        return out


def op_text(op: Op) -> str:
    """The op column of a trace."""
    k = op.kind
    if k in ("arrive", "expect", "wait"):
        extra = {"arrive": f" ({op.note})" if op.note else "", "expect": f" {op.nbytes} B", "wait": ""}[k]
        ph = "" if op.phase is None else f", phase {op.phase}" + (f" (parity {op.parity})" if k == "wait" else "")
        return f"{k} {_label(op.bar)}{extra}{ph}"
    if k in ("read", "write", "wgmma", "tma_store"):
        items = op.reads or op.writes
        what = ", ".join(sorted({f"{buf}[{s}] v{v}" for _, buf, s, v in items}))
        where = sorted({c for c, *_ in items})
        return f"{k} {what}" + (f" of CTA {_ctas(where)}" if k == "read" and len(where) > 1 else "")
    if k == "tma_load":
        return f"tma_load -> {_label(op.bar)}"
    if k == "mma":
        return f"mma -> {op.note}" if op.asynchronous else "mma"
    if k in ("store_wait", "wgmma_wait"):
        return f"{k}({op.n})"
    if k in ("cluster_arrive", "cluster_wait"):
        return f"{k} ({op.name})"
    if k == "try_cancel":
        return f"try_cancel -> slot {op.writes[0][2]}" if op.writes else "try_cancel"
    return k


def _describe(op, landed=False):
    """The detail column for an op, or for its asynchronous part landing."""
    k = op.kind
    if k == "tma_load":
        if not op.writes:
            return "another CTA of the multicast group issues it"
        parts = ", ".join(sorted({f"{b}[{s}] v{v}" for _, b, s, v in op.writes}))
        ctas = _ctas(sorted({c for c, *_ in op.writes}))
        return f"{parts} land in CTA {ctas}" if landed else f"{parts} for CTA {ctas}: in flight"
    if k == "mma":
        if not op.asynchronous:
            return "the pair's leader issues it"
        if landed:
            return f"MMA done: commit to CTA {_ctas(sorted({c for _, c, *_ in op.lands}))}"
        return "reads " + ", ".join(sorted({f"{b}[{s}] v{v}" for _, b, s, v in op.reads})) + ": in flight"
    if k == "try_cancel":
        if not op.asynchronous:
            return "CTA 0 asks for the cluster"
        return "the 16-byte answer lands in every CTA" if landed else "answer in flight to every CTA"
    if k == "tma_store":
        return "the store has read its buffer" if landed else "in flight"
    if k == "wgmma_wait":
        return ("done reading " + ", ".join(f"{b}[{s}]" for b, s in op.frees)) if op.frees else ""
    if k == "cluster_wait":
        return "every participant has arrived"
    return ""


def _ctas(cs):
    cs = list(cs)
    if len(cs) > 2 and cs == list(range(cs[0], cs[-1] + 1)):
        return f"{cs[0]}-{cs[-1]}"
    return ",".join(map(str, cs))


# ============================================================================== the explorer


@dataclass
class Result:
    """What :func:`check` or :func:`simulate` found. ``trace``: rows (step, CTA, partition, op,
    detail) of the failing schedule, for ``notebook.table(result.trace, protocols.HEADER)``."""
    protocol: str
    ok: bool
    kind: str | None = None
    message: str = ""
    trace: list = field(default_factory=list)
    states: int = 0
    seconds: float = 0.0
    exhaustive: bool = True
    depth: int | None = None
    runs: int = 0
    failures: int = 0

    @property
    def steps(self) -> int:
        """Length of the failing schedule."""
        return sum(1 for r in self.trace if isinstance(r[0], int))

    def table(self) -> str:
        """The trace as fixed-width text."""
        rows = [list(map(str, HEADER))] + [[str(x) for x in r] for r in self.trace]
        w = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(r[i].ljust(w[i]) for i in range(4)) + "  " + r[4] for r in rows]
        lines.insert(1, "-" * (sum(w) + 20))
        return "\n".join(lines)

    def __str__(self):
        if self.runs:
            if self.ok:
                return f"no failure in {self.runs} random schedules ({self.seconds:.1f} s; evidence, not proof)"
            return (f"{self.kind} in {self.failures} of {self.runs} random schedules; shortened to {self.steps} "
                    f"steps: {self.message}")
        if self.ok:
            where = "in every interleaving" + (f" up to depth {self.depth}" if self.depth else "")
            if not self.exhaustive:
                where = "in the states searched (stopped at the limit: not every interleaving)"
            return (f"no deadlock, no phase overrun, no overwrite before release, {where} "
                    f"({self.states:,} states, {self.seconds:.2f} s)")
        return f"{self.kind} after {self.steps} steps: {self.message} ({self.states:,} states, {self.seconds:.2f} s)"

    def _repr_html_(self):
        from .notebook import table
        return f"<p>{self.protocol}: {self}</p>" + (table(self.trace, HEADER).data if self.trace else "")


def _conflict(x, y):
    """Do a step's (read, add, write) objects conflict with another's (read, add, write)?"""
    return bool(x[2] & (y[0] | y[1] | y[2]) or x[1] & (y[0] | y[2]) or x[0] & (y[1] | y[2]))


def _pending(m, st):
    pend = st[m.EV]
    while pend:
        e = (pend & -pend).bit_length() - 1
        pend &= pend - 1
        yield e


def _interferers(m, st, tr, enabled):
    """What a stubborn set containing ``tr`` must contain too. ``tr`` enabled: every other thread
    whose remaining program may touch what ``tr`` touches, in a conflicting way (its next op, since
    nothing of it can happen before that one), and every conflicting operation in flight. ``tr``
    blocked: whatever could unblock it (for a wait: an arrival for the barrier's current phase)."""
    T = m.T
    if tr in enabled:
        r, a, w = m.code[tr][st[tr]].objs if tr < T else m.events[tr - T].objs
        out = []
        for u in range(T):                    # future masks: (any mode, read or write, add or write)
            if u != tr and st[u] < len(m.code[u]):
                f_any, f_rw, f_aw = m.future[u][st[u]]
                if w & f_any or a & f_rw or r & f_aw:
                    out.append(u)
        return out + [T + e for e in _pending(m, st) if T + e != tr and _conflict((r, a, w), m.events[e].objs)]
    if tr >= T:
        return [T + m.events[tr - T].pred]
    step = m.code[tr][st[tr]]
    if step.op.kind == "wait":
        bit = m.phase_bit(step.wait, st[m.BAR + 3 * step.wait + 2])
        out = [u for u in range(T) if u != tr and st[u] < len(m.code[u]) and m.future[u][st[u]][2] & bit]
        return out + [T + e for e in _pending(m, st) if (m.events[e].objs[1] | m.events[e].objs[2]) & bit]
    if step.op.kind == "store_wait":
        return [T + e for e in _pending(m, st) if m.store_mask[tr] >> e & 1]
    parts = m.cluster[step.op.name]                                    # cluster_wait
    kth = parts[tr].index(step.idx - 1)
    return [u for u, idx in parts.items() if st[u] <= idx[kth]]


def _stubborn(m, st, enabled):
    """The smallest stubborn subset of ``enabled`` found from any seed (Valmari's stubborn sets:
    closed under "may interfere"; every step left out commutes with everything in the set, so
    exploring only the set loses no deadlock and no reachable failure)."""
    en = set(enabled)
    memo = {}
    best = None
    for seed in enabled:
        found, work, hits = {seed}, [seed], 1
        while work and (best is None or hits < len(best)):
            tr = work.pop()
            if tr not in memo:
                memo[tr] = _interferers(m, st, tr, en)
            for x in memo[tr]:
                if x not in found:
                    found.add(x)
                    work.append(x)
                    hits += x in en
        if best is None or hits < len(best):
            best = found & en
            if len(best) == 1:
                break
    return sorted(best)


def check(protocol: Protocol, depth: int | None = None, reduce: bool = True, max_states: int = 2_000_000) -> Result:
    """Explore every interleaving of ``protocol`` breadth-first (up to ``depth`` steps), with
    partial-order reduction unless ``reduce=False``, and return the first failure (one of the
    shortest among the schedules explored, with any step it can do without dropped; with
    ``reduce=False`` the shortest of all) or the all-clear. A search stopped at ``max_states``
    says so."""
    t0 = time.perf_counter()
    m = Model(protocol)
    parent = {m.start: None}
    frontier, level = [m.start], 0
    while frontier and (depth is None or level < depth):
        nxt = []
        for st in frontier:
            en = m.enabled(st)
            if not en:
                if not m.done(st):
                    return _failure(m, protocol, _path(parent, st), ("deadlock", _stuck(m, st)), len(parent), t0, depth)
                continue
            for tr in (_stubborn(m, st, en) if reduce and len(en) > 1 else en):
                new, err = m.fire(st, tr)
                err = err or m.check_state(new)
                if err:
                    return _failure(m, protocol, _path(parent, st) + [tr], err, len(parent), t0, depth)
                if new not in parent:
                    parent[new] = (st, tr)
                    nxt.append(new)
            if len(parent) > max_states:
                return Result(protocol.name, True, states=len(parent), seconds=time.perf_counter() - t0,
                              exhaustive=False, depth=depth)
        frontier = nxt
        level += 1
    return Result(protocol.name, True, states=len(parent), seconds=time.perf_counter() - t0, depth=depth)


def _path(parent, st):
    path = []
    while parent[st] is not None:
        st, tr = parent[st]
        path.append(tr)
    return path[::-1]


def _stuck(m, st):
    return "every unfinished thread is blocked: " + "; ".join(f"CTA {c} {p} at {w}" for c, p, w in m.blocked(st))


def _failure(m, protocol, path, err, states, t0, depth, runs=0, failures=0):
    path, err = _shorten(m, path, err)
    kind, message = err
    rows = trace_rows(m, path)
    if kind == "deadlock":
        st = m.start
        for tr in path:
            st, _ = m.fire(st, tr)
        rows += [["stuck", c, p, w, "blocked"] for c, p, w in m.blocked(st)]
    elif rows:
        rows[-1][4] = (rows[-1][4] + "; " if rows[-1][4] else "") + f"!! {message}"
    return Result(protocol.name, False, kind, message, rows, states, time.perf_counter() - t0,
                  exhaustive=runs == 0, depth=depth, runs=runs, failures=failures)   # runs: random schedules


def trace_rows(m: Model, path) -> list:
    """Replay ``path`` (transition ids) from the start and describe every step."""
    rows, st = [], m.start
    units = {"tma": "TMA", "mma": "tensor core", "store": "TMA store", "clc": "CLC"}
    for tr in path:
        words = []
        if tr < m.T:
            t = m.threads[tr]
            cta, part, what = t.cta, t.partition, op_text(t.ops[st[tr]])
        else:
            ev = m.events[tr - m.T]
            cta, part, what = m.threads[ev.tid].cta, units[ev.op.asynchronous], op_text(ev.op) + " lands"
        st, _ = m.fire(st, tr, words)
        rows.append([len(rows) + 1, cta, part, what, "; ".join(x for x in words if x)])
    return rows


def simulate(protocol: Protocol, runs: int = 300, seed: int = 0) -> Result:
    """Random schedules, for protocols too big for every interleaving: a clean result is evidence,
    not proof. In each run every thread and every asynchronous unit (a thread's TMA, tensor core or
    stores) gets a random speed, and each step is drawn in proportion to the speeds of those that
    can move: a slow partition or a slow store is what exposes these bugs. Reports how many runs
    failed; the trace is the shortest failing run, with every step it can do without dropped."""
    t0 = time.perf_counter()
    m = Model(protocol)
    rng = random.Random(seed)
    first, failures = None, 0
    for _ in range(runs):
        speed = {}

        def weight(tr):
            key = tr if tr < m.T else (m.events[tr - m.T].tid, m.events[tr - m.T].op.asynchronous)
            if key not in speed:
                speed[key] = math.exp(rng.gauss(0.0, 1.5))
            return speed[key]

        st, path, err = m.start, [], None
        while not err:
            en = m.enabled(st)
            if not en:
                if not m.done(st):
                    err = ("deadlock", _stuck(m, st))
                break
            tr = rng.choices(en, [weight(x) for x in en])[0]
            path.append(tr)
            st, err = m.fire(st, tr)
            err = err or m.check_state(st)
        if err:
            failures += 1
            if first is None or len(path) < len(first[0]):
                first = (path, err)
    if first is None:
        return Result(protocol.name, True, seconds=time.perf_counter() - t0, exhaustive=False, runs=runs)
    return _failure(m, protocol, *first, 0, t0, None, runs, failures)


def _replay(m, path):
    """Run ``path`` while possible: (the path up to its first failure, the failure), or None."""
    st = m.start
    for i, tr in enumerate(path):
        if not m.can_fire(st, tr):
            return None
        st, err = m.fire(st, tr)
        err = err or m.check_state(st)
        if err:
            return path[:i + 1], err
    if not m.enabled(st) and not m.done(st):
        return path, ("deadlock", _stuck(m, st))
    return None


def _shorten(m, path, err):
    """Drop steps while the schedule still fails the same way (a thread's steps from some point on,
    or a single step), from the end, until nothing more can go."""
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(path))):
            if i >= len(path):
                continue
            tail = [x for j, x in enumerate(path) if j < i or x != path[i]]
            for candidate in (tail, path[:i] + path[i + 1:]):
                got = _replay(m, candidate)
                if got and got[1][0] == err[0] and len(got[0]) < len(path):
                    path, err = got
                    changed = True
                    break
    return path, err



# ============================================================================== the book's protocols
#
# One builder per kernel, written against the kernel's source: the same loops, the same index and
# phase arithmetic (``phase`` is what a wait or an arrival is meant for, ``parity`` what the code
# passes), the same constants imported from the kernel modules. ``site=`` names a code site where
# one source line is several (a ``static_range``, or a constexpr-bounded loop the compiler unrolls).


def exchange(num_ctas: int = 4) -> Protocol:
    """Chapter 2, ``exchange_kernel``: publish a row, gather on CTA 0, broadcast ``go``, read all rows."""
    p = Protocol(f"exchange, {num_ctas} CTAs", num_ctas, ("cluster_exchange", {"num_ctas": num_ctas}, "sm_90a"),
                 compiler_cluster_barriers=1)
    arrived = p.barrier("arrived", bases=all_ctas(num_ctas))             # one barrier, in CTA 0
    go = p.barrier("go")                                                   # one per CTA
    for c in range(num_ctas):
        t = p.thread(c, "main")
        t.write("pub", 0, 1)
        t.arrive(arrived, 0)
        t.wait(arrived, 0)
        t.arrive(go, 0, from_cta=0)
        t.wait(go, 0)
        t.read("pub", 0, 1, at=range(num_ctas))                            # peers' rows through DSMEM
    return p


def ping_pong(num_ctas: int = 2, rounds: int = 2, one_phase: bool = False) -> Protocol:
    """Chapter 2, ``ping_pong_kernel``: each round, write my slot, gather + release, read every slot,
    gather + release again before anyone overwrites. ``one_phase``: the kernel's ``ONE_PHASE`` bug,
    the phase never flips."""
    p = Protocol(f"ping-pong, {num_ctas} CTAs, {rounds} rounds" + (", one phase (bug)" if one_phase else ""),
                 num_ctas, None if one_phase else ("ping_pong", {"num_ctas": num_ctas}, "sm_90a"),
                 compiler_cluster_barriers=1)
    arrived = p.barrier("arrived", bases=all_ctas(num_ctas))
    go = p.barrier("go")
    freed = p.barrier("freed", bases=all_ctas(num_ctas))
    freed_go = p.barrier("freed_go")
    for c in range(num_ctas):
        t = p.thread(c, "main")
        phase = 0
        for r in range(rounds):
            t.write("box", 0, r + 1)
            t.arrive(arrived, r)
            t.wait(arrived, r, parity=phase)
            t.arrive(go, r, from_cta=0)
            t.wait(go, r, parity=phase)
            t.read("box", 0, r + 1, at=range(num_ctas))
            t.arrive(freed, r, frees=["box"])
            t.wait(freed, r, parity=phase)
            t.arrive(freed_go, r, from_cta=0)
            t.wait(freed_go, r, parity=phase)
            if not one_phase:
                phase ^= 1
    return p


def pair_sum() -> Protocol:
    """Chapter 2, ``pair_sum_kernel``: 8 CTAs, one barrier per pair (``PAIR_LAYOUT``); the leader
    releases its pair with a broadcast keeping the pair-number bits."""
    bases = ch2.PAIR_LAYOUT
    keep = sum(1 << i for i, b in enumerate(bases) if b[0])                 # the kernel's PAIR_MASK
    p = Protocol("pair barriers, 8 CTAs", 8, ("pair_sum", {}, "sm_90a"), compiler_cluster_barriers=1)
    pair_bar = p.barrier("pair_bar", bases=bases)
    go = p.barrier("go")
    for c in range(8):
        t = p.thread(c, "main")
        t.write("box", 0, 1)
        t.arrive(pair_bar, 0)
        t.wait(pair_bar, 0)
        t.arrive(go, 0, from_cta=keep)
        t.wait(go, 0)
        t.read("box", 0, 1, at=(c & ~1, c | 1))
    return p


RELEASES = {**cluster.RELEASES, "none": cluster.RELEASE_NONE}          # chapter 3's RELEASE modes, by name


def tile_stream(num_ctas: int = 2, release="mbarrier", multicast: bool = True, stages: int = 2,
                tiles: int | None = None) -> Protocol:
    """Chapter 3, ``tile_stream_kernel``: a ring of ``stages`` buffers, each tile multicast by CTA 0
    into every CTA; before a reload, ``release``: "cluster" (0: a cluster barrier), "mbarrier" (1:
    gather on CTA 0, broadcast ``go``) or "none" (2: safe on one CTA only)."""
    if release not in RELEASES and release not in RELEASES.values():
        raise ValueError(f"release must be one of {sorted(RELEASES)} (or its mode number), got {release!r}")
    mode = RELEASES[release] if isinstance(release, str) else release
    name = {v: k for k, v in RELEASES.items()}[mode]
    tiles = stages + 2 if tiles is None else tiles
    bases = ch3.stream_bases(num_ctas)                     # every CTA holds the whole tile
    nbytes = ch3.STREAM_TILE_BYTES                         # expected by each CTA
    p = Protocol(f"tile stream, {num_ctas} CTAs, release {name}" + ("" if multicast else ", no multicast"),
                 num_ctas, ("tile_stream", {"num_ctas": num_ctas, "multicast": multicast, "release": mode,
                                            "stages": stages}, "sm_90a"), compiler_cluster_barriers=int(num_ctas > 1))
    ready = p.barrier("ready", stages)
    if mode == 1:
        empty = p.barrier("empty", stages, bases=all_ctas(num_ctas))
        go = p.barrier("go", stages)
    for c in range(num_ctas):
        t = p.thread(c, "main")
        for s in range(stages):                                            # prologue (static_range)
            t.expect(ready[s], nbytes, 0, site=f"expect ready[{s}]")
            t.tma_load(ready[s], [("bufs", s, 1, bases, nbytes)], 0, multicast, site=f"tma_load bufs[{s}]")
        for i in range(tiles):
            slot, lap = i % stages, i // stages
            t.wait(ready[slot], lap)
            t.read("bufs", slot, lap + 1)
            if i + stages < tiles:
                if mode == 0:
                    t.cluster_barrier(frees=["bufs"])
                elif mode == 1:
                    t.arrive(empty[slot], lap, frees=["bufs"])
                    t.wait(empty[slot], lap)
                    t.arrive(go[slot], lap, from_cta=0)
                    t.wait(go[slot], lap)
                t.expect(ready[slot], nbytes, lap + 1)
                t.tma_load(ready[slot], [("bufs", slot, lap + 2, bases, nbytes)], lap + 1, multicast)
    return p


def _pair(cta, two_ctas):
    leader = cta & ~1 if two_ctas else cta
    return leader, ((leader, leader + 1) if two_ctas else (leader,))


def _per_cta_bytes(block, bases, elem=2):
    """Bytes of a [rows, cols] block that each CTA holds: the block split over its distinct tiles."""
    n = 1 << len(bases)
    distinct = len({ch3.tile_of([tuple(b) for b in bases], c) for c in range(n)}) if bases else 1
    return block[0] * block[1] * elem // distinct


def mma_tile(two_ctas: bool = True, N: int = 128, K: int = 64) -> Protocol:
    """Chapter 4, ``two_cta_mma_kernel`` (or its 1-CTA twin): each CTA expects its own bytes on the
    pair's ``loaded`` barrier, the leader issues one MMA, its commit reaches both CTAs."""
    M = 256 if two_ctas else 128
    L = ch4.tile_layouts(M, N, K, two_ctas)
    C = L["num_ctas"]
    a_b, b_b = L["a"].cga_layout, L["b"].cga_layout
    a_bytes, b_bytes = _per_cta_bytes((M, K), a_b), _per_cta_bytes((K, N), b_b)
    p = Protocol(f"{'2-CTA' if two_ctas else '1-CTA'} MMA tile", C,
                 ("two_cta_mma" if two_ctas else "one_cta_mma", {}, "sm_100a"),
                 compiler_cluster_barriers=3 if two_ctas else 0)
    loaded = p.barrier("loaded", two_ctas=two_ctas)
    done = p.barrier("done", count=commit_count([a_b, b_b], multicast=False, two_ctas=two_ctas))
    for c in range(C):
        t = p.thread(c, "main")
        leader, pair = _pair(c, two_ctas)
        t.expect(loaded, a_bytes + b_bytes, 0)
        t.tma_load(loaded, [("a", 0, 1, a_b, a_bytes), ("b", 0, 1, b_b, b_bytes)], 0, multicast=False)
        t.wait(loaded, 0)
        acc = tuple((x, "acc", 0, 1) for x in pair)
        t.mma([(x, b, 0, 1) for x in pair for b in "ab"],
              [(done, commit_targets(leader, [a_b, b_b], C, False, two_ctas), 0)],
              writes=acc, completes=acc, issue=c == leader)
        t.wait(done, 0)
        t.read("acc", 0, 1)
        t.write("c_smem", 0, 1)
        t.tma_store("c_smem", 0, 1)
        t.store_wait(0)
    return p


def multicast_mma(acc_bases=None, two_ctas=None, k_tiles=None) -> Protocol:
    """Chapters 3-4, ``blackwell_multicast_mma_kernel``: one stage, TMA multicast between the pairs,
    ``tcgen05_mma(multicast=True)`` telling every CTA that fed an MMA that its buffers are free."""
    seed = ch3.SEED_BLACKWELL
    acc_bases = seed["acc_bases"] if acc_bases is None else acc_bases
    two_ctas = seed["two_ctas"] if two_ctas is None else two_ctas
    k_tiles = seed["K_TILES"] if k_tiles is None else k_tiles
    a_b, b_b = cluster.operand_cga_layouts(acc_bases, two_ctas)
    C = 1 << len(acc_bases)
    a_bytes = _per_cta_bytes((seed["BM"], seed["BK"]), a_b)
    b_bytes = _per_cta_bytes((seed["BK"], seed["BN"]), b_b)
    params = {} if (tuple(acc_bases), two_ctas) == (tuple(seed["acc_bases"]), seed["two_ctas"]) else \
        {"acc_bases": acc_bases, "two_ctas": two_ctas, "BM": seed["BM"] // (1 if two_ctas else 2)}
    p = Protocol(f"tcgen05 multicast loop, {C} CTAs", C, ("blackwell_multicast_mma", {**params, "K_TILES": k_tiles},
                                                          "sm_100a"), compiler_cluster_barriers=3 if two_ctas else 2,
                 notes="K_TILES is a constexpr: the compiler unrolls the loop, every K step is its own code site.")
    loaded = p.barrier("loaded", two_ctas=two_ctas)
    consumed = p.barrier("consumed", count=commit_count([a_b, b_b], multicast=True, two_ctas=two_ctas))
    for c in range(C):
        t = p.thread(c, "main")
        leader, pair = _pair(c, two_ctas)
        targets = commit_targets(leader, [a_b, b_b], C, True, two_ctas)
        acc = tuple((x, "acc", 0, 1) for x in pair)
        for k in range(k_tiles):
            t.expect(loaded, a_bytes + b_bytes, k, site=f"expect [k={k}]")
            t.tma_load(loaded, [("a", 0, k + 1, a_b, a_bytes), ("b", 0, k + 1, b_b, b_bytes)], k,
                       site=f"tma_load [k={k}]")
            t.wait(loaded, k, site=f"wait loaded [k={k}]")
            t.mma([(x, b, 0, k + 1) for x in pair for b in "ab"], [(consumed, targets, k)],
                  writes=acc if k == 0 else (), completes=acc if k == k_tiles - 1 else (), issue=c == leader,
                  site=f"mma [k={k}]")
            t.wait(consumed, k, site=f"wait consumed [k={k}]")
        t.read("acc", 0, 1)
        t.write("c_smem", 0, 1)
        t.tma_store("c_smem", 0, 1)
        t.store_wait(0)
    return p


CLC_RELEASES = ("cluster", "group", "pair")


def kernel_depths(name):
    """The pipeline depths a kernel is built with (its CONFIG): a model with these depths has the
    kernel's code sites. Checks use smaller ones (every reuse of every buffer still happens)."""
    if name == "clc_matmul":
        cfg = ch5.CONFIG
        return cfg["stages"], cfg["acc_stages"], cfg["block_n"] // cfg["epilogue_n"]
    raise ValueError(f"kernel_depths knows the pipelined kernel 'clc_matmul' only, got {name!r}")


def clc_matmul(cga_layout=None, release: str = "cluster", staging: str = "across", tiles: int = 3,
               k_steps: int = 1, stages: int = 2, acc_stages: int = 2, subtiles: int = 2,
               slots_only: bool = False) -> Protocol:
    """Chapter 5, ``clc_matmul_kernel``: scheduler, loader, MMA and epilogue partitions in every CTA;
    the load ring, the double-buffered accumulator, the CLC answer slots, the epilogue's staging
    buffers. Every partition runs ``tiles`` tiles, so it reads ``tiles`` answers (the last fails).

    ``release`` of an answer slot before the next ``try_cancel``: "cluster" (the kernel: each CTA's
    ``clc_empty`` counts its own four readers, every scheduler waits on it, then the schedulers meet
    at a cluster barrier before CTA 0 asks again), "group" (the kernel before: one ``clc_empty`` in
    CTA 0 counting every reader of the cluster, only CTA 0 waits) or "pair" (upstream's tutorial: a
    two_ctas barrier per pair, so CTA 0 hears only from its own pair). ``staging``: the epilogue's
    buffer index runs "across" tiles (the kernel's ``stores % 2``) or restarts "per_tile" (``j % 2``,
    the kernel before). ``slots_only``: only the answer slots (every partition still reads every
    answer, but does nothing else: any timing of the readers)."""
    if release not in CLC_RELEASES or staging not in ("across", "per_tile"):
        raise ValueError(f"release must be one of {CLC_RELEASES} and staging 'across' or 'per_tile', got "
                         f"{release!r} and {staging!r}")
    acc = tuple(tuple(b) for b in (ch5.CONFIG["cga_layout"] if cga_layout is None else cga_layout))
    C = 1 << len(acc)
    a_b, b_b = cluster.operand_cga_layouts(acc, two_ctas=True)
    slots, readers = ch5.CLC_SLOTS.value, ch5.CLC_READERS.value
    commits = commit_count([a_b, b_b], multicast=True, two_ctas=True)
    cfg = ch5.CONFIG
    a_bytes = _per_cta_bytes((cfg["block_m"] * (1 << sum(1 for m, _ in acc if m)), cfg["block_k"]), a_b)
    b_bytes = _per_cta_bytes((cfg["block_k"], cfg["block_n"]), b_b)
    params = {} if acc == tuple(cfg["cga_layout"]) else {"cga_layout": acc}
    what = "answer slots only" if slots_only else f"staging {staging}, {subtiles} sub-tile(s)"
    as_built = (release, staging, stages, acc_stages, subtiles) == ("cluster", "across", *kernel_depths("clc_matmul"))
    p = Protocol(f"CLC matmul, {C} CTAs, {tiles} tiles, {release} release, {what}", C,
                 ("clc_matmul", params, "sm_100a") if as_built and not slots_only else None, warp_specialized=True,
                 compiler_cluster_barriers=3)
    load_ready = p.barrier("load_ready", stages, two_ctas=True)
    load_empty = p.barrier("load_empty", stages, count=commits)
    acc_ready = p.barrier("acc_ready", acc_stages, count=commits)
    acc_empty = p.barrier("acc_empty", acc_stages, two_ctas=True)
    clc_ready = p.barrier("clc_ready", slots)
    clc_empty = p.barrier("clc_empty", slots, count=readers,
                          **{"cluster": {}, "group": {"bases": all_ctas(C)}, "pair": {"two_ctas": True}}[release])

    def next_tile(t, i):                                    # Shared.next_tile, in every partition
        slot, lap = i % slots, i // slots
        t.wait(clc_ready[slot], lap)
        t.read("clc_result", slot, lap + 1)
        t.arrive(clc_empty[slot], lap, frees=["clc_result"])

    for c in range(C):
        leader, pair = _pair(c, True)
        targets = commit_targets(leader, [a_b, b_b], C, True, True)
        t = p.thread(c, "scheduler")
        for i in range(tiles):
            slot, lap = i % slots, i // slots
            t.wait(clc_empty[slot], lap - 1, parity=(lap & 1) ^ 1)
            if release == "cluster":
                t.cluster_barrier("schedulers")
            t.expect(clc_ready[slot], 16, lap)
            t.try_cancel("clc_result", slot, lap + 1, clc_ready[slot], lap, issue=c == 0)
            next_tile(t, i)
        t = p.thread(c, "loader")
        it = 0
        for i in range(tiles):
            for k in range(0 if slots_only else k_steps):
                s, lap = it % stages, it // stages
                t.wait(load_empty[s], lap - 1, parity=(lap & 1) ^ 1)
                t.expect(load_ready[s], a_bytes + b_bytes, lap)
                t.tma_load(load_ready[s], [("a", s, lap + 1, a_b, a_bytes), ("b", s, lap + 1, b_b, b_bytes)], lap)
                it += 1
            next_tile(t, i)
        t = p.thread(c, "mma")
        it = 0
        for i in range(tiles):
            a, alap = i % acc_stages, i // acc_stages
            if not slots_only:
                t.wait(acc_empty[a], alap - 1, parity=(alap & 1) ^ 1)
            written = tuple((x, "acc", a, alap + 1) for x in pair)
            for k in range(0 if slots_only else k_steps):
                s, lap = it % stages, it // stages
                t.wait(load_ready[s], lap)
                last = k == k_steps - 1
                t.mma([(x, b, s, lap + 1) for x in pair for b in "ab"],
                      [(load_empty[s], targets, lap)] + ([(acc_ready[a], targets, alap)] if last else []),
                      writes=written if k == 0 else (), completes=written if last else (), issue=c == leader)
                it += 1
            next_tile(t, i)
        t = p.thread(c, "epilogue")
        stores, used = 0, [0, 0]
        for i in range(tiles):
            a, alap = i % acc_stages, i // acc_stages
            if not slots_only:
                t.wait(acc_ready[a], alap)
                t.read("acc", a, alap + 1)
                for j in range(subtiles):                                  # static_range: a site each
                    buf = stores % 2 if staging == "across" else j % 2
                    used[buf] += 1
                    t.store_wait(1, site=f"store_wait(1) [j={j}]")
                    t.write("c_smem", buf, used[buf], site=f"write c_smem [j={j}]")
                    t.tma_store("c_smem", buf, used[buf], site=f"tma_store [j={j}]")
                    stores += 1
                t.arrive(acc_empty[a], alap, frees=["acc"])
            next_tile(t, i)
        if not slots_only:
            t.store_wait(0, site="store_wait(0) at exit")
    return p


def hopper_matmul(num_ctas: int = 2, consumers: int = 2, turns: bool = True, release_early: bool = False,
                  tiles: int = 3, k_steps: int = 2, stages: int = 2, split: int = 1) -> Protocol:
    """Chapter 6, ``hopper_matmul_kernel``: a producer partition (the TMA, B multicast by CTA 0, and
    the cluster-wide release of a stage: gather on CTA 0's ``empty``, broadcast ``go``) and one or
    two consumers (wgmma; two take alternate tiles, ping-pong, in ``turn``). Bugs: ``turns=False``
    (ping-pong without turns) and ``release_early`` (a consumer frees a stage right after issuing
    its wgmma, one stage early: that wgmma may still be reading it)."""
    if num_ctas not in (1, 2, 4) or consumers not in (1, 2):
        raise ValueError(f"the Hopper matmul runs 1, 2 or 4 CTAs and 1 or 2 consumers, got {num_ctas!r} and {consumers!r}")
    cfg = ch6.CONFIG
    n = log2(num_ctas)
    a_b, b_b = [[1 << i, 0] for i in range(n)], [[0, 0]] * n     # A: my rows; B: shared, multicast
    block_m = 64 if consumers == 2 else cfg["block_m"]
    a_bytes = _per_cta_bytes((block_m * num_ctas, cfg["block_k"]), a_b)
    b_bytes = _per_cta_bytes((cfg["block_k"], cfg["block_n"]), b_b)
    bugs = [x for x, on in (("no turns", not turns and consumers == 2), ("released early", release_early)) if on]
    p = Protocol(f"Hopper matmul, {num_ctas} CTAs, {consumers} consumer(s)" + "".join(f", {b} (bug)" for b in bugs),
                 num_ctas, None if bugs else ("hopper_matmul", {"num_ctas": num_ctas, "consumers": consumers,
                                                                "block_m": block_m, "stages": stages,
                                                                "epilogue_n": cfg["block_n"] // split}, "sm_90a"),
                 warp_specialized=True, compiler_cluster_barriers=2 if num_ctas > 1 else 0)
    if consumers == 2:
        p.ptx_merges = {"store_wait": 1}
        p.notes = "LLVM merges the two consumers' identical exit store_wait(0) into one block of PTX."
    ready = p.barrier("ready", stages)
    empty = p.barrier("empty", stages, bases=all_ctas(num_ctas))          # one per stage, in CTA 0
    go = p.barrier("go", stages)
    turn = p.barrier("turn", 2) if consumers == 2 else None
    for c in range(num_ctas):
        t = p.thread(c, "producer")
        it = 0
        for _ in range(tiles):
            for k in range(k_steps):
                s, lap = it % stages, it // stages
                if it >= stages:
                    t.wait(empty[s], lap - 1, parity=(lap & 1) ^ 1)
                    if num_ctas > 1:            # a lone CTA's producer skips the broadcast
                        t.arrive(go[s], lap - 1, from_cta=0)
                        t.wait(go[s], lap - 1, parity=(lap & 1) ^ 1)
                t.expect(ready[s], a_bytes + b_bytes, lap)
                t.tma_load(ready[s], [("a", s, lap + 1, a_b, a_bytes), ("b", s, lap + 1, b_b, b_bytes)], lap)
                it += 1
        for w in range(consumers):
            t = p.thread(c, f"consumer {w}")
            first, used = w * (2 if split > 1 else 1), {}
            for j, tile in enumerate(range(w, tiles, consumers)):
                if consumers == 2 and turns:
                    if w == 1:
                        t.wait(turn[1], j)
                    elif j > 0:
                        t.wait(turn[0], j - 1)
                it = tile * k_steps
                for k in range(k_steps):
                    s, lap = it % stages, it // stages
                    t.wait(ready[s], lap)
                    t.wgmma([("a", s, lap + 1), ("b", s, lap + 1)])
                    if release_early:
                        t.arrive(empty[s], lap, site="arrive empty (early)")
                    t.wgmma_wait(1)
                    if k > 0 and not release_early:
                        t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site="arrive empty (in loop)")
                    it += 1
                if consumers == 2 and turns:
                    t.arrive(turn[1 - w], j)
                t.wgmma_wait(0, site="wgmma_wait(0)")
                if not release_early:
                    t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site="arrive empty (last step)")
                for i in range(split):                                     # store_tile (static_range)
                    buf = first + i % 2
                    used[buf] = used.get(buf, 0) + 1
                    t.store_wait(0 if split == 1 else 1, site=f"store_wait [i={i}]")
                    t.write("c_smem", buf, used[buf], site=f"write c_smem [i={i}]")
                    t.tma_store("c_smem", buf, used[buf], site=f"tma_store [i={i}]")
            t.store_wait(0, site="store_wait(0) at exit")
    return p


# ============================================================================== model and code agree
#
# Each protocol is tied to its kernel: the code sites of every barrier operation in the model must
# be the instructions of the compiled PTX. Static PTX counts are per code site (a loop is one site;
# a static_range, or a constexpr-bounded loop the compiler unrolls, one per iteration), and so are
# the model's ``site`` labels.

CENSUS = {   # kind: what it is in the PTX
    "init": "mbarrier.init (one per barrier)",
    "arrive": "mbarrier.arrive (not expect_tx, not a cluster-barrier hand-shake)",
    "expect": "mbarrier.arrive.expect_tx",
    "wait": "mbarrier.try_wait (not a cluster-barrier hand-shake)",
    "commit": "tcgen05.commit (one per mbarrier of a tcgen05_mma)",
    "try_cancel": "clusterlaunchcontrol.try_cancel",
    "tma_load": "cp.async.bulk.tensor ... complete_tx (one per async_load; a box split in several copies is one)",
    "tma_store": "cp.async.bulk.commit_group (one per async_store)",
    "store_wait": "cp.async.bulk.wait_group",
    "cluster_barrier": "barrier.cluster.arrive (in a partition: mbarrier.arrive.release.cluster, a hand-shake)",
}
_CENSUS_OF = {"arrive": "arrive", "expect": "expect", "wait": "wait", "mma": "commit", "try_cancel": "try_cancel",
              "tma_load": "tma_load", "tma_store": "tma_store", "store_wait": "store_wait",
              "cluster_arrive": "cluster_barrier"}


def sites(protocol: Protocol) -> dict:
    """The model's code sites per census kind (a site counts once however many CTAs or iterations run
    it), and ``init_counts``: every barrier's initial count, as its leader holds it."""
    per = {}
    for t in protocol.threads:
        for op in t.ops:
            kind = _CENSUS_OF.get(op.kind)
            if kind:
                per[(kind, op.site)] = max(per.get((kind, op.site), 0), op.census)
    out = dict.fromkeys(CENSUS, 0)
    for (kind, _), n in per.items():
        out[kind] += n
    out["init_counts"] = sorted(b.count * b.layout.group_size for b in protocol.barriers for _ in range(b.slots))
    out["init"] = len(out["init_counts"])
    return out


def ptx_census(ptx: str) -> dict:
    """The same kinds, counted in PTX (``hand_shakes``: cluster barriers lowered inside partitions;
    ``cluster_barriers``: aligned ``barrier.cluster.arrive``, the compiler's own included)."""
    out = dict.fromkeys(CENSUS, 0)
    out.update(hand_shakes=0, cluster_barriers=0)
    out["init_counts"] = sorted(lens.mbarrier_init_counts(ptx))
    out["init"] = len(out["init_counts"])
    load = None                                  # the copies of one load share its predicate and barrier
    for _, _, line in lens.instructions(ptx):
        if "cp.async.bulk.tensor" in line and "complete_tx" in line:
            key = (line.split()[0], line.rsplit("[", 1)[-1])
            out["tma_load"] += key != load
            load = key
            continue
        kind = next((k for pattern, k in _PTX_KINDS if all(x in line for x in pattern)
                     and not any(x in line for x in _PTX_NOT.get(k, ()))), None)
        if kind:
            out[kind] += 1
            load = None
    return out


_PTX_KINDS = [(("mbarrier.arrive.release.cluster",), "hand_shakes"), (("mbarrier.arrive.expect_tx",), "expect"),
              (("mbarrier.arrive",), "arrive"), (("mbarrier.try_wait",), "wait"), (("tcgen05.commit",), "commit"),
              (("clusterlaunchcontrol.try_cancel",), "try_cancel"), (("cp.async.bulk.commit_group",), "tma_store"),
              (("cp.async.bulk.wait_group",), "store_wait"), (("barrier.cluster.arrive",), "cluster_barriers")]
_PTX_NOT = {"wait": ("acquire.cluster",), "cluster_barriers": ("relaxed",)}


def compare(protocol: Protocol, ptx: str | None = None) -> list:
    """Rows [kind, model, PTX, equal] comparing the model's code sites with the compiled kernel
    (``ptx`` defaults to ``catalog.compile`` of ``protocol.kernel``). What the compiler adds on its own
    goes on the model's side: its cluster barriers, and for a cluster barrier inside a partition the
    two hand-shake mbarriers (count C - 1, used in turn) it allocates."""
    if ptx is None:
        if protocol.kernel is None:
            raise ValueError(f"{protocol.name} models no single kernel: nothing to compare")
        name, params, target = protocol.kernel
        ptx = catalog.compile(name, target, **params).ptx
    want, got = sites(protocol), ptx_census(ptx)
    if protocol.warp_specialized:
        got["cluster_barrier"] = got["hand_shakes"]
        if want["cluster_barrier"]:
            want["init_counts"] = sorted(want["init_counts"] + [protocol.num_ctas - 1] * 2)
            want["init"] += 2
    else:
        got["cluster_barrier"] = got["cluster_barriers"] - protocol.compiler_cluster_barriers
    for kind, n in protocol.ptx_merges.items():
        want[kind] -= n
    rows = [[k, want[k], got[k], want[k] == got[k]] for k in CENSUS]
    rows.insert(1, ["init counts", want["init_counts"], got["init_counts"], want["init_counts"] == got["init_counts"]])
    return rows


# ============================================================================== the book's registry


@dataclass(frozen=True)
class Case:
    """One check of the book: a protocol, what it must show (``None``: nothing wrong; or the kind of
    failure a seeded bug must show) and how it is explored (every interleaving, or random schedules
    where that is too big for CI; :func:`check` on those may not finish: the 4-CTA answer-slot model had
    not after 300,000 states)."""
    build: object
    expect: str | None = None
    exhaustive: bool = True

    def run(self, runs: int = 300, seed: int = 0) -> Result:
        p = self.build()
        return check(p) if self.exhaustive else simulate(p, runs=runs, seed=seed)


_C4 = ((1, 0), (2, 0))         # the 4-CTA cluster of chapter 5: two pairs stacked along M

CASES = {
    # the book's kernels, as they are
    "ch2 exchange, 4 CTAs": Case(lambda: exchange(4)),
    "ch2 ping-pong, 2 CTAs, 3 rounds": Case(lambda: ping_pong(2, rounds=3)),
    "ch2 ping-pong, 4 CTAs, 2 rounds": Case(lambda: ping_pong(4)),
    "ch2 pair barriers, 8 CTAs": Case(pair_sum),
    "ch3 tile stream, 4 CTAs, cluster barrier": Case(lambda: tile_stream(4, "cluster")),
    "ch3 tile stream, 4 CTAs, gather + broadcast": Case(lambda: tile_stream(4, "mbarrier")),
    "ch3 tile stream, 1 CTA, no release": Case(lambda: tile_stream(1, "none", multicast=False)),
    "ch3 tile stream, 2 CTAs, no release, no multicast": Case(lambda: tile_stream(2, "none", multicast=False)),
    "ch3 tcgen05 multicast loop, 4 CTAs": Case(multicast_mma),
    "ch4 1-CTA tile": Case(lambda: mma_tile(False)),
    "ch4 2-CTA tile": Case(mma_tile),
    "ch5 CLC answer slots, 2 CTAs": Case(lambda: clc_matmul(slots_only=True)),
    "ch5 CLC matmul, 2 CTAs, 2 tiles": Case(lambda: clc_matmul(tiles=2)),
    "ch5 CLC answer slots, 4 CTAs": Case(lambda: clc_matmul(_C4, slots_only=True), exhaustive=False),
    "ch5 CLC matmul, 2 CTAs, 3 tiles": Case(lambda: clc_matmul(tiles=3), exhaustive=False),
    "ch5 CLC matmul, 4 CTAs, 3 tiles": Case(lambda: clc_matmul(_C4, tiles=3), exhaustive=False),
    "ch5 CLC matmul, 4 CTAs, group release (before)": Case(lambda: clc_matmul(_C4, "group"), exhaustive=False),
    "ch6 Hopper matmul, 2 CTAs, 1 consumer": Case(lambda: hopper_matmul(2, consumers=1)),
    "ch6 Hopper matmul, 2 CTAs, ping-pong": Case(lambda: hopper_matmul(2, consumers=2)),
    # what must be found
    "ch3 no release with multicast, 2 CTAs": Case(lambda: tile_stream(2, "none"), "overwrite before release"),
    "bug: one-phase barrier (ch2 ONE_PHASE)": Case(lambda: ping_pong(2, one_phase=True), "phase overrun"),
    "bug: per-pair CLC slot release, 4 CTAs (upstream tutorial)": Case(
        lambda: clc_matmul(_C4, "pair", slots_only=True), "overwrite before release", exhaustive=False),
    "bug: ping-pong without turns (ch6)": Case(lambda: hopper_matmul(2, consumers=2, turns=False), "phase overrun"),
    "bug: ring released one stage early (ch6)": Case(lambda: hopper_matmul(2, consumers=1, release_early=True),
                                                     "overwrite before release"),
    "bug: epilogue staging restarting per tile, one sub-tile (ch5 before)": Case(
        lambda: clc_matmul(staging="per_tile", subtiles=1, tiles=2), "overwrite before release"),
}


def kernel_models() -> list:
    """Protocols at the exact configuration of registered kernels, for :func:`compare`."""
    d = kernel_depths("clc_matmul")
    return ([exchange(4), ping_pong(2), ping_pong(16), pair_sum()] +
            [tile_stream(4, r, m, stages=4) for r in ("cluster", "mbarrier") for m in (True, False)] +
            [tile_stream(1, "none", multicast=False), tile_stream(2, "none")] +
            [multicast_mma(), multicast_mma(((1, 0),), False), mma_tile(False), mma_tile(True)] +
            [clc_matmul(acc, stages=d[0], acc_stages=d[1], subtiles=d[2], tiles=2) for acc in (None, _C4)] +
            [hopper_matmul(c, w, stages=s) for c, w, s in ((1, 1, 3), (2, 1, 3), (4, 1, 3), (2, 2, 4), (1, 2, 4))])


def check_book(runs: int = 300, names=None) -> list:
    """Every case (or those ``names``): rows [case, expected, found, steps, states or runs, seconds],
    for ``notebook.table(rows, ["case", "expected", "found", "steps", "states", "s"])``."""
    rows = []
    for name, case in CASES.items():
        if names is not None and name not in names:
            continue
        r = case.run(runs)
        rows.append([name, case.expect or "nothing wrong", r.kind or "nothing wrong", r.steps or "",
                     r.states or f"{r.runs} runs", round(r.seconds, 2)])
    return rows
