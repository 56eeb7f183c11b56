"""Reading PTX: instructions, censuses, excerpts, predicates, loops and how often each synchronisation runs.

Text in, facts out: nothing here compiles (see :mod:`multicta_kernels.lens.compiler`).
"""
from __future__ import annotations

import collections
import os
import re
from dataclasses import dataclass

from ..core import validate


_DEBUG = re.compile(r"^\s*(\.loc\s|\.file\s|//)")


def code(ptx: str) -> str:
    """``ptx`` without its source locations and debug sections: no ``.loc`` or ``.file`` lines, no comments, no
    ``.section .debug_*`` blocks. Triton's cache key ignores where a kernel's source file lies, while the PTX it
    caches names that file, so two checkouts of the book can get each other's PTX: compare this, not the text."""
    out, skipping = [], False
    for line in ptx.splitlines():
        if line.strip().startswith(".section") and ".debug" in line:
            skipping = True
            continue
        if skipping:
            if line.strip() == "}":
                skipping = False
            continue
        if not _DEBUG.match(line):
            out.append(line.split("//")[0].rstrip())
    out = [ln for ln in out if ln]
    # a label no instruction names marks a source location for the debug sections (``$L__tmp7:``): where it lies
    # says nothing about the code, and its number shifts when a statement that emits no code moves
    text = "\n".join(ln for ln in out if not ln.strip().endswith(":") or ln.strip()[:-1].startswith("$L__BB"))
    used = set(re.findall(r"\$L__\w+", text))
    return "\n".join(ln for ln in out if not (ln.strip().endswith(":") and ln.strip()[:-1].startswith("$L__tmp")
                                           and ln.strip()[:-1] not in used))


def same_code(a: str, b: str) -> bool:
    """Whether two PTX texts are the same kernel: equal :func:`code`."""
    return code(a) == code(b)


# Instructions that read their source registers and write their first operand, and touch nothing else: no memory,
# no other thread, no state that changes by itself (``%clock`` and ``%globaltimer`` do; a ``.cc`` carry is state).
_PURE = {"mov", "add", "sub", "mul", "mad", "div", "rem", "shl", "shr", "and", "or", "xor", "not", "cnot", "cvt",
         "cvta", "setp", "selp", "min", "max", "neg", "abs", "bfe", "bfi", "prmt", "popc", "clz", "brev", "lop3",
         "fma", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "copysign", "set"}
_END = {"bra", "ret", "exit", "trap", "call", "brx"}
_REG = re.compile(r"%[A-Za-z_][\w.]*")


# A load of a kernel's own parameter: the PTX ISA ("Kernel Function Parameters") makes them read-only, unlike a
# device function's, so such a load reads a value no thread can change: register arithmetic, where both programs
# are one ``.entry`` with no ``.func`` and no ``st.param`` (``_PARAMS_FIXED`` in ``pending``, :func:`_same_schedule`).
_PARAMS_FIXED = "<kernel parameters: read-only>"          # not a register: _REG never matches it
_KERNEL_PARAM = re.compile(r"^ld\.param(\.v\d)?\.[a-z]\d+\s+[^;\[]+,\s*\[\w+_param_\d+(\+\d+)?\];$")


def _pure(text: str, pending=frozenset()) -> bool:
    """Whether one instruction only computes registers: in _PURE, unpredicated, no carry, no clock, one instruction
    on its line, and no register that an asynchronous operation of the kernel writes or reads (``pending``: a
    wgmma accumulator or a tcgen05.ld destination is not ready until its wait, which names no register)."""
    parts = text.split(None, 1)
    op = parts[0].rstrip(";")
    if _KERNEL_PARAM.match(text):
        return _PARAMS_FIXED in pending and not pending & set(_REG.findall(text))
    return (op.split(".")[0] in _PURE and ".cc" not in op and not text.startswith("@") and text.count(";") == 1
            and not any(v in text for v in ("%clock", "%globaltimer", "%warpid", "%smid", "%pm"))
            and not (pending and pending & set(_REG.findall(text))))


def _first_operand(text: str) -> tuple:
    """(the destination operand, the rest) of an instruction: the first comma outside braces splits them."""
    parts = text.split(None, 1)
    ops = parts[1] if len(parts) > 1 else ""
    depth = 0
    for k, ch in enumerate(ops):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and not depth:
            return ops[:k], ops[k + 1:]
    return ops, ""


_ASYNC = ("wgmma.mma_async", "tcgen05.ld", "tcgen05.st")


def _pending(ptx: str) -> frozenset:
    """The registers an asynchronous operation of ``ptx`` writes or reads after it issues (see :func:`_pure`)."""
    return frozenset(r for line in code(ptx).splitlines() if any(a in line for a in _ASYNC) for r in _REG.findall(line))


def _blocks(ptx: str):
    """The straight-line blocks of :func:`code`: runs of instructions that no label, directive, brace or branch
    interrupts; everything else as a block of its own, and every instruction inside a ``{ }`` scope within the
    function's body (inline assembly, whose ``.reg`` names this reader does not follow) as well."""
    block, depth = [], 0
    for line in code(ptx).splitlines():
        text = line.strip()
        if _SKIP.match(line) or depth > 1:        # depth 1: the function's body; deeper: an inline-asm scope
            if block:
                yield block
            block = []
            yield [text]
            depth += _scope_change(text)
            continue
        block.append(text)
        parts = text.split(None, 1)
        op = (parts[1] if text.startswith("@") and len(parts) > 1 else text).split(None, 1)[0]
        if op.rstrip(";").split(".")[0] in _END:
            yield block
            block = []
    if block:
        yield block


# An asynchronous bulk copy from global into shared memory that completes on an mbarrier (a TMA load, multicast
# or not, one CTA's or a pair's): it writes no register. In the PTX ISA ("cp.async.bulk.tensor") the copy is a weak
# memory operation of the async proxy whose complete-tx on the mbarrier has release semantics: its bytes are
# ordered for a reader by that completion ("mbarrier": a phase completes once the pending arrivals and the tx-count
# reach zero, a count of bytes in any order), not by where the thread issued it.
_TMA_LOAD = re.compile(r"^(@!?%\w+\s+)?cp\.async\.bulk(\.tensor\.\dd)?(\.cta_group::\d)?\.shared::c(ta|luster)\.global\."
                       r"\S*mbarrier::complete_tx::bytes\S*\s[^;]*;$")


