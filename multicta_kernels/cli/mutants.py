"""The mutation operators: small edits of a kernel's own source that break it on purpose.

A *unit* is one jit function: a kernel, a partition of it, or a shared in-kernel helper it calls
(``gluon/ring.py``'s ``release``, ``gluon/sync.py``'s helpers); :func:`closure` lists a kernel's units. Each operator of
:data:`OPERATORS` takes a unit's source and yields every (site, mutated source) it can make; :func:`mutants` applies them
all to the catalog's kernels. :mod:`multicta_kernels.cli.mutate` builds each mutant and runs the checks against it.
"""
from __future__ import annotations

import collections
import dataclasses
import difflib
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path

from .. import catalog
from ..gluon import ring, sync


# ------------------------------------------------------------------ source units and statements


def _jit_functions(module) -> dict:
    """{name: JITFunction} of the @gluon.jit / @triton.jit functions defined in ``module`` itself."""
    return {k: v for k, v in vars(module).items()
            if hasattr(v, "fn") and hasattr(v, "arg_names") and getattr(v.fn, "__module__", None) == module.__name__}


def closure(kernel) -> list:
    """The jit functions a kernel runs: itself, the jit functions of its own module it names (transitively: a
    warp-specialised kernel's partitions) and the shared in-kernel helpers of ``gluon.ring`` / ``gluon.sync`` it
    names. [(module, name)], the kernel first."""
    module = sys.modules[kernel.fn.__module__]
    local, shared = _jit_functions(module), {**_jit_functions(ring), **_jit_functions(sync)}
    out, todo = [], [kernel.fn.__name__]
    while todo:
        name = todo.pop(0)
        if (module, name) in out:
            continue
        out.append((module, name))
        src = _code_only(inspect.getsource(local[name].fn))
        todo += [n for n in local if n not in todo and (module, n) not in out and re.search(rf"\b{n}\b", src)
                 and n != name]
    src = "\n".join(_code_only(inspect.getsource(local[n].fn)) for _, n in out)
    for name, fn in shared.items():
        mod = sys.modules[fn.fn.__module__]
        if re.search(rf"\b{name}\(", src) and mod is not module:
            out.append((mod, name))
    return out


def _code_only(src: str) -> str:
    """``src`` without comments and docstrings: the names a function really uses."""
    doc = _docstring_lines(src)
    return "\n".join(ln.split("#")[0] for i, ln in enumerate(src.splitlines()) if i not in doc)


@dataclasses.dataclass
class Stmt:
    first: int                 # 0-based line index of its first line in the unit's source
    last: int                  # ... and its last (continuation lines included)
    indent: int
    code: str                  # the statement's code, comments removed, lines joined


def statements(src: str) -> list:
    """The simple statements of a function's source, with their continuation lines (brackets balanced)."""
    lines, out, i = src.splitlines(), [], 0
    while i < len(lines):
        ln = lines[i]
        code = ln.split("#")[0].rstrip()
        if not code.strip() or code.strip().startswith(("@", '"""', "'''")):
            i += 1
            continue
        j, depth = i, code.count("(") + code.count("[") - code.count(")") - code.count("]")
        while depth > 0 and j + 1 < len(lines):
            j += 1
            c = lines[j].split("#")[0]
            code += " " + c.strip()
            depth += c.count("(") + c.count("[") - c.count(")") - c.count("]")
        out.append(Stmt(i, j, len(ln) - len(ln.lstrip()), code.strip()))
        i = j + 1
    return out


def _docstring_lines(src: str) -> set:
    """Line indices inside triple-quoted strings (a docstring is no code to mutate)."""
    inside, out = False, set()
    for i, ln in enumerate(src.splitlines()):
        n = ln.count('"""')
        if inside or n:
            out.add(i)
        if n % 2:
            inside = not inside
    return out


# ------------------------------------------------------------------ the operators
#
# Each operator takes a unit's source and yields (site, new source): the site says what it changed, in words.

