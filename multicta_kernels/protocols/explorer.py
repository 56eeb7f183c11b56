"""The explorer: every interleaving (breadth first, with partial-order reduction) or random schedules, and the
shortest failing trace."""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

from ..core import validate
from .language import HEADER, Protocol, checkable
from .semantics import Model, op_text


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
            return (f"no deadlock, no phase overrun, no overwrite before release, no arrival after exit, {where} "
                    f"({self.states:,} states, {self.seconds:.2f} s)")
        return f"{self.kind} after {self.steps} steps: {self.message} ({self.states:,} states, {self.seconds:.2f} s)"

    def _repr_html_(self):
        import html
        head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in self.trace)
        trace = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if self.trace else ""
        return f"<p>{html.escape(self.protocol)}: {html.escape(str(self))}</p>" + trace


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
        if tr >= T:                           # a landing's exit conflict: see _stubborn
            r &= ~m.exit_bits
        for u in range(T):                    # future masks: (any mode, read or write, add or write)
            if u != tr and u not in out and st[u] < len(m.code[u]):
                f_any, f_rw, f_aw = m.future[u][st[u]]
                if w & f_any or a & f_rw or r & f_aw:
                    out.append(u)
        return out + [T + e for e in _pending(m, st) if T + e != tr and _conflict((r, a, w), m.events[e].objs)]
    if tr >= T:
        return [T + e for e in _pending(m, st) if m.events[tr - T].preds >> e & 1]
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
    exploring only the set loses no deadlock and no reachable failure).

    A landing also conflicts with the exit of the CTAs it lands in, which needs every thread there
    (with a cluster exit, every thread of the cluster) to finish. While one of those threads is in
    the set, its next op cannot run outside it, so none of them can exit first: one unfinished
    thread stands for all of them. Each seed's set gets the one (of the candidates) that adds the
    fewest steps; a blocked thread brings only what could unblock it."""
    en = set(enabled)
    memo = {}
    best = [None]
    left = [u for u in range(m.T) if st[u] < len(m.code[u])]

    def close(found, work, hits):
        while work and (best[0] is None or hits < len(best[0])):
            tr = work.pop()
            if tr not in memo:
                memo[tr] = _interferers(m, st, tr, en)
            for x in memo[tr]:
                if x not in found:
                    found.add(x)
                    work.append(x)
                    hits += x in en
        return found, hits

    def unmet(found):                      # a CTA some landing in the set lands in, whose exit nothing holds
        for x in found:
            if x >= m.T:
                for c in m.events[x - m.T].ctas:
                    tids = left if m.p.exit == "cluster" else [u for u in left if m.threads[u].cta == c]
                    if tids and not any(u in found for u in tids):
                        return tids
        return None

    for seed in enabled:
        found, hits = close({seed}, [seed], 1)
        need = unmet(found)
        while need is not None and (best[0] is None or hits < len(best[0])):
            options = [close(found | {u}, [u], hits + (u in en)) for u in need]
            found, hits = min(options, key=lambda fh: fh[1])
            need = unmet(found)
        if need is None and (best[0] is None or hits < len(best[0])):
            best[0] = found & en
            if len(best[0]) == 1:
                break
    return sorted(best[0])


def check(protocol: Protocol, depth: int | None = None, reduce: bool = True, max_states: int = 2_000_000) -> Result:
    """Explore every interleaving of ``protocol`` breadth-first (up to ``depth`` steps), with
    partial-order reduction unless ``reduce=False``, and return the first failure (one of the
    shortest among the schedules explored, with any step it can do without dropped; with
    ``reduce=False`` the shortest of all) or the all-clear. A search stopped at ``max_states``
    says so."""
    checkable(protocol)
    depth = validate.optional_count(depth, "depth", high=validate.MAX_LOOP)
    validate.boolean(reduce, "reduce")
    max_states = validate.count(max_states, "max_states", high=100_000_000)
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
            what = op_text(ev.op) + " lands"
            if ev.op.asynchronous == "mma" and not ev.lands:
                what = "mma completes"
            elif ev.op.asynchronous == "mma" and ev.what:
                what = ev.what.split(" of CTA")[0] + " lands"            # one commit, on one CTA
            cta, part = m.threads[ev.tid].cta, units[ev.op.asynchronous]
        st, _ = m.fire(st, tr, words)
        rows.append([len(rows) + 1, cta, part, what, "; ".join(x for x in words if x)])
    return rows


def simulate(protocol: Protocol, runs: int = 300, seed: int = 0) -> Result:
    """Random schedules, for protocols too big for every interleaving: a clean result is evidence,
    not proof. In each run every thread and every asynchronous unit (a thread's TMA, tensor core or
    stores) gets a random speed, and each step is drawn in proportion to the speeds of those that
    can move: a slow partition or a slow store is what exposes these bugs. Reports how many runs
    failed; the trace is the shortest failing run, with every step it can do without dropped."""
    checkable(protocol)
    runs = validate.count(runs, "runs", high=1_000_000)
    seed = validate.integer(seed, "seed")
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