def _tma_load(text: str) -> bool:
    return bool(_TMA_LOAD.match(text))


def _canonical(block: list, pending=frozenset()) -> list:
    """One fixed order of a straight-line block that keeps every dependent pair in the block's order: a pure
    instruction after the last writer and the readers of what it reads or writes; everything else (memory,
    fences, barriers, synchronisation, predicated instructions) also after every earlier one of its kind, and
    treated as reading and writing each register it names (a TMA load, :data:`_TMA_LOAD`, as reading them only).
    Of the instructions free to go next, the smallest text goes first, so two blocks that differ only in the order
    of independent instructions get the same list."""
    import heapq
    preds = [set() for _ in block]
    last_write, readers, last_effect = {}, {}, None
    for i, text in enumerate(block):
        regs = _REG.findall(text)
        if _pure(text, pending):
            first, rest = _first_operand(text)
            writes, reads = set(_REG.findall(first)), set(_REG.findall(rest))
        else:
            writes, reads = (set(), set(regs)) if _tma_load(text) else (set(regs), set(regs))
            if last_effect is not None:
                preds[i].add(last_effect)
            last_effect = i
        for r in reads | writes:
            if r in last_write:
                preds[i].add(last_write[r])
        for r in writes:
            preds[i].update(readers.get(r, ()))
        for r in reads:
            readers.setdefault(r, set()).add(i)
        for r in writes:
            last_write[r] = i
            readers[r] = set()
    preds = [p - {i} for i, p in enumerate(preds)]
    succs = [[] for _ in block]
    for i, p in enumerate(preds):
        for j in p:
            succs[j].append(i)
    left = [len(p) for p in preds]
    ready = [(block[i], i) for i in range(len(block)) if not left[i]]
    heapq.heapify(ready)
    out = []
    while ready:
        text, i = heapq.heappop(ready)
        out.append(text)
        for j in succs[i]:
            left[j] -= 1
            if not left[j]:
                heapq.heappush(ready, (block[j], j))
    return out


def _fence(text: str) -> bool:
    return text.split(None, 1)[0].startswith("fence.") and text.count(";") == 1


def same_schedule(kernel: str, other: str) -> str:
    """Why ``other`` does what ``kernel`` does, or "" if this cannot tell: "the same code" (:func:`same_code`);
    "the same instructions, only independent ones in another order" (every straight-line block holds the same
    instructions, each pair that shares a register or touches memory, a barrier or a fence in the same order, so
    no thread can tell the two apart); or "the kernel's code and N more fences" (the same after deleting fences
    that ``kernel`` does not have: in the PTX ISA's "Memory Consistency Model" a fence only adds to the orders an
    execution must respect, "membar/fence" and "Causality Order", so every execution ``other`` allows, ``kernel``
    allows too: slower at most); or the same instructions up to barriers that order nothing more: "a CTA barrier
    twice in a row counted once", "the init sync moved across N weak loads, stores, warp
    exchanges and CTA barriers", "a relaxed cluster barrier more before any branch or wait" (:func:`_barrier_rules`, with the PTX ISA
    sections each rests on). Where the compiler numbered the registers otherwise, each of these is tried once more on
    ``other`` with its virtual registers renamed one to one (:func:`register_renaming`, up to three guesses in a row,
    each on the last one's text: a composition of one-to-one renamings is one), the answer then ending in ",
    registers renamed"; a renaming that is not one to one is no proof, and then the answer is ""."""
    validate.text(kernel, "kernel")
    validate.text(other, "other")
    if _unfollowed(kernel) or _unfollowed(other):
        return ""
    why = _same_schedule(kernel, other)
    if why:
        return why
    renamed = code(other)
    for _ in range(3):          # a guess pairs registers of one colour by first appearance: a second may mend it
        renaming = register_renaming(kernel, renamed)
        if not renaming or all(a == b for a, b in renaming.items()):
            break
        renamed = _VREG.sub(lambda m: renaming[m.group(0)], renamed)
        why = _same_schedule(kernel, renamed)
        if why:
            return f"{why}, registers renamed"
    return ""


_VREG = re.compile(r"%(?:p|rs|rd|r|fd|f|hh|h|rq)\d+\b")     # LLVM's virtual registers; %tid.x, %clock64, %pm0 are none


def register_renaming(kernel: str, other: str):
    """{register of ``other``: register of ``kernel``}, one to one and class to class (``%r`` to ``%r``, ``%p`` to
    ``%p``, ...), that may turn ``other`` into ``kernel``, or None when none can: a register's colour starts as its
    class and is refined, round after round, by the lines it stands in (each line with its registers' colours and
    its place among them) until no colour splits; registers of one colour are paired in order of first appearance.
    Only a guess: :func:`same_schedule` proves the renamed text. A virtual register is thread-private storage whose
    name means nothing (PTX ISA, "Registers"), so a one-to-one renaming is the same program."""
    validate.text(kernel, "kernel")
    validate.text(other, "other")
    texts = [code(kernel).splitlines(), code(other).splitlines()]
    if any(_scoped_registers(t) for t in texts):
        return None
    lines = [[(_VREG.sub("%", ln), _VREG.findall(ln)) for ln in t] for t in texts]
    colour = [{r: re.match(r"%[a-z]+", r).group(0) for _, regs in side for r in regs} for side in lines]
    if collections.Counter(colour[0].values()) != collections.Counter(colour[1].values()):
        return None
    distinct = len(set(colour[0].values()))
    for _ in range(200):
        new = []
        for side, col in zip(lines, colour):
            seen = collections.defaultdict(list)
            for template, regs in side:
                here = hash((template, tuple(col[r] for r in regs)))
                for pos, r in enumerate(regs):
                    seen[r].append((here, pos))
            new.append({r: hash((col[r], tuple(sorted(seen[r])))) for r in col})
        if collections.Counter(new[0].values()) != collections.Counter(new[1].values()):
            return None
        colour, before, distinct = new, distinct, len(set(new[0].values()))
        if distinct == before:
            break
    order = [list(dict.fromkeys(r for _, regs in side for r in regs)) for side in lines]
    groups = [collections.defaultdict(list) for _ in lines]
    for g, regs, col in zip(groups, order, colour):
        for r in regs:
            g[col[r]].append(r)
    renaming = {o: k for c in groups[1] for o, k in zip(groups[1][c], groups[0][c])}
    if any(re.match(r"%[a-z]+", o).group(0) != re.match(r"%[a-z]+", k).group(0) for o, k in renaming.items()):
        return None                                       # colours collided across classes: no guess
    written = [{r for ln in t for r in _destination(ln.strip())} for t in texts]
    if any(o != k and (o not in written[1] or k not in written[0]) for o, k in renaming.items()):
        return None                # a register no line writes holds whatever it held: its name is its meaning
    return renaming