BARRIER_OPS = ("mbarrier.arrive(", "mbarrier.expect(", "mbarrier.wait(", "release(", "release_arrive(",
               "acquire_wait(", "tma.async_load(", "tma.async_store(", "tma.store_wait(", "tcgen05_mma(",
               "tcgen05_commit(", "clc.try_cancel(", "hopper.cluster.barrier(", "cluster.barrier(",
               "warpgroup_mma_wait(", "sync_inits(")


def _lines(src):
    return src.splitlines()


def _join(lines):
    return "\n".join(lines) + "\n"


def _drop(src, st: Stmt, replacement="pass"):
    lines = _lines(src)
    return _join(lines[:st.first] + [" " * st.indent + replacement] + lines[st.last + 1:])


def _stmts(src):
    doc = _docstring_lines(src)
    return [s for s in statements(src) if s.first not in doc and not s.code.startswith(("def ", "@"))]


def _is(st, *prefixes):
    return any(re.match(rf"(\w+\s*=\s*|[\w, ]+=\s*)?{re.escape(p)}", st.code) for p in prefixes)


def op_drop_wait(src):
    for st in _stmts(src):
        if _is(st, "mbarrier.wait(", "acquire_wait("):
            yield f"drop `{st.code[:70]}`", _drop(src, st)


def op_drop_arrive(src):
    for st in _stmts(src):
        if _is(st, "mbarrier.arrive(", "mbarrier.expect(", "release_arrive(", "tcgen05_commit("):
            yield f"drop `{st.code[:70]}`", _drop(src, st)


def op_drop_release(src):
    for st in _stmts(src):
        if _is(st, "release(", "hopper.cluster.barrier("):
            yield f"drop `{st.code[:70]}`", _drop(src, st)


def op_init_count(src):
    for st in _stmts(src):
        m = re.search(r"mbarrier\.init\((.*), count=([^)]+)\)$", st.code)
        if m and st.first == st.last:
            for d in (1, -1):
                lines = _lines(src)
                old = f"count={m.group(2)}"
                lines[st.first] = lines[st.first].replace(old, f"count=({m.group(2)}) {'+' if d > 0 else '-'} 1", 1)
                yield f"`{st.code[:60]}` count {'+1' if d > 0 else '-1'}", _join(lines)


def op_flip_phase(src):
    """``phase`` <-> ``phase ^ 1`` in the parity argument of a wait (any name ending in phase or parity)."""
    for st in _stmts(src):
        if not _is(st, "mbarrier.wait(", "acquire_wait(") or st.first != st.last:
            continue
        m = re.search(r"(mbarrier\.wait|acquire_wait)\(([^,]+), ([^,)]+)", st.code)
        if not m:
            continue
        arg = m.group(3).strip()
        new = arg[:-4].strip() if arg.endswith("^ 1") else f"({arg}) ^ 1"
        lines = _lines(src)
        lines[st.first] = lines[st.first].replace(f"{m.group(2)}, {m.group(3)}", f"{m.group(2)}, {new}", 1)
        yield f"`{st.code[:60]}` parity {arg} -> {new}", _join(lines)


def op_mask(src):
    """Widen or narrow a multicast or commit mask: multicast=True/False, from_cta, release_arrive's lane count."""
    lines = _lines(src)
    doc = _docstring_lines(src)
    for i, ln in enumerate(lines):
        if i in doc:
            continue
        code = ln.split("#")[0]
        for old, new in (("multicast=True", "multicast=False"), ("multicast=MULTICAST", "multicast=not MULTICAST"),
                         ("two_ctas=True", "two_ctas=False")):
            if old in code:
                yield f"line `{code.strip()[:60]}`: {old} -> {new}", _join(lines[:i] + [ln.replace(old, new, 1)]
                                                                             + lines[i + 1:])
        m = re.search(r"from_cta=([^,)]+)", code)
        if m:
            v = m.group(1)
            for new in (f"({v}) ^ 1", f"({v}) | 1"):
                yield (f"line `{code.strip()[:60]}`: from_cta={v} -> {new}",
                       _join(lines[:i] + [ln.replace(m.group(0), f"from_cta={new}", 1)] + lines[i + 1:]))
        m = re.search(r"release_arrive\((.*)\)", code)
        if m and "def " not in code:
            args = m.group(1)
            for new in (f"{args}, n=2" if "n=" not in args else None, ):
                if new:
                    yield (f"line `{code.strip()[:60]}`: release_arrive with 2 lanes",
                           _join(lines[:i] + [ln.replace(m.group(0), f"release_arrive({new})", 1)] + lines[i + 1:]))


