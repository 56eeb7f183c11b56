"""The semantics of the protocol language: PTX's mbarrier phases and byte counts, buffer versions and the
asynchronous landings (per receiver), as a state machine the explorer walks."""
from __future__ import annotations

from dataclasses import dataclass

from .language import INVALID, Op, Protocol, slot_label


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
    event: int = -1                 # an op: the first event it starts; an event: its own id
    events: tuple = ()              # an op: every event it starts (one per receiver of a multicast)
    preds: int = 0                  # an event: bitmask of the events to land first (MMAs and stores
                                    # complete in issue order; a commit lands after its MMA, and after
                                    # the same thread's earlier commits to the same barrier)
    ctas: tuple = ()                # an event: the CTAs it lands in (or reads from)
    what: str = ""                  # an event: what lands, for the trace
    commit: bool = False            # an event: one commit of an MMA, landing after the MMA completed
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
        self.inst_cta = [0] * B                                           # the CTA each barrier instance is in
        for (_, _, leader), k in self.inst.items():
            self.inst_cta[k] = leader
        self.tids_of = {c: tuple(tid for tid, t in enumerate(self.threads) if t.cta == c)
                        for c in range(protocol.num_ctas)}
        self.code, self.events, last, last_commit = [], [], {}, {}
        for tid, t in enumerate(self.threads):
            self.code.append([])
            for i, op in enumerate(t.ops):
                step = self._compile(tid, i, op)
                if op.asynchronous:
                    unit = (tid, op.asynchronous)
                    main = None
                    for lands, completes, reads, what in self._landings(op, step):
                        ev = _Step(op, tid, i, lands=lands, reads=reads, completes=completes, event=len(self.events),
                                   what=what)
                        if main is None and op.asynchronous in ("mma", "store"):
                            main = ev.event                                   # complete in issue order
                            ev.preds = 1 << last[unit] if unit in last else 0
                            last[unit] = ev.event
                        elif main is not None:
                            ev.preds, ev.commit = 1 << main, True             # a commit lands after its MMA
                        if op.asynchronous == "mma":
                            for inst, *_ in lands:                            # and in order on one barrier
                                if (tid, inst) in last_commit and last_commit[(tid, inst)] != main:
                                    ev.preds |= 1 << last_commit[(tid, inst)]
                                last_commit[(tid, inst)] = ev.event
                        ev.ctas = tuple(sorted({self.inst_cta[x[0]] for x in ev.lands} |
                                               {self.slot_key[k][0] for k, _ in ev.completes + ev.reads}))
                        self.events.append(ev)
                        step.events += (ev.event,)
                    step.event = step.events[0]
                self.code[tid].append(step)
        self.store_mask = [sum(1 << e.event for e in self.events if e.tid == tid and e.op.asynchronous == "store")
                           for tid in range(T)]
        self._holds()
        self._objects()

    def _inst(self, ref, cta):
        bar, slot = ref
        return self.inst[(bar.name, slot, bar.layout.leader(cta))]

    def _landings(self, op, step):
        """The asynchronous part of ``op`` as separate landings (lands, completes, reads, what): a
        multicast TMA load or CLC answer lands in each receiver on its own, in any order; an MMA
        completes (its reads end, its accumulator is written), then each of its commits arrives on
        each CTA on its own (every ``tcgen05.commit`` is an arrival of its own); a TMA store is one."""
        lands = tuple((self._inst(r, c), a, b, ph) for r, c, a, b, ph in op.lands)
        completes = self._slots(op.completes)
        whole = [(lands, completes, step.reads, "")]
        if op.asynchronous == "store" or len(op.lands) <= 1 and op.asynchronous != "tma":
            return whole
        if op.asynchronous == "mma":
            return [((), completes, step.reads, "")] + [
                ((x,), (), (), f"commit to {slot_label(r)} of CTA {c}") for x, (r, c, *_) in zip(lands, op.lands)]
        receivers = sorted({c for _, c, *_ in op.lands} | {w[0] for w in op.completes})
        if len(receivers) <= 1:
            return whole
        out = []
        for r in receivers:                                    # TMA multicast, CLC answer: per receiver
            mine = tuple(x for x, l in zip(lands, op.lands) if l[1] == r)
            done = tuple(x for x, w in zip(completes, op.completes) if w[0] == r)
            out.append((mine, done, (), f"in CTA {r}"))
        return out

    def exited(self, st, cta, running=None):
        """Has ``cta`` (possibly) exited in state ``st``: its threads (with a cluster exit, every
        thread of the cluster) have run their last op, ``running`` (the thread whose op this is) aside."""
        tids = range(self.T) if self.p.exit == "cluster" else self.tids_of[cta]
        return all(st[t] == len(self.code[t]) and t != running for t in tids)

    def _slots(self, entries):
        return tuple((self.slot[e[:3]], e[3]) for e in entries)

    def _compile(self, tid, i, op):
        cta = self.threads[tid].cta
        step = _Step(op, tid, i, reads=self._slots(op.reads), writes=self._slots(op.writes))
        if op.kind in ("arrive", "expect"):
            step.arrivals = tuple((self._inst(op.bar, c), 1, op.nbytes, op.phase) for c in op.targets)
        elif op.kind in ("wait", "invalidate") and op.bar[0].layout.leader(cta) == cta:   # the leader only
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
        * a thread's queue of stores (or MMAs), and each cluster barrier's k-th rendezvous;
        * each CTA's exit: a thread's last op adds to it (with a cluster exit, to every CTA's: last
          ops commute), an event landing in a CTA (or an arrival on another CTA, with per-CTA exits)
          reads it. (For an event's own stubborn set one unfinished thread is enough: see
          :func:`_interferers`.)

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
                if st.wait >= 0 and st.op.kind == "wait":    # (an invalidate names no phase)
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

        every = range(self.p.num_ctas)
        for tid, steps in enumerate(self.code):
            for st in steps:
                op = st.op
                r, a, w = arrivals(st.arrivals)
                if st.idx == len(steps) - 1:                  # the thread's last op: it may be the exit
                    a |= sum(o("exit", c) for c in (every if self.p.exit == "cluster" else (self.threads[tid].cta,)))
                if self.p.exit == "cta":
                    r |= sum(o("exit", self.inst_cta[inst]) for inst, *_ in st.arrivals)
                if op.kind == "invalidate" and st.wait >= 0:
                    w |= sum(o("bar", st.wait, j) for j in range(top.get(st.wait, 0) + 1))
                for k, v in self.freed_at.get((tid, st.idx), ()):
                    r |= o("slot", k, v)
                for k, v in st.reads:
                    r |= o("slot", k, v)
                w |= writes(st.writes, False) | writes(st.completes, True)
                if st.wait >= 0 and op.kind == "wait":
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
            r |= sum(o("exit", c) for c in ev.ctas)
            w |= writes(ev.completes, True)
            if ev.op.asynchronous in ("mma", "store") and not ev.commit:    # a commit's order: its preds
                w |= o("queue", ev.tid, ev.op.asynchronous)
            ev.objs = (r, a, w)
        self._bar_bits = {key[1:]: b for key, b in bits.items() if key[0] == "bar"}
        self.exit_bits = sum(b for key, b in bits.items() if key[0] == "exit")
        self.future = []                       # per pc: (any mode, read or write, add or write)
        for steps in self.code:
            fut, r, a, w = [(0, 0, 0)], 0, 0, 0
            for st in reversed(steps):
                for x in [st.objs] + [self.events[e].objs for e in st.events]:
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
            if not st[self.EV] & self.events[e].preds:
                out.append(self.T + e)
        return out

    def can_fire(self, st, tr):
        if tr < self.T:
            return st[tr] < len(self.code[tr]) and self._can_run(st, self.code[tr][st[tr]])
        ev = self.events[tr - self.T]
        return bool(st[self.EV] >> ev.event & 1) and not st[self.EV] & ev.preds

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

    def _bar(self, s, inst, arrivals, nbytes, phase, say, commit=False):
        """Arrivals and bytes on one barrier instance; its phase completes when both reach zero.
        ``commit``: a tcgen05 commit. On a barrier that counts several (one from each MMA that read a
        stage), commits are interchangeable: with receivers seeing a multicast commit at different
        times, another MMA's commit may complete the phase before the one meant for it, which then
        counts in the next. That is allowed one phase either way; whether a buffer was released too
        early is what the buffer checks decide."""
        i = self.BAR + 3 * inst
        name = self.inst_name[inst]
        if s[i] == INVALID:
            return ("arrival after invalidate", f"an arrival or bytes reach {name} after it was invalidated: its "
                                                "memory may hold something else by now")
        loose = commit and self.init_count[inst] > 1 and phase is not None and abs(s[i + 2] - phase) == 1
        if phase is not None and s[i + 2] != phase and not loose:
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
        for until, who in self.readers.get((k, v - 1), ()):          # (the reader first: the clearer story)
            if not self.released(s, until):
                return ("overwrite before release", f"{self.slot_name[k]} is overwritten (version {v}) before "
                                                    f"{who} released version {v - 1}")
        if busy or have != v - 1:
            why = "another write to it is in flight" if busy else f"it holds version {have}"
            return ("overwrite before release", f"{self.slot_name[k]} is written (version {v}) while {why}")
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
        if op.kind in ("wait", "invalidate"):
            if step.wait < 0:
                if say is not None:
                    say.append(f"not the leader: nothing to do (CTA {op.targets[0]} has the barrier)")
                return None
            i = self.BAR + 3 * step.wait
            if s[i] == INVALID:
                return ("arrival after invalidate", f"{self._who(step.tid)} uses {self.inst_name[step.wait]} after "
                                                    "it was invalidated")
            if op.kind == "invalidate":
                s[i] = INVALID
                if say is not None:
                    say.append(f"{self.inst_name[step.wait]}'s memory may be reused from here on")
                return None
            n = s[self.BAR + 3 * step.wait + 2]
            if say is not None:
                say.append(f"returns: {n} phase(s) completed")
            return self._phase_error(step, n)
        if say is not None and op.kind == "arrive" and not op.targets:
            say.append("not a sender: nothing to do")
        for inst, arrivals, nbytes, phase in step.arrivals:
            if self.exited(s, self.inst_cta[inst], running=step.tid):
                return self._after_exit(f"{self._who(step.tid)}'s arrival", self.inst_cta[inst], inst)
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
        for e in step.events:
            s[self.EV] |= 1 << e
        self._complete(s, step.completes)
        if say is not None:
            say.append(_describe(op))
        return None

    def _complete(self, s, writes):
        for k, v in writes:
            s[self.SLOT + 2 * k], s[self.SLOT + 2 * k + 1] = v, 0

    def _after_exit(self, what, cta, inst=None):
        where = f"on {self.inst_name[inst]}" if inst is not None else f"in CTA {cta}"
        how = ("every thread of the cluster has finished, so the exit cluster barrier may let CTA "
               f"{cta} exit first" if self.p.exit == "cluster" else f"every thread of CTA {cta} has finished")
        return ("arrival after exit", f"{what} lands {where} after {how}: nothing waits for it")

    def _land(self, s, ev, say):
        for c in ev.ctas:
            if self.exited(s, c):
                unit = {"tma": "TMA load", "mma": "commit" if ev.commit else "MMA", "store": "TMA store",
                        "clc": "CLC answer"}[ev.op.asynchronous]
                inst = next((x[0] for x in ev.lands if self.inst_cta[x[0]] == c), None)
                return self._after_exit(f"{self._who(ev.tid)}'s {unit}", c, inst)
        self._complete(s, ev.completes)
        if say is not None:
            say.append(_describe(ev.op, landed=True, what=ev.what))
        for inst, arrivals, nbytes, phase in ev.lands:
            err = self._bar(s, inst, arrivals, -nbytes, phase, say, commit=ev.op.asynchronous == "mma")
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
            if step and step.wait >= 0 and step.op.kind == "wait" and \
                    st[self.BAR + 3 * step.wait + 2] > step.op.phase + 1:
                return self._phase_error(step, st[self.BAR + 3 * step.wait + 2])
        return None

    def blocked(self, st):
        """(CTA, partition, what) of every unfinished thread, for a deadlock report."""
        out = []
        for tid, steps in enumerate(self.code):
            if st[tid] < len(steps):
                step = steps[st[tid]]
                what = op_text(step.op)
                if step.wait >= 0 and step.op.kind == "wait":
                    i = self.BAR + 3 * step.wait
                    what += f": {st[i + 2]} phase(s) completed, {st[i]} arrival(s)" + \
                        (f" and {st[i + 1]} B" if st[i + 1] else "") + " missing"
                out.append((self.threads[tid].cta, self.threads[tid].partition, what))
        return out