def _scoped_registers(lines) -> bool:
    """Whether an inline-asm scope (depth > 1) declares %-registers: ``{ .reg .b32 %r<5>; ... }`` hides the
    outer %r0-%r4 inside it, so a renaming across that boundary would change which register a line names (a
    review's reproducer: the same text up to names, and ptxas stores 1 where the kernel stores 5)."""
    depth = 0
    for line in lines:
        text = line.strip()
        if depth > 1 and text.startswith(".reg") and "%" in text:
            return True
        depth += _scope_change(text)
    return False


def _scope_change(text: str) -> int:
    """How a line that is no instruction (a brace, a directive such as ``.visible .entry k() {``) moves the scope
    depth; an instruction's braces are a vector operand, not a scope."""
    return text.count("{") - text.count("}") if _SKIP.match(text) else 0


def _unfollowed(ptx: str) -> bool:
    """What this reader cannot follow, so that it proves nothing about ``ptx``: a ``/* */`` comment (``code`` drops
    only ``//`` ones) or a register declared without a ``%`` in the function's body (``.reg .pred p;``: its reads and
    writes are invisible to the register tracking; inside an inline-asm scope each line is a block of its own)."""
    if "/*" in ptx:
        return True
    depth = 0
    for line in code(ptx).splitlines():
        text = line.strip()
        if depth <= 1 and text.startswith(".reg"):    # deeper, in an inline-asm scope: each line its own block
            names = [t.strip(" ;") for t in text[4:].replace(",", " ").split() if not t.startswith(".")]
            if any(n and not n.startswith("%") for n in names):
                return True
        depth += _scope_change(text)
    return False


def _same_schedule(kernel: str, other: str) -> str:
    if same_code(kernel, other):
        return "the same code"
    pending = _pending(kernel) | _pending(other)
    if all(".func" not in code(t) and "st.param" not in code(t) for t in (kernel, other)):
        pending = pending | {_PARAMS_FIXED}
    a = [_canonical(blk, pending) for blk in _blocks(kernel)]
    b = [_canonical(blk, pending) for blk in _blocks(other)]
    if a == b:
        return "the same instructions, only independent ones in another order"
    import itertools
    more = _fenced_blocks(a, b, pending) if len(a) == len(b) else 0
    if more:
        return f"the kernel's code and {more} more fence{'s' if more > 1 else ''}"
    if len(a) == len(b):
        sa = [_canonical(_loads_sorted(blk, pending), pending) for blk in _blocks(kernel)]
        sb = [_canonical(_loads_sorted(blk, pending), pending) for blk in _blocks(other)]
        if sa == sb:
            return "the same instructions, TMA loads issued in another order"
    why = _barrier_rules(kernel, other, pending)
    if why:
        return why
    ka = collections.Counter(t for blk in a for t in blk)
    kb = collections.Counter(t for blk in b for t in blk)
    extra = kb - ka
    if not extra or ka - kb or not all(_fence(t) for t in extra):
        return ""
    flat = [(i, j) for i, blk in enumerate(b) for j, t in enumerate(blk) if t in extra]
    n = sum(extra.values())
    combos = itertools.combinations(flat, n)
    for drop in itertools.islice(combos, 500):
        drop = set(drop)
        if collections.Counter(b[i][j] for i, j in drop) != extra:
            continue
        trimmed = [[t for j, t in enumerate(blk) if (i, j) not in drop] for i, blk in enumerate(b)]
        trimmed = [blk for blk in trimmed if blk]
        if [_canonical(x, pending) for x in trimmed] == [blk for blk in a if blk]:
            return f"the kernel's code and {n} more fence{'s' if n > 1 else ''}"
    return ""


# --------------------------------------------------------------- barriers that order nothing more
# Three relations between a kernel and another program that differ only in barriers, each resting on the PTX ISA:
#
# * "bar, barrier": ``bar.sync`` is ``barrier.sync.aligned``, which every thread of the CTA executes at the same
#   instruction, and its completion orders each participant's earlier memory accesses before every participant's
#   later ones. Of two such barriers with no instruction but register arithmetic between them, the second orders
#   no access the first does not: one of them is the same program. (A non-aligned ``barrier.sync 0`` may pair
#   with one at another instruction on another path: never counted once.)
# * "barrier.cluster": ``.relaxed`` on ``barrier.cluster.arrive`` gives "no memory ordering and visibility
#   guarantees" for the accesses before it; "membar/fence": ``fence.mbarrier_init`` orders only the thread's
#   earlier ``mbarrier.init``. So the init sync Triton and ``sync_inits()`` emit (``fence.mbarrier_init``, a relaxed
#   arrive, the wait) orders the inits and nothing else, where no other fence precedes it (a release fence before a
#   relaxed arrive makes a release pattern): moved across weak loads and stores of global or this CTA's shared
#   memory, register arithmetic and aligned barriers of the whole CTA (never a named or predicated barrier, a wait
#   some warps make and others not), it still stands after every init and before every use, it reads registers
#   written once, before it, and every thread still meets it once.
# * a relaxed cluster barrier more, in the entry's first straight-line block, after nothing but register
#   arithmetic, and before any other cluster barrier: every thread reaches it (no branch, no wait, no call before
#   it), it orders no memory access, and every later barrier pairs as before, one phase on: slower at most.
#
# Both cluster rules stand where the barrier is every thread's first (a wait pairs with the arrivals of its phase,
# so the arrivals it pairs with are all relaxed): the barrier more lies before any other, and the init sync moved is
# the first cluster barrier in both programs, in no loop and skipped by no branch, in a program with no call and no
# ``.func`` (:func:`_first_cluster_barrier`). A review's reproducers of each condition: tests/test_lens.py.