def op_skip_invalidate(src):
    for st in _stmts(src):
        if _is(st, "mbarrier.invalidate("):
            yield f"drop `{st.code[:70]}`", _drop(src, st)


def op_drop_fence(src):
    stmts = _stmts(src)
    for k, st in enumerate(stmts):
        if _is(st, "sync_inits(", "fence_async_shared(", "hopper.fence_async_shared(", "gl.barrier(",
               "cluster_fence("):
            yield f"drop `{st.code[:70]}`", _drop(src, st)


def op_swap(src):
    """Swap two neighbouring statements of one block, one of them a barrier or asynchronous operation."""
    stmts = _stmts(src)
    for a, b in zip(stmts, stmts[1:]):
        if a.indent != b.indent or b.first != a.last + 1 or a.code.endswith(":") or b.code.endswith(":"):
            continue
        if not any(p in a.code or p in b.code for p in BARRIER_OPS):
            continue
        if re.match(r"\w+\s*=", a.code) and re.search(rf"\b{a.code.split('=')[0].strip()}\b", b.code):
            continue                                   # b reads what a defines: not a reordering, a NameError
        lines = _lines(src)
        new = lines[:a.first] + lines[b.first:b.last + 1] + lines[a.first:a.last + 1] + lines[b.last + 1:]
        yield f"swap `{a.code[:40]}` and `{b.code[:40]}`", _join(new)


def _block_end(stmts, k):
    """Index of the last statement inside the block opened by stmts[k] (a compound statement)."""
    j = k + 1
    while j < len(stmts) and stmts[j].indent > stmts[k].indent:
        j += 1
    return j - 1


def op_move_release(src):
    """Move a release (``release(...)``, a consumer's arrive, a cluster barrier) before the statement above it
    (the last read of its slot), and, where a reload follows it, after that reload (the tile-stream race)."""
    stmts = _stmts(src)
    lines = _lines(src)
    for k, st in enumerate(stmts):
        if not _is(st, "release(", "mbarrier.arrive(", "release_arrive(", "hopper.cluster.barrier("):
            continue
        # a release wrapped in a `with scope(...)` block moves with its block
        lo, hi, ind = st.first, st.last, st.indent
        if k > 0 and stmts[k - 1].code.startswith("with ") and _block_end(stmts, k - 1) == k:
            lo, ind = stmts[k - 1].first, stmts[k - 1].indent
            k0 = k - 1
        else:
            k0 = k
        prev = [s for s in stmts[:k0] if s.indent == ind]
        if prev and prev[-1].last + 1 == lo and not prev[-1].code.endswith(":"):
            p = prev[-1]
            new = lines[:p.first] + lines[lo:hi + 1] + lines[p.first:p.last + 1] + lines[hi + 1:]
            yield f"move `{st.code[:50]}` above `{p.code[:40]}`", _join(new)
        nxt = [j for j in range(k + 1, len(stmts)) if stmts[j].indent == ind and stmts[j].first == hi + 1]
        if nxt:
            j = nxt[0]
            end = _block_end(stmts, j) if stmts[j].code.endswith(":") else j
            if any(p in s.code for s in stmts[j:end + 1] for p in ("async_load(", "expect(")):
                e = stmts[end].last
                new = lines[:lo] + lines[hi + 1:e + 1] + lines[lo:hi + 1] + lines[e + 1:]
                yield f"move `{st.code[:50]}` after the reload `{stmts[j].code[:40]}`", _join(new)


