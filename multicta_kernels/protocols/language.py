"""The protocol language: barriers with their ``cga_layout``, one program per (CTA, partition), built op by op.

See :mod:`multicta_kernels.protocols` for the whole checker."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from triton.experimental.gluon.language.nvidia.blackwell import tcgen05_mma_barrier_count
from triton.experimental.gluon.language.nvidia.hopper.mbarrier import MBarrierLayout

from .. import barriers as ch2
from .. import multicast as ch3
from ..core import validate
from ..core.hardware import check_cluster_size
from ..gluon import ring


HEADER = ("step", "CTA", "partition", "op", "detail")
MAX_OPS = 20_000                # operations in one protocol: far above the book's models, far below an hour of building
MAX_SLOTS = 1024                # slots of one barrier array (rings, answer slots)
INVALID = -1                    # a barrier instance's pending-arrival count once it is invalidated


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


def slot_label(ref):
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
    reach: tuple = ()               # tma_load: for each part, the CTAs it lands in (0 where another CTA issues it);
                                    # mma: for each commit, the CTAs it arrives on (0 where this CTA does not issue)
    registers: bool = False         # write: of registers an asynchronous unit reads (a wgmma's A), not shared memory
    note: str = ""


class Thread:
    """The program of one partition of one CTA, built op by op (the caller unrolls the loops)."""

    def __init__(self, protocol: "Protocol", cta: int, partition: str):
        self.p, self.cta, self.partition = protocol, cta, partition
        self.ops: list[Op] = []
        self._wgmma: list[tuple] = []

    def _add(self, kind, what, site, **kw):
        self.p.ops += 1
        if self.p.ops > MAX_OPS:
            raise ValueError(_too_big(self.p))
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

    def write(self, buf, slot, version, over=(), site=None, registers=False):
        """A write of ``buf[slot]`` in this CTA by its threads (registers to shared memory). ``over``:
        the (buf, slot, version) whose bytes ``buf[slot]`` shares (the compiler's allocation may place
        a buffer over others that are dead by then): writing it writes them too, so every reader of
        their previous version must have released it first. ``registers``: ``buf`` is a set of registers
        that a wgmma reads until a wait retires it (its A operand), written by the load that fills them: checked
        as a buffer, and no write of shared memory in the ties (the program records the load as a read)."""
        w = ((self.cta, buf, slot, version),) + tuple((self.cta, b, s, v) for b, s, v in over)
        return self._add("write", buf, site, writes=w, completes=w, registers=registers)

    def invalidate(self, bar, site=None):
        """``mbarrier.invalidate``: the barrier's memory may be reused; an arrival, a landing or a wait
        on it afterwards is an error (on a shared barrier only the leader has one to invalidate)."""
        ref = _ref(bar)
        return self._add("invalidate", ref[0].name, site, bar=ref, targets=(ref[0].layout.leader(self.cta),))

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
        them and lands in all (3.9's lowering); its bytes complete on each receiver's barrier. A part's slot may
        be a tuple: one copy that fills several slots (a box the kernel reads back a piece at a time)."""
        ref = _ref(bar)
        writes, nbytes, reach = [], {}, []
        for buf, slot, version, bases, b in parts:
            issuer, receivers = multicast_group(bases, self.cta, self.p.num_ctas, multicast)
            reach.append(len(receivers) if issuer == self.cta else 0)
            if issuer == self.cta:
                for r in receivers:
                    writes += [(r, buf, s, version) for s in (slot if isinstance(slot, tuple) else (slot,))]
                    nbytes[r] = nbytes.get(r, 0) + b
        lands = tuple((ref, r, 0, b, phase) for r, b in sorted(nbytes.items()))
        return self._add("tma_load", "+".join(p[0] for p in parts), site, bar=ref, phase=phase, writes=tuple(writes),
                         completes=tuple(writes), lands=lands, asynchronous="tma" if writes else "",
                         census=len(parts), reach=tuple(reach))

    def st_async(self, bar, buf, slot, version, nbytes, to, phase=None, site=None):
        """``hopper.async_store`` (PTX ``st.async ... mbarrier::complete_tx::bytes``): registers stored into
        ``buf[slot]`` of every CTA of ``to`` (its own included), ``nbytes`` completing on each receiver's ``bar``
        (the barrier at the same offset in that CTA) in phase ``phase``. The thread does not wait for them."""
        ref = _ref(bar)
        to = tuple(to)
        writes = tuple((r, buf, slot, version) for r in to)
        lands = tuple((ref, r, 0, nbytes, phase) for r in to)
        return self._add("st_async", buf, site, bar=ref, phase=phase, writes=writes, completes=writes, lands=lands,
                         asynchronous="tma")

    def mma(self, reads, commits, writes=(), completes=(), issue=True, site=None):
        """``tcgen05_mma(..., mbarriers=...)``: reads (cta, buf, slot, version) until it completes, then
        its commits arrive: one per (barrier ref, target CTAs, phase). ``writes`` begin here (the
        accumulator, at the first K step), ``completes`` end when it completes (the last K step).
        Only the issuer (a pair's leader in 2-CTA mode) does anything."""
        lands = tuple((_ref(b), c, 1, 0, ph) for b, ctas, ph in commits for c in sorted(ctas))
        if not issue:
            return self._add("mma", "", site, census=len(commits), note="not the issuer", reach=(0,) * len(commits))
        return self._add("mma", "", site, reads=tuple(reads), writes=tuple(writes), completes=tuple(completes),
                         lands=lands, asynchronous="mma", census=len(commits),
                         note=", ".join(slot_label(_ref(b)) for b, _, _ in commits),
                         reach=tuple(len(set(ctas)) for _, ctas, _ in commits))

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
    (kind -> how many), the reason in ``notes``.

    ``exit``: how the CTAs leave. "cluster" (the default, what Triton 3.9 compiles: every multi-CTA
    kernel of the book ends in a cluster barrier, tests/test_protocols_ptx.py checks it, so no CTA exits
    before every thread of the cluster is done),
    or "cta" (each CTA exits once its own threads are done). Either way an arrival, a TMA landing or
    a commit that reaches a CTA after it may have exited is an error ("arrival after exit"): the
    cluster barrier orders threads, not the asynchronous arrivals still in flight."""

    EXITS = ("cluster", "cta")

    def __init__(self, name: str, num_ctas: int, kernel=None, warp_specialized: bool = False,
                 compiler_cluster_barriers: int = 0, notes: str = "", exit: str = "cluster"):
        if exit not in self.EXITS:
            raise ValueError(f"exit must be one of {self.EXITS}, got {exit!r}")
        self.name, self.num_ctas, self.kernel, self.notes = name, check_cluster_size(num_ctas), kernel, notes
        self.warp_specialized, self.compiler_cluster_barriers = warp_specialized, compiler_cluster_barriers
        self.exit = exit
        self.barriers: list[Barrier] = []
        self.threads: list[Thread] = []
        self.ptx_merges: dict = {}
        self.ops = 0                        # operations added so far, capped at MAX_OPS
        self.runtime = None                 # the kernel's runtime sizes this model unrolls (protocols.program)

    def barrier(self, name, slots=1, count=1, bases=None, two_ctas=False) -> Barrier:
        """Declare ``slots`` barriers initialised with ``count`` (times the group size, on each
        leader). ``bases``: an MBarrierLayout cga_layout; default what ``allocate_mbarrier`` builds."""
        slots = validate.count(slots, f"slots of barrier {name!r}", high=MAX_SLOTS)
        count = validate.count(count, f"count of barrier {name!r}", high=1 << 20)
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

    def move(self, site: str, before: str, ctas=None) -> "Protocol":
        """Move the op at code site ``site`` to just before the op at site ``before``, in every thread
        that has both (or only in ``ctas``): the kernel with that line moved up. Returns the protocol."""
        moved = 0
        for t in self.threads:
            if ctas is not None and t.cta not in ctas:
                continue
            at = [i for i, op in enumerate(t.ops) if op.site == site]
            to = [i for i, op in enumerate(t.ops) if op.site == before]
            if len(at) == 1 and len(to) == 1 and to[0] < at[0]:
                t.ops.insert(to[0], t.ops.pop(at[0]))
                moved += 1
        if not moved:
            raise ValueError(f"no thread of {self.name} has {site!r} after {before!r}; sites: "
                             f"{sorted({op.site for t in self.threads for op in t.ops})}")
        self.name += f", {site.split('.', 1)[-1]} before {before.split('.', 1)[-1]}"
        self.kernel = None
        return self

    def drop(self, site: str) -> "Protocol":
        """Remove every op whose code site starts with ``site`` (say, a partition's tail). Returns the protocol."""
        n = sum(len(t.ops) for t in self.threads)
        for t in self.threads:
            t.ops = [op for op in t.ops if not op.site.startswith(site)]
        if n == sum(len(t.ops) for t in self.threads):
            raise ValueError(f"no op of {self.name} is at a site starting with {site!r}")
        self.name += f", without {site}"
        self.kernel = None
        return self

    def _named(self, name):
        if all(b.name != name for b in self.barriers):
            raise ValueError(f"{self.name} has no barrier {name!r}; its barriers: {[b.name for b in self.barriers]}")

    def __repr__(self):
        return f"<Protocol {self.name}: {self.num_ctas} CTAs, {len(self.threads)} threads>"


def _too_big(protocol) -> str:
    """One line for a model that grows past MAX_OPS: it names the builder's size arguments that made it so
    (the nearest public caller outside this module, e.g. ``models.tile_stream(tiles=2**40)``: a private helper
    such as ``models._ring_producer`` is passed over, its arguments are not the ones the user gave)."""
    import inspect
    frame = inspect.currentframe()
    while frame is not None and (frame.f_code.co_filename == __file__ or frame.f_code.co_name.startswith("_")):
        frame = frame.f_back
    sizes, builder = [], "the model"
    if frame is not None:
        builder = frame.f_code.co_name
        code = frame.f_code
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        sizes = sorted(((k, frame.f_locals.get(k)) for k in params if isinstance(frame.f_locals.get(k), int)
                        and not isinstance(frame.f_locals.get(k), bool) and frame.f_locals.get(k) > 64),
                       key=lambda kv: -kv[1])
    what = ", ".join(f"{k}={v}" for k, v in sizes) or "its sizes"
    return (f"{builder}: {what} would build a protocol of more than {MAX_OPS} operations, more than the checker "
            f"can explore; use sizes of a few dozen at most (every reuse of every buffer happens within a few laps)")


def checkable(protocol) -> "Protocol":
    """Refuse what :func:`check` or :func:`simulate` cannot check: a verdict on a protocol with no threads, a
    thread with nothing to do would certify nothing."""
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol must be a Protocol (from multicta_kernels.protocols.models), "
                        f"got {validate.shown(protocol)}")
    if not protocol.threads:
        raise ValueError(f"protocol {protocol.name!r} has no threads: nothing to check")
    idle = [f"CTA {t.cta} {t.partition}" for t in protocol.threads if not t.ops]
    if idle:
        raise ValueError(f"protocol {protocol.name!r} has threads with no operations ({', '.join(idle[:4])}): a "
                         f"size of its builder (tiles, rounds, k_steps) is 0 or negative; nothing to check")
    return protocol


def all_ctas(num_ctas):
    """The cga_layout of one barrier shared by the whole cluster (it lives in CTA 0)."""
    validate.cluster_size(num_ctas)
    return [list(b) for b in ring.group_barrier_layout(num_ctas).cga_layout]


def multicast_group(bases, cta, num_ctas, multicast):
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