_CTA_BARRIER = ("bar.sync 0;", "barrier.sync.aligned 0;")   # aligned, the whole CTA: not barrier.sync 0 (see above)
_RELAXED_PAIR = ["barrier.cluster.arrive.relaxed.aligned;", "barrier.cluster.wait.aligned;"]
_WEAK_ACCESS = ("ld.global.", "st.global.", "ld.shared.", "st.shared.")
_STRONG = (".acquire", ".release", ".relaxed", ".volatile", ".mmio", ".cta", ".cluster", ".gpu", ".sys")
_WARP_OPS = ("elect.sync", "shfl.sync", "redux.sync", "vote.")


def _one_cta_barrier(block: list, pending) -> list:
    """``block`` without each CTA barrier whose previous instruction other than register arithmetic is one too."""
    out, last = [], None
    for t in block:
        if _squeezed(t) in _CTA_BARRIER and last in _CTA_BARRIER:
            continue
        out.append(t)
        if not _pure(t, pending):
            last = _squeezed(t)
    return out


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def _unguarded(text: str) -> str:
    return text.split(None, 1)[1] if text.startswith("@") and " " in text else text


def _crossable(text: str, pending) -> bool:
    """An instruction an init sync may cross: register arithmetic (predicated or not), a warp's register exchange,
    an unpredicated aligned barrier of the whole CTA, or a weak load or store (no .acquire, .release, .relaxed,
    .volatile, no scope) of this CTA's shared memory or of global memory. Not a named or predicated barrier (a
    wait some warps make and others do not: moved across a cluster barrier, a deadlock)."""
    body = _unguarded(text)
    if text.count(";") != 1 or "::cluster" in body or "mbarrier" in body:
        return False
    if _squeezed(text) in _CTA_BARRIER or _pure(body, pending) or body.startswith(_WARP_OPS):
        return True
    op = body.split(None, 1)[0]
    return op.startswith(_WEAK_ACCESS) and not any(q in op for q in _STRONG)


def _init_sync(block: list) -> tuple:
    """(start, stop) of the init sync in ``block``: an optional ``elect.sync`` and ``and.pred``, then
    ``fence.mbarrier_init.release.cluster`` (predicated or not), a relaxed cluster arrive and the wait; or None."""
    for i, t in enumerate(block):
        if _unguarded(t).startswith("fence.mbarrier_init.release.cluster") and \
                [_squeezed(x) for x in block[i + 1:i + 3]] == _RELAXED_PAIR:
            start = i
            if start and block[start - 1].startswith("and.pred"):
                start -= 1
            if start and block[start - 1].startswith("elect.sync"):
                start -= 1
            return start, i + 3
    return None


_BRA = re.compile(r"\bbra(?:\.uni)?\s+([\w$]+)\s*;")


def _followable_control(lines) -> bool:
    """Whether ``lines`` (a function's code) hold no call, no indirect branch, no ``.func`` and no branch this reader
    cannot follow: then the cluster barriers it sees are all the program's, and its first block is the entry's."""
    for t in lines:
        if re.search(r"\b(call|brx)\b", t) or t.startswith(".func") or " .func" in t:
            return False
        if re.search(r"\bbra\b", t) and not _BRA.search(t):
            return False
    return True


def _first_cluster_barrier(ptx: str) -> bool:
    """Whether the first cluster barrier of ``ptx`` is an init sync (:func:`_init_sync`) that no branch skips and no
    loop holds (each branch to the nearest label of its name, so inline assembly's local ``spin:`` loops count), with
    no fence before it (a release fence before a relaxed arrive makes it a release: the PTX ISA's own example), no call
    and no ``.func``: then it is every thread's first cluster barrier, and a wait pairs with the arrivals of its
    phase ("barrier.cluster"), so every arrival it pairs with is this relaxed one."""
    lines = [ln.strip() for ln in code(ptx).splitlines()]
    if not _followable_control(lines):
        return False
    at = next((i for i, t in enumerate(lines) if "barrier.cluster." in t or "fence.mbarrier_init" in t), None)
    if at is None or _init_sync(lines[at:at + 3]) != (0, 3):
        return False
    if any("fence." in t or "membar" in t for t in lines[:at]):
        return False
    labels = collections.defaultdict(list)
    for i, t in enumerate(lines):
        m = re.match(r"^([\w$]+):", t)
        if m:
            labels[m.group(1)].append(i)
    for i, t in enumerate(lines):
        m = _BRA.search(t)
        if m and labels.get(m.group(1)):
            j = min(labels[m.group(1)], key=lambda n: abs(n - i))
            if min(i, j) < at < max(i, j):
                return False
        elif m:
            return False                                    # a branch to no label this reader sees
    return True


def _destination(text: str) -> set:
    """The registers an instruction writes: those of its first operand, unless that is an address (``[...]``) or
    ``_``; its guard predicate only reads. (Every PTX instruction that writes registers names them first.)"""
    first = _first_operand(_unguarded(text))[0].strip()
    return set() if first.startswith("[") or first == "_" else set(_REG.findall(first))