def op_drop_tail(src):
    """Remove a producer tail: a loop after the partition's main ``while`` loop that only waits."""
    stmts = _stmts(src)
    seen_while = False
    for k, st in enumerate(stmts):
        if st.code.startswith("while "):
            seen_while = True
            continue
        if seen_while and st.code.startswith("for ") and st.code.endswith(":"):
            end = _block_end(stmts, k)
            if any(_is(s, "mbarrier.wait(") for s in stmts[k + 1:end + 1]):
                lines = _lines(src)
                new = lines[:st.first] + lines[stmts[end].last + 1:]
                yield f"drop the tail `{st.code[:50]}` ({end - k} statements)", _join(new)


def op_staging(src):
    """Reuse a staging buffer one step early: ``store_wait(n)`` -> ``store_wait(n + 1)``."""
    lines = _lines(src)
    doc = _docstring_lines(src)
    for i, ln in enumerate(lines):
        m = re.search(r"store_wait\((\d+)\)", ln.split("#")[0])
        if m and i not in doc:
            n = int(m.group(1))
            yield (f"line `{ln.strip()[:50]}`: store_wait({n}) -> store_wait({n + 1})",
                   _join(lines[:i] + [ln.replace(m.group(0), f"store_wait({n + 1})", 1)] + lines[i + 1:]))


OPERATORS = {
    "move release": op_move_release,
    "drop wait": op_drop_wait,
    "drop arrive/expect": op_drop_arrive,
    "drop release": op_drop_release,
    "init count +-1": op_init_count,
    "flip phase": op_flip_phase,
    "mask": op_mask,
    "skip invalidate": op_skip_invalidate,
    "drop fence": op_drop_fence,
    "swap": op_swap,
    "drop tail": op_drop_tail,
    "staging early": op_staging,
}


# ------------------------------------------------------------------ why a CPU misses a survivor

_BARRIER_OP = re.compile(r"\b(mbarrier\.(wait|arrive|expect|init|invalidate)|release_arrive|acquire_wait|"
                         r"cluster\.barrier|tma\.(async_load|async_store|store_wait)|tcgen05_commit|sync_inits)\b")
_BLACKWELL_ONLY = ("two_cta.", "clc_matmul.", "blackwell_multicast_mma")