def op_text(op: Op) -> str:
    """The op column of a trace."""
    k = op.kind
    if k == "invalidate":
        return f"invalidate {slot_label(op.bar)}"
    if k in ("arrive", "expect", "wait"):
        extra = {"arrive": f" ({op.note})" if op.note else "", "expect": f" {op.nbytes} B", "wait": ""}[k]
        ph = "" if op.phase is None else f", phase {op.phase}" + (f" (parity {op.parity})" if k == "wait" else "")
        return f"{k} {slot_label(op.bar)}{extra}{ph}"
    if k in ("read", "write", "wgmma", "tma_store"):
        items = op.reads or op.writes
        what = ", ".join(sorted({f"{buf}[{s}] v{v}" for _, buf, s, v in items}))
        where = sorted({c for c, *_ in items})
        return f"{k} {what}" + (f" of CTA {_ctas(where)}" if k == "read" and len(where) > 1 else "")
    if k in ("tma_load", "st_async"):
        return f"{k} -> {slot_label(op.bar)}"
    if k == "mma":
        return f"mma -> {op.note}" if op.asynchronous else "mma"
    if k in ("store_wait", "wgmma_wait"):
        return f"{k}({op.n})"
    if k in ("cluster_arrive", "cluster_wait"):
        return f"{k} ({op.name})"
    if k == "try_cancel":
        return f"try_cancel -> slot {op.writes[0][2]}" if op.writes else "try_cancel"
    return k