def _barrier_rules(kernel: str, other: str, pending) -> str:
    """Why ``other`` does what ``kernel`` does up to the barriers of the comment above, or ""."""
    ka, kb = list(_blocks(kernel)), list(_blocks(other))
    if len(ka) != len(kb):
        return ""
    da = [_one_cta_barrier(x, pending) for x in ka]
    db = [_one_cta_barrier(x, pending) for x in kb]
    removed = [sum(map(len, x)) - sum(map(len, y)) for x, y in ((ka, da), (kb, db))]
    deduped = "a CTA barrier twice in a row counted once" if removed[0] != removed[1] else ""
    ca = [_canonical(x, pending) for x in da]

    def said(what):
        return "the same instructions, " + ", ".join(p for p in (deduped, what) if p)
    if deduped and ca == [_canonical(x, pending) for x in db]:
        return said("")
    # a relaxed cluster barrier more in other's first block of instructions, before any other cluster barrier
    first = next((k for k, x in enumerate(db) if not _SKIP.match(x[0])), None)
    straight = all(_followable_control([ln.strip() for ln in code(t).splitlines()]) for t in (kernel, other))
    targets = {m.group(1) for t in (kernel, other) for ln in code(t).splitlines() for m in [_BRA.search(ln)] if m}
    labelled = first is not None and any(x[0].strip()[:-1] in targets for x in db[:first] + da[:first]
                                         if re.match(r"^[\w$]+:$", x[0].strip()))   # a loop head: branched to
    if first is not None and straight and not labelled:
        x = db[first]
        cluster = [i for i, t in enumerate(x) if "barrier.cluster." in t]
        spots = [i for i in range(len(x) - 1) if [_squeezed(y) for y in x[i:i + 2]] == _RELAXED_PAIR
                 and i == cluster[0] and all(_pure(t, pending) for t in x[:i])]   # nothing before it waits
        for i in spots:
            trimmed = db[:first] + [x[:i] + x[i + 2:]] + db[first + 1:]
            if [_canonical(y, pending) for y in trimmed] == ca:
                return said("a relaxed cluster barrier more before any branch or wait")
    # the init sync moved within its block, across no mbarrier, cluster, fence or asynchronous operation
    differ = [k for k, (x, y) in enumerate(zip(da, db)) if _canonical(x, pending) != _canonical(y, pending)]
    if len(differ) != 1:
        return ""
    k = differ[0]
    if not (_first_cluster_barrier(kernel) and _first_cluster_barrier(other)):
        return ""
    sides, groups = [], []
    for blocks in (da, db):
        span = _init_sync(blocks[k])
        if not span:
            return ""
        i, j = span
        groups.append(blocks[k][i:j])
        before = [t for blk in blocks[:k] for t in blk] + blocks[k][:i]
        if any("barrier.cluster." in t or "fence.mbarrier_init" in t for t in before):
            return ""                                       # not the program's first cluster barrier
        rest = blocks[k][:i] + blocks[k][j:]
        own = {r for t in blocks[k][i:j] if t.startswith(("elect.sync", "and.pred"))
               for r in _REG.findall(_first_operand(t)[0])}
        elsewhere = [t for n, blk in enumerate(blocks) for t in (rest if n == k else blk)]
        if own & set(_REG.findall(" ".join(elsewhere))):
            return ""                                       # the sync's predicate read elsewhere: not its own
        for r in set(_REG.findall(" ".join(blocks[k][i:j]))) - own:    # what the sync reads: one writer, before it
            writers = [t for t in elsewhere if r in _destination(t)]
            if len(writers) != 1 or writers[0] not in before:
                return ""
        sides.append((rest, sum(not _pure(t, pending) for t in blocks[k][:i])))
    if groups[0] != groups[1]:
        return ""                                           # the sync itself must be the kernel's (its guard too)
    (ra, pa), (rb, pb) = sides
    effects = [t for t in ra if not _pure(t, pending)]
    if _canonical(ra, pending) != _canonical(rb, pending) or effects != [t for t in rb if not _pure(t, pending)]:
        return ""
    lo, hi = sorted((pa, pb))
    if not all(_crossable(t, pending) for t in effects[lo:hi]):
        return ""
    return said(f"the init sync moved across {hi - lo} weak loads, stores, warp exchanges and CTA barriers")


def _warp_op(text: str) -> bool:
    """``elect.sync`` and ``shfl.sync``: a warp's lanes compute registers together, touching no memory."""
    return text.startswith(("elect.sync", "shfl.sync")) and text.count(";") == 1


_BARRIERS = ("bar.sync", "barrier.sync", "bar.warp.sync")


def _load_groups(block: list, pending) -> list:
    """(start, stop) of each run of ``block`` that is a barrier (Triton puts a ``bar.sync``, or in a one-warp
    partition a ``bar.warp.sync``, before each load), then register arithmetic, ``elect.sync``, ``shfl.sync`` and
    one or more TMA loads (:data:`_TMA_LOAD`; one box may take several), up to the next barrier or the last load."""
    groups, start, last = [], None, None

    def close():
        if start is not None and last is not None:
            groups.append((start, last + 1))
    for j, text in enumerate(block):
        if text.startswith(_BARRIERS):
            close()
            start, last = j, None
        elif start is not None and _tma_load(text):
            last = j
        elif start is not None and not (_pure(text, pending) or _warp_op(text)):
            close()
            start = None
    close()
    return groups


def _written(lines, pending) -> set:
    out = set()
    for t in lines:
        if _pure(t, pending) or _warp_op(t):
            out |= set(_REG.findall(_first_operand(t)[0]))
        elif not _tma_load(t):
            out |= set(_REG.findall(t))
    return out


def _hoisted(lines: list, pending) -> tuple:
    """(the pure instructions of ``lines`` that can go first, the rest in order): one can where it reads no
    register an earlier line that stays computes, and writes none an earlier line that stays names."""
    front, rest, bound, named = [], [], set(), set()
    for t in lines:
        if _pure(t, pending):
            first, src = _first_operand(t)
            w, r = set(_REG.findall(first)), set(_REG.findall(src))
            if not (r & bound) and not (w & named):
                front.append(t)
                continue
            bound |= w
        else:
            bound |= _written([t], pending)
        rest.append(t)
        named |= set(_REG.findall(t))
    return front, rest


def _loads_sorted(block: list, pending) -> list:
    """``block`` with each run of neighbouring load groups (:func:`_load_groups`) in one fixed order (by the load's
    text), its arithmetic that depends on none of them first, where no group of the run then writes a register
    another names. Each group is a barrier, then one thread's TMA load: the PTX ISA orders a load's reads and writes
    only through its completion on an mbarrier ("cp.async.bulk.tensor": complete-tx; "mbarrier": the tx-count, a
    sum of bytes), not by where it was issued among the CTA's barriers, and the barriers between the loads order no
    other memory operation of theirs."""
    groups, out, k = _load_groups(block, pending), [], 0
    runs = []
    for g in groups:
        if runs and runs[-1][-1][1] == g[0]:
            runs[-1].append(g)
        else:
            runs.append([g])
    for run in runs:
        if len(run) < 2:
            continue
        front, rest = _hoisted(block[run[0][0]:run[-1][1]], pending)
        parts = []
        for t in rest:
            if t.startswith(_BARRIERS):
                parts.append([])
            parts[-1].append(t)
        names = [set(_REG.findall(" ".join(p))) for p in parts]
        writes = [_written(p, pending) for p in parts]
        if any(writes[i] & names[j] for i in range(len(parts)) for j in range(len(parts)) if i != j):
            continue
        key = lambda p: next(t for t in p if _tma_load(t))                       # noqa: E731
        out += block[k:run[0][0]] + front + [t for p in sorted(parts, key=key) for t in p]
        k = run[-1][1]
    return out + block[k:]