def why_survived(unit: str, operator: str, site: str) -> str:
    """Why no CPU check sees this mutant: what the lens, the protocol ties (census, order, program) and the CPU
    tests do not follow, or why nothing can (an equivalent mutant). Read from the operator and the mutated line;
    the GPU tests are what is left to catch it."""
    a, _, b = site.partition("` and `")
    ops = [bool(_BARRIER_OP.search(x)) for x in (a, b)] if operator == "swap" else []
    if "sync_inits()" in site:
        why = ("equivalent in behaviour, slower at most: where sync_inits() no longer stands before the barriers' "
               "first cross-CTA use, Triton 3.9 fences the inits itself at that use (outside any loop here, so once; "
               "the init-fence check fails a kernel only where that use is inside a loop); lens.same_schedule proves "
               "such a move where the rest of the PTX is the kernel's up to a renaming of registers, and not where "
               "LLVM gave a register another role: the same instructions up to register names, and no one-to-one "
               "renaming (tests/test_mutation.py checks both for the one-round kernel's bf16 configuration)")
    elif operator == "drop fence" and "fence_async_shared" in site:
        why = ("Triton 3.9's proxy-fence pass puts a fence.proxy.async before the async-proxy read itself "
               "(add_proxy_fence_insertion in make_llir): the kernel stays correct, only the fence's place in the PTX "
               "moves")
    elif operator == "swap" and "fence_async_shared" in site:
        why = ("the compiler's proxy-fence pass orders the generic write before the async read wherever the "
               "kernel's own fence lands (add_proxy_fence_insertion in make_llir)")
    elif operator == "swap" and "phase ^= 1" in site and "cluster.barrier(" in site:
        why = "equivalent: a cluster barrier takes no parity, and the flip still precedes the next round's waits"
    elif operator == "flip phase" or "phase ^= 1" in site:
        why = ("the program runs the kernel's parity arithmetic and ties it to the model's waits: a flip that "
               "survives is one the model's waits cannot tell apart")
    elif operator == "mask" and "tcgen05_mma" in site and "multicast=" in site:
        why = ("which CTAs a tcgen05_mma's commit reaches (its multicast flag) is not resolved by the program (that "
               "takes the operands' CGA layouts) nor visible in the PTX's barrier operations")
    elif operator == "mask" and "multicast=" in site:
        why = "the multicast flag changes which CTAs a load reaches, which no tie resolves here"
    elif operator == "mask" and "two_ctas" in site:
        why = "the cta_group of an MMA changes who issues it, not the barrier operations the ties compare"
    elif operator == "drop fence" and "gl.barrier()" in site and unit.endswith(".softmax_pipelined_kernel"):
        why = ("the compiler's own bar.sync between the reads of the two exchange buffers also lies after the last "
               "wait and before the invalidates (tests/test_softmax_pipelined.py checks that one does): correct "
               "without it; the kernel keeps its own so as not to rest on where the compiler puts one")
    elif operator == "drop fence" and site.endswith("(3 of 3)") and unit.endswith(".softmax_halves_kernel"):
        why = ("the compiler's own bar.sync before the invalidates moves one invalidate later (after early's): every "
               "warp's last wait on early, in the last turn's load step, is already behind that turn's gl.barrier() "
               "before the stores' TMA, and the compiler's bar.sync orders the waits on ready and the slots before "
               "theirs: correct without it; the kernel keeps its own so as not to rest on where the compiler puts one")
    elif operator == "drop fence" and "gl.barrier()" in site and unit.endswith(".softmax_halves_kernel"):
        why = ("the compiler's own fence.proxy.async between two bar.sync before each of the next row's TMA issues "
               "(quarter 0's, after its read; quarters 2 and 3's, after this row's stores read them) order every "
               "warp's reads of that buffer before it, and its bar.sync before each st.async orders the reads of the "
               "other slot before the next row's pairs (tests/test_softmax_halves.py checks both): correct without "
               "it; the kernel keeps its own so as not to rest on where the compiler puts them")
    elif operator == "drop fence" and "gl.barrier()" in site and unit.endswith(".softmax_staged_kernel"):
        why = ("the compiler's own fence.proxy.async and bar.sync before the next row's TMA order every warp's reads "
               "of the stage before it, and its bar.sync before each st.async orders the reads of the other slot "
               "before this row's stores (tests/test_softmax_staged.py checks both): correct without it; the kernel "
               "keeps its own so as not to rest on where the compiler puts them")
    elif operator == "drop fence" and "gl.barrier()" in site:
        why = ("the compiler's own bar.sync before each st.async (the stored value passes through its shared memory) "
               "also lies between the last block's reads of the slot and this block's stores: correct without it; "
               "the kernel keeps its own barrier so as not to rest on where the compiler puts one")
    elif operator == "swap" and "gl.barrier()" in site and "mbarrier.expect" in site:
        why = ("equivalent: the expect is an arrival on this CTA's own barrier; the CTA barrier orders the reads of "
               "the other slot before the stores, which both orders keep")
    elif operator == "drop fence":
        why = "the fence orders nothing the ties or the program's rules follow"
    elif operator in ("move release", "drop release"):
        why = "the release moved past an operation that neither the model nor the program's rules follow"
    elif operator == "swap" and all(ops) and "tma.async_load" in a and "tma.async_load" in b:
        why = "equivalent: two loads onto one barrier complete the same phase in either order"
    elif operator == "swap" and all(ops) and "tma.async_store" in a and "tma.async_store" in b:
        why = ("equivalent: two TMA stores from two staging buffers into disjoint boxes of the output, each its own "
               "bulk group; every later store_wait(0) waits for both, so their order changes neither what is written "
               "nor when a staging buffer is free again")
    elif operator == "swap" and all(ops) and "mbarrier.init" in a and "mbarrier.expect" in b:
        why = "equivalent: an init and an expect of two different barriers commute"
    elif operator == "swap" and "gl.store(" in site and "tma.async_store(" in site:
        why = ("equivalent: the register store writes global memory through the generic proxy, the TMA store through "
               "the async proxy, with no proxy fence between them, so the PTX ISA orders neither write before the "
               "other in either program (\"Proxies\"; the store_wait waits only for the reads); lens.same_schedule "
               "does not follow proxies")
    elif operator == "swap" and any(ops) and re.search(r"= c_bufs\.index\(|tn = r\.tile\(", site):
        why = "equivalent: the other line is index arithmetic that the barrier operation does not guard"
    elif operator == "swap" and any(ops):
        why = "the other line is an operation that neither the model nor the program's rules follow"
    elif operator == "swap":
        why = "neither line is a barrier operation: their order is in no tie"
    else:
        why = "no CPU check follows this operation"
    if any(k in unit for k in _BLACKWELL_ONLY):
        why += "; its GPU tests need tcgen05 (a Blackwell GPU: none has run them)"
    return why


