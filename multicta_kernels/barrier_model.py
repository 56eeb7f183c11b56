"""Chapter 2's model of a multi-CTA mbarrier: pure Python, no GPU and no compiler (the kernels that check it
against Triton's PTX are in :mod:`multicta_kernels.barriers`, which re-exports this module's names).

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

from dataclasses import dataclass, field

from .core import validate
from .core.hardware import check_cluster_size, log2
from .core.layouts import parse_bases


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
    num_ctas = validate.cluster_size(num_ctas)
    validate.index(from_cta, "from_cta", num_ctas, " (a mask of CTA-id bits)")
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


# ---------------------------------------------------- a barrier script, stepped (chapter 2's explorer)

HAND_OFF = """\
init 1
# round 0: CTA 0 arrives and waits; CTA 1 is late
arrive 0
wait 0 0      # blocks: CTA 1 has not arrived
arrive 1      # phase 0 completes: CTA 0's wait returns
# round 1: the loop flips its parity to 1
arrive 1
arrive 0
wait 0 1      # returns at once: phase 1 has completed
"""

LOST_PHASE = """\
init 1
arrive 0
arrive 1
wait 0 0      # phase 0 has completed: returns
arrive 0
arrive 1
wait 0 0      # the loop forgot to flip its parity
arrive 0      # the next round
arrive 1
"""

TMA_BYTES = """\
init 1
expect 0 16384    # CTA 0 leads the pair: 2 x 16384 bytes, one arrival
expect 1 16384    # CTA 1 arrives on CTA 0's barrier
wait 0 0          # blocks until the bytes land
bytes 0 16384
bytes 1 16384     # the transaction count reaches zero: phase 0 completes
"""

OPS = {"init": ("count",), "arrive": ("cta",), "expect": ("cta", "bytes"), "bytes": ("cta", "bytes"),
       "wait": ("cta", "parity")}
OPS_HELP = ("one operation a line: init COUNT | arrive CTA | expect CTA BYTES | bytes CTA BYTES "
            "(TMA bytes land) | wait CTA PARITY; # starts a comment")


def parse_script(script: str, num_ctas: int) -> list:
    """The script's operations as (line number, op, args); ValueError naming the first bad line."""
    ops = []
    for n, raw in enumerate(str(script).splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word, *args = line.split()
        word = word.lower()
        if word not in OPS:
            raise ValueError(f"line {n}: {word!r} is not an operation; {OPS_HELP}")
        if len(args) != len(OPS[word]):
            raise ValueError(f"line {n}: {word} takes {' '.join(a.upper() for a in OPS[word])}, got {line!r}")
        try:
            vals = [int(a, 0) for a in args]
        except ValueError:
            raise ValueError(f"line {n}: {word} takes integers, got {line!r}") from None
        names = OPS[word]
        for name, v in zip(names, vals):
            if name == "cta" and not 0 <= v < num_ctas:
                raise ValueError(f"line {n}: CTA {v} does not exist: this layout has {num_ctas} CTAs (0 to {num_ctas - 1})")
            if name == "parity" and v not in (0, 1):
                raise ValueError(f"line {n}: a parity is 0 or 1, got {v}")
            if name in ("count", "bytes") and v < 1:
                raise ValueError(f"line {n}: {name} must be positive, got {v}")
        if word == "init" and ops and any(o[1] == "init" for o in ops):
            raise ValueError(f"line {n}: init once, before the other operations (this stepper has one barrier array)")
        ops.append((n, word, vals))
    if ops and ops[0][1] != "init":
        raise ValueError(f"line {ops[0][0]}: start with `init COUNT` (a barrier is initialised before use)")
    return ops


@dataclass
class BarrierState:
    """Where a barrier script stands after ``step`` operations."""
    bases: list
    num_ctas: int
    groups: list                     # CTAs per barrier, leader first
    ops: list                        # (line, op, args) of the whole script
    step: int                        # operations run
    trace: list = field(default_factory=list)       # [i, cta, op, detail] rows from BarrierSim.trace
    barriers: list = field(default_factory=list)    # [leader, group, arrivals left / count, bytes left, phases done, parity]
    waiting: list = field(default_factory=list)     # [cta, parity, leader, since op] of waits that block now
    error: str | None = None         # what stopped the script (e.g. too many arrivals), else None

    @property
    def title(self) -> str:
        return (f"barrier layout {self.bases} ({self.num_ctas} CTAs, {len(self.groups)} barrier"
                f"{'s' if len(self.groups) != 1 else ''}): step {self.step} of {len(self.ops)}")


def barrier_steps(bases="[[0]]", script: str = HAND_OFF, step: int | None = None) -> BarrierState:
    """Run the first ``step`` operations of ``script`` (all of them if None) on
    :class:`BarrierSim` and report the state. Bad bases or a bad script
    raise ValueError; a script that breaks the barrier (more arrivals than its count) stops there
    and says so in ``error``."""
    bases = parse_bases(bases, "barrier layout", width=1)
    num_ctas = 1 << len(bases)
    model = BarrierLayoutModel.of(bases, num_ctas)
    ops = parse_script(script, num_ctas)
    step = len(ops) if step is None else max(0, min(int(step), len(ops)))
    sim = BarrierSim(model)
    state = BarrierState(bases, num_ctas, model.groups(), ops, step)
    blocked = []                     # [cta, parity, leader, op index, phases done when it blocked]
    for i, (line, op, args) in enumerate(ops[:step]):
        stuck = [b for b in blocked if op in ("arrive", "expect", "wait") and b[0] == args[0]
                 and sim.barriers[b[2]].phase == b[4]]
        if stuck:
            c, p, ld, at, _ = stuck[0]
            state.error = (f"operation {i + 1} (line {line}: {op} {' '.join(map(str, args))}): CTA {c} is still "
                           f"blocked in its wait of operation {at} (parity {p}) and cannot run anything else; "
                           "unless another CTA completes that phase, this is a deadlock")
            state.step = i
            break
        try:
            if op == "init":
                sim.init(args[0])
            elif op == "arrive":
                sim.arrive(args[0])
            elif op == "expect":
                sim.expect(args[0], args[1])
            elif op == "bytes":
                sim.bytes_arrive(args[0], args[1])
            elif op == "wait":
                cta, parity = args
                if not sim.wait(cta, parity):
                    leader = model.leader(cta)
                    blocked.append([cta, parity, leader, i + 1, sim.barriers[leader].phase])
        except RuntimeError as e:
            state.error = f"operation {i + 1} (line {line}: {op} {' '.join(map(str, args))}): {e}"
            state.step = i + 1
            break
    state.trace = [[i, cta, op, detail] for i, cta, op, detail in sim.trace]
    for g in state.groups:
        b = sim.barriers.get(g[0])
        if b is not None:
            state.barriers.append([g[0], ", ".join(map(str, g)), f"{b.pending} / {b.count}", b.tx, b.phase, b.phase & 1])
    state.waiting = [[c, p, ld, at] for c, p, ld, at, ph in blocked if sim.barriers[ld].phase == ph]
    return state