def _fences_skipped(x: list, y: list, pending):
    """The places of the fences to delete from canonical block ``y`` so that its instructions that are not pure
    (kept in order by :func:`_canonical`) are ``x``'s, matched in order; None if that takes more than fences."""
    want = [t for t in x if not _pure(t, pending)]
    drop, i = [], 0
    for j, t in enumerate(y):
        if _pure(t, pending):
            continue
        if i < len(want) and t == want[i]:
            i += 1
        elif _fence(t):
            drop.append(j)
        else:
            return None
    return drop if i == len(want) else None


def _fenced_blocks(a: list, b: list, pending) -> int:
    """How many fences more ``b`` holds than ``a``, block by block (canonical blocks, as many on each side), where
    each block of ``b`` is its partner of ``a`` once those fences are deleted; 0 where one is not. A fence is no
    label or branch, so fences more leave the blocks where they are, and searching each block alone stays small
    (an epilogue's subtiles give a fence more in each of eight blocks: far too many ways to pick eight of all)."""
    import itertools
    n = 0
    for x, y in zip(a, b):
        if x == y:
            continue
        cx, cy = collections.Counter(x), collections.Counter(y)
        extra = cy - cx
        if not extra or cx - cy or not all(_fence(t) for t in extra):
            return 0
        k = sum(extra.values())
        spots = [j for j, t in enumerate(y) if t in extra]
        tries = itertools.chain([_fences_skipped(x, y, pending)], itertools.combinations(spots, k))
        if not any(drop is not None and collections.Counter(y[j] for j in drop) == extra
                   and _canonical([t for j, t in enumerate(y) if j not in drop], pending) == x
                   for drop in itertools.islice(tries, 501)):
            return 0
        n += k
    return n


_SKIP = re.compile(r"^\s*($|//|\.|\{|\}|\)|\(|[\w$]+:)")


def instructions(ptx: str):
    """Yield (line number, opcode, line) for every PTX instruction."""
    for no, line in enumerate(ptx.splitlines(), 1):
        if _SKIP.match(line):
            continue
        text = line.strip()
        if text.startswith("@"):
            text = text.split(None, 1)[1] if " " in text else ""
        op = text.split(None, 1)[0].rstrip(";") if text else ""
        if op:
            yield no, op, line


def census(ptx: str, patterns=None) -> dict:
    """Count instructions: by opcode, or (with ``patterns``, a list of substrings) lines containing each substring."""
    validate.text(ptx, "ptx")
    if patterns is not None:
        if isinstance(patterns, str) or not isinstance(patterns, (list, tuple, set, frozenset, dict)):
            raise TypeError(f"patterns must be a list of substrings (e.g. [{patterns!r}] for one), "
                            f"got {validate.shown(patterns)}" if isinstance(patterns, str) else
                            f"patterns must be a list of substrings, got {validate.shown(patterns)}")
        for p in patterns:
            validate.text(p, "patterns")
    if patterns is None:
        return dict(collections.Counter(op for _, op, _ in instructions(ptx)).most_common())
    counts = {p: 0 for p in patterns}
    for _, _, line in instructions(ptx):
        for p in patterns:
            if p in line:
                counts[p] += 1
    for p in patterns:  # directives such as .reqnctapercluster are not instructions
        if p.startswith(".") and counts[p] == 0:
            counts[p] = sum(1 for ln in ptx.splitlines() if ln.strip().startswith(p))
    return counts


def cluster_exchanges(ptx: str) -> dict:
    """The cross-CTA structure of a kernel, in program order: ``barriers`` (cluster barrier waits),
    ``exchanges`` (a wait followed by reads of peers' shared memory) and ``sequence``, a compact trace:
    S shared-memory stores, a cluster-barrier arrives, B waits, L ``ld.shared::cluster`` (n: a run of n)."""
    seq = []
    for _, op, _line in instructions(ptx):
        mark = ("B" if op.startswith("barrier.cluster.wait") else "a" if op.startswith("barrier.cluster.arrive")
                else "L" if op.startswith("ld.shared::cluster") else "S" if op.startswith(("st.shared", "stmatrix"))
                else None)
        if mark:
            if seq and seq[-1][0] == mark:
                seq[-1][1] += 1
            else:
                seq.append([mark, 1])
    marks = [m for m, _ in seq]
    exchanges = sum(1 for i, m in enumerate(marks) if m == "B" and i + 1 < len(marks) and marks[i + 1] == "L")
    return {"barriers": sum(n for m, n in seq if m == "B"), "exchanges": exchanges,
            "sequence": " ".join(m + (str(n) if n > 1 else "") for m, n in seq)}


def excerpt(ptx: str, pattern: str, context: int = 2, max_hits: int = 2) -> str:
    """PTX lines around the first ``max_hits`` lines containing ``pattern``, numbered."""
    lines = ptx.splitlines()
    hits = [i for i, ln in enumerate(lines) if pattern in ln][:max_hits]
    if not hits:
        return f"// no line contains {pattern!r}"
    out, last = [], -1
    for i in hits:
        lo, hi = max(i - context, last + 1), min(i + context + 1, len(lines))
        if out and lo > last + 1:
            out.append("   ...")
        for j in range(lo, hi):
            mark = ">" if j == i else " "
            out.append(f"{mark}{j + 1:5d}  {lines[j].rstrip()}")
        last = hi - 1
    return "\n".join(out)


# ------------------------------------------------------------------ reading what a change did to a kernel