def _describe(op, landed=False, what=""):
    """The detail column for an op, or for (one receiver's part of) its asynchronous part landing."""
    k = op.kind
    if k in ("tma_load", "st_async"):
        if not op.writes:
            return "another CTA of the multicast group issues it"
        parts = ", ".join(sorted({f"{b}[{s}] v{v}" for _, b, s, v in op.writes}))
        ctas = _ctas(sorted({c for c, *_ in op.writes}))
        if landed:
            return f"{parts} land {what}" if what else f"{parts} land in CTA {ctas}"
        return f"{parts} for CTA {ctas}: in flight"
    if k == "mma":
        if not op.asynchronous:
            return "the pair's leader issues it"
        if landed:
            if what:
                return what
            if not op.lands or len(op.lands) > 1:
                return "MMA done (its reads end; each commit arrives on its own)"
            return f"MMA done: commit to CTA {_ctas(sorted({c for _, c, *_ in op.lands}))}"
        return "reads " + ", ".join(sorted({f"{b}[{s}] v{v}" for _, b, s, v in op.reads})) + ": in flight"
    if k == "try_cancel":
        if not op.asynchronous:
            return "CTA 0 asks for the cluster"
        if landed:
            return f"the 16-byte answer lands {what}" if what else "the 16-byte answer lands in every CTA"
        return "answer in flight to every CTA"
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