# ------------------------------------------------------------------ building a mutant


@dataclasses.dataclass
class Mutant:
    kernel: str                # catalog names checked (the kernels whose closure holds the unit)
    unit: str                  # module.function mutated
    operator: str
    site: str
    source: str                # the unit's mutated source
    diff: str

    @property
    def key(self):
        return f"{self.unit} | {self.operator} | {self.site}"


def mutants(names=None) -> list:
    """Every mutant of the catalog's kernels (or those ``names``): [(catalog names, Mutant)], helpers once each,
    checked against every kernel that calls them."""
    by_unit = {}
    for name in catalog.registered():
        if names is not None and name not in names:
            continue
        fn = catalog.spec(name).fn
        if getattr(fn, "compiled", None) is not None or not hasattr(fn, "fn"):
            fn = getattr(fn, "compiled", fn)
        for mod, unit in closure(fn):
            by_unit.setdefault((mod.__name__, unit), []).append(name)
    out = []
    for (modname, unit), kernels in by_unit.items():
        fn = getattr(sys.modules[modname], unit)
        src = textwrap.dedent(inspect.getsource(fn.fn))
        seen, found = set(), []
        for opname, op in OPERATORS.items():
            for site, new in op(src):
                if new == src or new in seen:
                    continue
                seen.add(new)
                found.append((opname, site, new))
        # the same site twice (a line and its twin, e.g. two `multicast=True)` lines): each its own key, in order
        many = collections.Counter((opname, site) for opname, site, _ in found)
        nth = collections.Counter()
        for opname, site, new in found:
            if many[(opname, site)] > 1:
                nth[(opname, site)] += 1
                site = f"{site} ({nth[(opname, site)]} of {many[(opname, site)]})"
            diff = "".join(difflib.unified_diff(src.splitlines(True), new.splitlines(True),
                                                f"{unit} (kernel)", f"{unit} (mutant)", n=1))
            out.append((sorted(set(kernels)), Mutant(",".join(sorted(set(kernels))), f"{modname}.{unit}", opname,
                                                     site, new, diff)))
    return out


def write_mutant(m: Mutant, folder) -> Path:
    """The mutant as a Python file: the mutated unit and every jit function of the kernels' closures that depends on
    it, rebuilt over the original modules' globals. ``PATCH`` maps each original (module, name) to its copy;
    :func:`load` runs it and patches every module of the package."""
    modname, unit = m.unit.rsplit(".", 1)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"mutant_{abs(hash(m.key)) % 10**10}.py"
    spec = {"unit": m.unit, "kernels": m.kernel.split(","), "source": m.source}
    path.write_text("# a mutant of the book's kernels (multicta_kernels.cli.mutate)\nMUTANT = "
                    + json.dumps(spec, indent=1) + "\n")
    return path