def mbarrier_init_counts(ptx: str) -> list[int]:
    """The count of every ``mbarrier.init`` in ``ptx``, in program order (an operand of the instruction: an
    opcode census cannot see it). A group barrier's init runs on its leader with count x group size."""
    return [int(n) for n in re.findall(r"mbarrier\.init\.shared(?:::cta)?\.b64 \[[^\]]+\], (\d+);", ptx)]


_OPERAND = re.compile(r"mbarrier\.(init|arrive\.expect_tx)\S*\s.*,\s*(\d+);")


def operand_census(ptx: str) -> collections.Counter:
    """Instructions by opcode, with the operand a barrier protocol lives in: an ``mbarrier.init`` also by its
    count ("... (count 4)"), an ``arrive.expect_tx`` with a constant also by its bytes ("... (24576 bytes)")."""
    out = collections.Counter()
    for _, op, line in instructions(ptx):
        m = _OPERAND.search(line)
        if m:
            op += f" (count {m.group(2)})" if m.group(1) == "init" else f" ({m.group(2)} bytes)"
        out[op] += 1
    return out


def census_changes(before: str, after: str) -> list[list]:
    """[instruction, before, after, difference] for every entry of :func:`operand_census` whose count differs
    between two PTX texts, in order of first appearance: what a change to a kernel did to its PTX."""
    a, b = operand_census(before), operand_census(after)
    return [[op, a[op], b[op], b[op] - a[op]] for op in dict.fromkeys([*a, *b]) if a[op] != b[op]]


# ------------------------------------------------------------------ reading control flow in PTX

_DEF = re.compile(r"\s*(?:@!?%p\d+\s+)?[a-z][\w.:]*\s+(%\w+)(?:\|(%\w+))?\s*,(.*);")


def predicate_chain(ptx: str, needle: str, hit: int = 0) -> list[tuple[int, str]]:
    """The PTX lines that compute the predicate guarding the ``hit``-th guarded line containing ``needle``,
    followed back through every register they read: [(line number, text)], in program order."""
    lines = ptx.splitlines()
    guarded = [i for i, ln in enumerate(lines) if needle in ln and ln.strip().startswith("@")]
    if hit >= len(guarded):
        raise ValueError(f"{len(guarded)} guarded line(s) contain {needle!r}; asked for number {hit}")
    at = guarded[hit]
    todo, seen, chain = [(re.match(r"\s*@!?(%p\d+)", lines[at]).group(1), at)], set(), {at}
    while todo:
        reg, before = todo.pop()
        if reg in seen:
            continue
        seen.add(reg)
        for i in range(before - 1, -1, -1):           # the nearest definition above the use
            m = _DEF.match(lines[i])
            if m and reg in m.group(1, 2):
                chain.add(i)
                todo += [(r, i) for r in re.findall(r"%[a-z]+\d+", m.group(3))]
                break
    return [(i + 1, lines[i].strip()) for i in sorted(chain)]


def issuing_ctas(chain: list[tuple[int, str]], num_ctas: int) -> list[int]:
    """The CTAs whose ``%cluster_ctarank`` passes a guard of the form ``(rank & bits) == 0`` in a
    :func:`predicate_chain` (``bits``: every rank bit when the rank is compared whole)."""
    rank = next((re.search(r"(%r\d+), %cluster_ctarank;", text).group(1) for _, text in chain
                 if "%cluster_ctarank" in text), None)
    if rank is None:
        raise ValueError("the chain does not read %cluster_ctarank: every CTA passes it")
    bits = {rank: num_ctas - 1}
    for _, text in chain:
        if m := re.search(r"and\.b32\s+(%r\d+), " + re.escape(rank) + r", (\d+);", text):
            bits[m.group(1)] = int(m.group(2))
    negated = {m.group(1) for _, text in chain if (m := re.search(r"not\.pred\s+%p\d+, (%p\d+);", text))}
    tested = []
    for _, text in chain:                       # (rank & bits) == 0, or not ((rank & bits) != 0)
        if m := re.search(r"setp\.(eq|ne)\.b32\s+(%p\d+), (%r\d+), 0;", text):
            if m.group(1) == "eq" or m.group(2) in negated:
                tested.append(m.group(3))
    b = next((bits[r] for r in tested if r in bits), None)
    if b is None:
        raise ValueError("no test (rank & bits) == 0 in the chain")
    return [c for c in range(num_ctas) if c & b == 0]


def loop_body(ptx: str) -> str:
    """The PTX of the kernel's main loop: from the target of its longest backward branch to the branch."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"(\$L__BB\d+_\d+):", ln))}
    spans = [(labels[m.group(1)], i) for i, ln in enumerate(lines)
             if (m := re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ln)) and labels.get(m.group(1), i) < i]
    if not spans:
        raise ValueError("the PTX has no backward branch: no loop")
    lo, hi = max(spans, key=lambda s: s[1] - s[0])
    return "\n".join(lines[lo:hi + 1])


# The synchronisation a reader must see with its frequency: what the user wrote and what the compiler adds
# (the init fence and its relaxed cluster barrier, CTA barriers from the membar pass, proxy fences).
SYNC_OPS = ("fence.mbarrier_init", "barrier.cluster.arrive.relaxed", "barrier.cluster.arrive", "barrier.cluster.wait",
            "fence.acq_rel.cluster", "fence.proxy.async", "bar.sync", "barrier.sync", "mbarrier.init",
            "mbarrier.arrive", "mbarrier.try_wait", "mbarrier.inval")

_LABEL = re.compile(r"(\$L__BB\d+_\d+):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);")
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*inlined_at\s+(\d+)\s+(\d+))?")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:,\s*"([^"]*)")?')


@dataclass(frozen=True)
class Loop:
    """A loop of the PTX: lines ``start`` (its header label) to ``end`` (its backward branch), 1-based, and the
    Python source line (``file:line``) the branch comes from. ``dispatch``: the loop in which the worker warps of a
    warp-specialised kernel wait for the default warps' next request (a jump table, ``brx.idx``): what it runs
    for a request runs once per request, not once per turn of a loop of the kernel's."""
    start: int
    end: int
    source: str
    dispatch: bool = False

    def __contains__(self, line: int) -> bool:
        return self.start <= line <= self.end


def loops(ptx: str) -> list[Loop]:
    """Every loop of the kernel (a backward branch to a ``$L__BB`` label), outermost first. The spin loops inside
    an ``mbarrier.try_wait`` (local labels in an inline block) are a wait, not a loop, and are not listed."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := _LABEL.match(ln))}
    where = _source_lines(lines)
    out = []
    for i, ln in enumerate(lines):
        if (m := _BRANCH.search(ln)) and labels.get(m.group(1), i) < i:
            lo = labels[m.group(1)]
            dispatch = any("brx.idx" in lines[j] for j in range(lo, i))
            out.append(Loop(lo + 1, i + 1, where[i], dispatch))
    # a dispatch loop's body holds every partition's code: only loops that do not contain a jump table
    # of their own are "dispatch" loops, and the loops nested in a partition stay loops
    return sorted(out, key=lambda lp: (lp.start, -lp.end))


def _source_lines(lines: list[str]) -> list[str]:
    """For every PTX line, the ``file:line`` of the Python source it was compiled from (the last ``.loc``; for code
    inlined from a helper, the line that called the helper). The ``.loc`` lines inside an inline-assembly block (an
    mbarrier wait's spin loop) do not name the kernel's lines (seen: a few lines past the wait's), so the block keeps
    the line it was emitted for."""
    files = {m.group(1): os.path.basename(m.group(2)) for ln in lines if (m := _FILE.match(ln))}  # at the end
    out, here, in_asm = [], "", False
    for ln in lines:
        if "// begin inline asm" in ln or "// end inline asm" in ln:
            in_asm = "begin" in ln
        elif in_asm:
            pass
        elif m := _LOC.match(ln):
            f, line = (m.group(3), m.group(4)) if m.group(3) else (m.group(1), m.group(2))
            here = f"{files.get(f, '?')}:{line}" if line != "0" else here
        out.append(here)
    return out


def schedule(ptx: str, patterns=SYNC_OPS) -> list[dict]:
    """How often each synchronisation instruction of a kernel runs: one row per instruction line that matches one
    of ``patterns`` (the first that matches names it), with ``line`` (1-based), ``op`` (the pattern), ``text``,
    ``opcode`` (in full), ``source`` (the Python ``file:line`` it was compiled from: for what the compiler inserts, the line it was
    inserted for) and ``loop``: None if it runs once per kernel (or once per partition), else the innermost
    :class:`Loop` whose every iteration runs it. A static census counts lines; this says how often they run."""
    lines = ptx.splitlines()
    where = _source_lines(lines)
    spans = loops(ptx)
    rows = []
    for no, opcode, text in instructions(ptx):
        pat = next((p for p in patterns if p in text), None)
        if pat is None:
            continue
        inner = [lp for lp in spans if no in lp and not lp.dispatch]
        rows.append({"line": no, "op": pat, "opcode": opcode, "text": text.strip(), "source": where[no - 1],
                     "loop": min(inner, key=lambda lp: lp.end - lp.start) if inner else None})
    return rows


def per_iteration(ptx: str, patterns=SYNC_OPS) -> dict:
    """{op: (runs once, runs in a loop)}: :func:`schedule` summed, for every pattern that occurs."""
    out = {}
    for r in schedule(ptx, patterns):
        once, looped = out.get(r["op"], (0, 0))
        out[r["op"]] = (once + (r["loop"] is None), looped + (r["loop"] is not None))
    return out


def schedule_table(ptx: str, patterns=SYNC_OPS) -> list[list]:
    """[instruction, source line, how often] rows of :func:`schedule` (the full opcode, without its type suffix),
    consecutive repeats merged, for a chapter's "what the compiler inserts, and how often it runs" table."""
    rows = []
    for r in schedule(ptx, patterns):
        how = "once" if r["loop"] is None else f"every iteration of the loop at {r['loop'].source}"
        row = [re.sub(r"\.(b|u|s)(32|64)$", "", r["opcode"]), r["source"], how]
        if rows and rows[-1][:3] == row:
            rows[-1][3] += 1
        else:
            rows.append(row + [1])
    return [[op, src, how if n == 1 else f"{how} ({n} sites)"] for op, src, how, n in rows]


_BARRIER_USES = ("mbarrier.arrive", "mbarrier.try_wait", "mbarrier.test_wait", "cp.async.bulk", "tcgen05.commit",
                 "clusterlaunchcontrol.try_cancel")


def init_fence_problems(ptx: str) -> list[str]:
    """What is wrong with a kernel's init fences, in words ([] if nothing): an init fence (or the relaxed cluster
    barrier that completes it) that runs every iteration of a loop, an init fence copied into unrolled steps (one
    source line, several fences), a barrier used before the first init fence (inline assembly is a use the
    compiler cannot see), or an init after the last fence. ``tests/test_init_fences.py`` checks every kernel of the catalog with it."""
    rows, want_barrier = [], False
    for r in schedule(ptx, ("fence.mbarrier_init", "barrier.cluster.arrive.relaxed")):
        if r["op"] == "fence.mbarrier_init":
            rows.append(r)
            want_barrier = True
        elif want_barrier:                  # the relaxed barrier that completes the fence (not one of the kernel's)
            rows.append(r)
            want_barrier = False
    out = [f"{r['op']} at {r['source']} runs every iteration of the loop at {r['loop'].source}"
           for r in rows if r["loop"] is not None]
    fences = collections.Counter(r["source"] for r in rows if r["op"] == "fence.mbarrier_init")
    out += [f"{n} init fences from {src} (an unrolled loop)" for src, n in fences.items() if n > 1]
    if fences:
        first_fence = min(r["line"] for r in rows if r["op"] == "fence.mbarrier_init")
        first_use = min((no for no, _, text in instructions(ptx) if any(u in text for u in _BARRIER_USES)),
                        default=None)
        if first_use is not None and first_use < first_fence:
            out.append(f"a barrier is used at PTX line {first_use}, before the init fence at line {first_fence}")
        last_fence = max(r["line"] for r in rows if r["op"] == "fence.mbarrier_init")
        late = [no for no, _, text in instructions(ptx) if "mbarrier.init" in text and no > last_fence]
        if late:
            out.append(f"an mbarrier.init at PTX line {late[0]} comes after the last init fence (line {last_fence}): "
                       "the fence does not order it")
    return out
