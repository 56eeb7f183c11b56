"""The mutation harness: break each kernel of the catalog on purpose and see which check notices.

    python -m multicta_kernels.cli.mutate                          # every kernel, every operator: results/mutation_cpu.json
    python -m multicta_kernels.cli.mutate --kernels tile_stream --sample 2 --out /tmp/m.json
    python -m multicta_kernels.cli.mutate --gpu --from results/mutation_cpu.json --out results/h200/mutation_gpu.json

A *mutant* is one small edit of a kernel's own source (or of an in-kernel helper it calls: ``gluon/ring.py``'s
``release``, ``gluon/sync.py``'s helpers), made by one of the operators of :mod:`multicta_kernels.cli.mutants` (:data:`OPERATORS`): a moved release, a dropped wait, an
init count off by one, a flipped phase, a widened or narrowed mask, ... Each mutant is compiled for the targets of
every configuration the catalog lists (one that compiles nowhere is reported and not counted), then run against the
CPU's killers, cheapest first, until one fails it:

``compile``      a configuration the catalog lists no longer compiles (the lens tests compile every one)
``expect``       the spec's own expectations (substrings the PTX must hold)
``census``       :func:`protocols.compare`: the model's code sites and init counts against the PTX
``order``        :func:`protocols.order`: the model's operations in the PTX's order, loop turn by loop turn
``program``      :func:`protocols.program.tie`: the kernel's Python run on the CPU, CTA 0's barrier operations, parities
                 and shared-memory reads and writes, op for op against the model (what a parity held in a register
                 or an order across loop turns hides from the PTX ties)
``init fence``   :func:`lens.init_fence_problems`: no init fence per iteration, none after a barrier's first use
``tests``        the CPU tests that read the kernel, run by pytest with the mutant patched into every module of
                 the package (``MULTICTA_MUTANT=file``: ``tests/conftest.py`` loads it at session start); not those
                 marked ``source_text`` (a test of a chapter's quoted lines fails any edit, a swap the compiler
                 undoes too) or ``mutants`` (tests of the harness itself), nor the notebooks' format

A mutant that survives them all is a CPU survivor; with ``--gpu`` the survivors are run against the GPU tests (on
a GPU). A mutant that compiles and survives everything is a gap in the book's checks: it is reported with its diff.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path

from .. import catalog, lens
from ..core import hardware
from ..protocols import program
from ..protocols.agreement import compare, order, store_wait_depths
from ..protocols.cases import kernel_models
from ..protocols.models import tma_ring, ws_ring
from .mutants import OPERATORS, Mutant, closure, mutants, why_survived, write_mutant

ROOT = Path(__file__).resolve().parents[2]
ENV = "MULTICTA_MUTANT"            # the mutant file tests/conftest.py patches in

def load(path) -> dict:
    """Build the mutant described in ``path`` (see :func:`write_mutant`) and patch it into every module of the
    package that holds an original: returns {(module, name): new function}."""
    spec = {}
    exec(Path(path).read_text(), spec)
    spec = spec["MUTANT"]
    return build(spec["unit"], spec["source"], spec["kernels"], patch=True)


_BUILT = 0


def _module_from(src: str, base, name: str, folder: Path, overrides: dict):
    """A module named ``name`` over ``base``'s globals (and ``overrides``), running ``src`` from its own file
    (``@gluon.jit`` reads a function's source from its file)."""
    path = folder / f"{name}.py"
    path.write_text(src)
    mod = types.ModuleType(name)
    mod.__dict__.update({k: v for k, v in vars(base).items() if not k.startswith("__")})
    mod.__dict__.update(overrides)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod


def build(unit: str, source: str, kernels, patch: bool = False) -> dict:
    """{(module name, function name): mutant copy} for the unit and every function of the kernels' closures that
    reaches it (rebuilt so that their globals see the copy)."""
    global _BUILT
    modname, fname = unit.rsplit(".", 1)
    folder = Path(tempfile.mkdtemp(prefix="mutant_"))
    _BUILT += 1
    base = sys.modules[modname]
    new_unit = getattr(_module_from(source, base, f"_mutant_{_BUILT}_{fname}", folder, {}), fname)
    out = {(modname, fname): new_unit}
    for name in kernels:
        fn = catalog.spec(name).fn
        units = closure(fn)
        if (base, fname) not in units:
            continue
        kmod = units[0][0]
        rebuilt = [n for m, n in units if m is kmod and (m.__name__, n) not in out]
        if not rebuilt:
            continue
        src = "\n\n".join(textwrap.dedent(inspect.getsource(getattr(kmod, n).fn)) for n in rebuilt)
        overrides = {n: f for (mn, n), f in out.items()}
        mod = _module_from(src, kmod, f"_mutant_{_BUILT}_{kmod.__name__.rsplit('.', 1)[-1]}_{len(out)}", folder,
                           overrides)
        for n in rebuilt:
            out[(kmod.__name__, n)] = getattr(mod, n)
    if patch:
        originals = {id(getattr(sys.modules[mn], n)): f for (mn, n), f in out.items()}
        for mname, mod in list(sys.modules.items()):
            if not mname.startswith("multicta_kernels") or mod is None:
                continue
            for k, v in list(vars(mod).items()):
                if id(v) in originals:
                    setattr(mod, k, originals[id(v)])
    return out


# ------------------------------------------------------------------ the killers


def _spec_with(name, params, built):
    s = catalog.spec(name, **params)
    key = (s.fn.fn.__module__, s.fn.fn.__name__) if hasattr(s.fn, "fn") else None
    if key in built:
        return dataclasses.replace(s, fn=built[key])
    return s


def cpu_killers(name_list, m: Mutant, built: dict, configs="all") -> tuple:
    """(killer, detail) of the in-process killers, cheapest and strongest first, stopping at the first that fails
    the mutant: "census" and "order" (the protocol models of the kernel, at their configurations), then for every
    configuration the catalog lists "compile", "expect" and "init fence"; "no compile" if nothing compiles. Then,
    with every configuration compiled (``configs="all"``), SAME if the mutant's PTX is the kernel's in all of them,
    REORDERED or FENCED if it is the kernel's up to independent instructions in another order or fences more
    (:func:`lens.same_schedule`; equivalent: the program reads the source, and would call a change the compiler
    undoes a kill), else "program"
    if the tie by program failed it; (None, "") if the mutant survives them all."""
    cache, failed, ok, origin, program_kill = {}, [], 0, {}, None

    def compiled(name, params, target):
        key = (name, json.dumps(params, sort_keys=True), target)
        origin[key] = (name, params, target)
        if key not in cache:
            try:
                cache[key] = lens.compile(_spec_with(name, params, built), target)
            except Exception as exc:                     # the lens's one-line error, or a frontend error
                cache[key] = f"{name} {params} {target}: {str(exc).splitlines()[0][:160]}"
        return cache[key]

    for p in models():
        kname, params, target = p.kernel
        if kname not in name_list:
            continue
        k = compiled(kname, params, target)
        if isinstance(k, str):
            failed.append(k)
            continue
        ok += 1
        wrong = [r for r in compare(p, k.ptx) if not r[3]]
        if wrong:
            return "census", f"{p.name}: {wrong[0][0]} model {wrong[0][1]} PTX {wrong[0][2]}"
        model, got = store_wait_depths(p, k.ptx)
        if model != got:
            return "census", f"{p.name}: store_wait depths model {sorted(model)} PTX {sorted(got)}"
        bad = order(p, k.ptx)
        if bad:
            return "order", f"{p.name}: PTX line {bad[0][0]} does {' '.join(bad[0][1])}, no turn of the model does"
        if p.runtime is not None:
            try:
                diff = program.tie(p, fn=_spec_with(kname, params, built).fn)
            except Exception:                  # a program the trace cannot follow is no verdict: the tests decide
                diff = []
            if diff and program_kill is None:  # decided last: a mutant with the kernel's very PTX is equivalent
                cta, part, what = diff[0]
                program_kill = f"{p.name}: CTA {cta} {part}, {what}"
    for name in name_list:
        sets = catalog.registered()[name]
        for params in sets if configs == "all" else sets[:configs]:
            for target in catalog.spec(name, **params).targets:
                k = compiled(name, params, target)
                if isinstance(k, str):
                    failed.append(k)
                    continue
                ok += 1
                missing = [e for e in k.spec.expect if e not in k.ptx]
                if missing:
                    return "expect", f"{name} {params} {target}: no {missing[0]!r} in the PTX"
                problems = lens.init_fence_problems(k.ptx)
                if problems:
                    return "init fence", f"{name} {params} {target}: {problems[0]}"
    if not ok:
        return "no compile", failed[0] if failed else "nothing to compile"
    if failed:
        return "compile", failed[0]
    pairs = [(catalog.compile(name, target, **params).ptx, k.ptx)
             for (name, params, target), k in ((origin[key], k) for key, k in cache.items()) if not isinstance(k, str)]
    why = [lens.same_schedule(kernel, mutant) for kernel, mutant in pairs]
    if configs == "all" and why and all(why) and compiled_anywhere(m, [kernel for kernel, _ in pairs]):
        if all(w == "the same code" for w in why):
            return SAME, f"the PTX of all {len(why)} configurations compiled equals the kernel's (locations aside)"
        kind = FENCED if any("more fence" in w for w in why) else REORDERED
        counts = ", ".join(f"{n} {w}" for w, n in sorted(collections.Counter(why).items()))
        return kind, f"the PTX of the {len(why)} configurations compiled: {counts} (lens.same_schedule)"
    if program_kill is not None:
        return "program", program_kill
    return None, ""


SAME = "same code"         # a mutant that compiles to the kernel's very PTX everywhere: equivalent, no test can kill it
REORDERED = "same order"   # the kernel's instructions, only independent ones moved: every dependent pair in order
FENCED = "more fences"     # the kernel's code and fences more: a fence only forbids executions, it allows none
EQUIVALENT = (SAME, REORDERED, FENCED)


def mutated_lines(m: Mutant):
    """(file path relative to the repository, [line, ...]) of the lines the mutant changes or removes, in the
    package's file."""
    modname, fname = m.unit.rsplit(".", 1)
    start = _unit_source(m)[1]
    path = Path(sys.modules[modname].__file__).resolve().relative_to(ROOT).as_posix()
    out = []
    for hunk in re.finditer(r"^@@ -(\d+)[^\n]*\n((?:[ +-][^\n]*\n?)*)", m.diff, re.M):
        line = int(hunk.group(1))
        for text in hunk.group(2).splitlines():
            if text.startswith("-"):
                out.append(start + line - 1)
            if not text.startswith("+"):
                line += 1
    return path, out


def _under_a_branch(m: Mutant, lines) -> bool:
    """Whether one of ``lines`` lies inside an ``if`` / ``elif`` / ``else`` block of the unit's source."""
    src, start = _unit_source(m)
    for line in lines:
        i = line - start
        indent = len(src[i]) - len(src[i].lstrip())
        for above in reversed(src[:i]):
            code = above.split("#")[0].rstrip()
            if not code.strip():
                continue
            ind = len(code) - len(code.lstrip())
            if ind < indent:
                if code.lstrip().startswith(("if ", "elif ", "else")):
                    return True
                indent = ind
    return False


def compiled_anywhere(m: Mutant, ptxs) -> bool:
    """Whether a line the mutant changes is live in the configurations compiled: a ``.loc`` of ``ptxs`` names it, it
    lies in no ``if`` block (constexpr arithmetic and layouts leave no ``.loc`` but always run), or it is arithmetic
    that a compiled line of its block reads (:func:`_live_in`). A line in a branch that no ``.loc`` names may be
    dead in every configuration (a constexpr the catalog never sets): then the same PTX proves nothing, and the
    mutant is no equivalent."""
    path, lines = mutated_lines(m)
    if lines and not _under_a_branch(m, lines):
        return True
    src, start = _unit_source(m)
    for ptx in ptxs:
        files = {n for n, f in re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.M) if f.endswith(path)}
        locs = {int(ln) for n, ln in re.findall(r"^\s*\.loc\s+(\d+)\s+(\d+)", ptx, re.M) if n in files}
        if _live_in(src, start, lines, locs):
            return True
    return False


def _unit_source(m: Mutant):
    """(source lines, first line number) of the mutated unit in the package's file."""
    modname, fname = m.unit.rsplit(".", 1)
    return inspect.getsourcelines(getattr(sys.modules[modname], fname).fn)


def _live_in(src: list, start: int, lines, locs) -> bool:
    """Whether one of ``lines`` (numbers in the file; ``src`` its function's lines from line ``start``) is live
    where the compiled code's ``.loc`` lines are ``locs``: a ``.loc`` names it, or it is an assignment of arithmetic
    alone (:func:`_assigned_by`) and a later line of its block that a ``.loc`` names reads a name it assigns. Index
    arithmetic next to a barrier operation leaves no ``.loc`` of its own; arithmetic read only under a dead branch,
    or a call whose body compiles to nothing (the cost kernel's ``count_seen`` without ``seen_ptr``), is not live."""
    if set(lines) & set(locs):
        return True
    for line in lines:
        names = _assigned_by(src[line - start])
        if names and any(n > line and n in locs and re.search(rf"\b({'|'.join(map(re.escape, names))})\b",
                                                             src[n - start].split("#")[0])
                         for n in _block_of(src, start, line)):
            return True
    return False


def _assigned_by(text: str) -> set:
    """The names a source line assigns, if it is an assignment of arithmetic alone (no call: a helper's body may
    compile to nothing), else an empty set."""
    import ast
    try:
        tree = ast.parse(text.split("#")[0].strip())
    except SyntaxError:
        return set()
    stmt = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or any(
            isinstance(node, ast.Call) for node in ast.walk(stmt)):
        return set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _block_of(src: list, start: int, line: int) -> range:
    """The lines of the block that holds ``line``: the contiguous run around it indented at least as deep (blank
    and comment lines included). A jit function's block runs whole or not at all (no early exit inside it)."""
    i = line - start

    def indent(k):
        code = src[k].split("#")[0].rstrip()
        return None if not code.strip() else len(code) - len(code.lstrip())
    depth = indent(i)
    if depth is None:
        return range(line, line + 1)
    lo = hi = i
    while lo > 0 and (indent(lo - 1) is None or indent(lo - 1) >= depth):
        lo -= 1
    while hi + 1 < len(src) and (indent(hi + 1) is None or indent(hi + 1) >= depth):
        hi += 1
    return range(start + lo, start + hi + 1)


def models() -> list:
    """The protocol models tied to a kernel: every chapter's (``protocols.kernel_models``) and the primer's rings."""
    return kernel_models() + [tma_ring(), ws_ring()]


# CPU tests that read a kernel: the files that name it (broad files, which name many kernels, filtered with -k).
_NOT_CPU = re.compile(r"_gpu\.py$|test_consan|test_rendered_book|test_slides|test_i18n|test_layers|test_mutation|"
                      r"test_notebook_format")


def test_files(name_list, units) -> tuple:
    """(files that are about the kernel, broad files that name it among many others). A chapter's own file
    (``test_<chapter module>.py``, e.g. tests/test_wide_tiles.py) is about its kernels whether or not it names them
    (it may reach them through the module's spec factories only)."""
    words = set(name_list) | {u.rsplit(".", 1)[1] for u in units if u.endswith(("_kernel", "_partition"))}
    chapters = {f"test_{catalog.spec(n).fn.fn.__module__.rsplit('.', 1)[-1]}.py" for n in name_list}
    own, broad = [], []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if _NOT_CPU.search(path.name):
            continue
        text = path.read_text()
        if path.name in chapters:
            own.append(path)
            continue
        if not any(re.search(rf"\b{re.escape(w)}\b", text) for w in words):
            continue
        kernels_named = sum(1 for n in catalog.registered() if re.search(rf"\b{n}\b", text))
        (broad if kernels_named > 6 or path.name in ("test_lens.py", "test_init_fences.py",
                                                      "test_protocols_ptx.py") else own).append(path)
    return own, broad


def run_tests(m: Mutant, name_list, mutant_file: Path, timeout: int = 900) -> tuple:
    """(killed, detail): the CPU tests that read the kernel, with the mutant patched in."""
    own, broad = test_files(name_list, [m.unit])
    runs = []
    if own:
        runs.append([str(p) for p in own])
    if broad:
        runs.append([str(p) for p in broad] + ["-k", " or ".join(name_list)])
    for args in runs:
        killed, detail = _pytest(["-m", "not book and not gpu and not source_text and not mutants", "-W", "ignore"] + args, mutant_file,
                                 timeout,
                                 f"tests timed out after {timeout} s ({' '.join(Path(a).name for a in args[:3])})")
        if killed:
            return killed, detail
    return False, ""


def _pytest(args, mutant_file: Path, timeout: int, on_timeout: str) -> tuple:
    """(killed, detail) of one pytest run with the mutant patched in: a failure, an error exit or a timeout kills."""
    env = {**os.environ, ENV: str(mutant_file),          # the repository first, then what this Python was given
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header"] + args
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return True, on_timeout
    if r.returncode == 1:
        failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED")]
        return True, (failed[0][7:] if failed else r.stdout.strip().splitlines()[-1])[:200]
    if r.returncode < 0:                                  # the test process died (an abort, a fault): a kill
        return True, f"the tests died with signal {-r.returncode}"
    if r.returncode not in (0, 5):                        # 2-4: interrupted, internal or usage error: no verdict
        last = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
        raise HarnessError(f"pytest exit {r.returncode} ({' '.join(args[-3:])[:80]}): {last[0][:200]}")
    summary = [ln for ln in r.stdout.strip().splitlines() if " passed" in ln or " skipped" in ln or "no tests" in ln]
    return False, re.sub(r"\s+in [\d.]+s.*$", "", summary[-1].strip("= ")) if summary else ""


class HarnessError(RuntimeError):
    """The tests could not run (pytest's own error, not a failing test): nothing is recorded as killed."""


def runs_here(name_list) -> bool:
    """Whether this GPU runs any of these catalog kernels: a kernel whose spec targets only sm_100a (tcgen05) has
    GPU tests that skip on a Hopper, so running them would only spend device time."""
    dev = hardware.device()
    needs = {"sm_90a": hardware.WGMMA, "sm_100a": hardware.TCGEN05}      # what each lens target runs on
    return any(dev.has(needs[t]) for n in name_list for t in catalog.spec(n).targets)


def run_gpu_tests(m: Mutant, name_list, mutant_file: Path, timeout: int = 300) -> tuple:
    """(killed, detail): the GPU tests of the kernel's chapter with the mutant patched in (on a GPU)."""
    words = set(name_list) | {m.unit.rsplit(".", 1)[1]} if m.unit.endswith("_kernel") else set(name_list)
    chapters = {catalog.spec(n).fn.fn.__module__.rsplit(".", 1)[-1] for n in name_list}   # e.g. softmax, barriers
    own = [p for c in chapters for p in (ROOT / "tests").glob(f"test_{c}_*.py")]    # e.g. test_softmax_staged.py
    files = [str(p) for p in sorted(set((ROOT / "tests").glob("test_*gpu*.py")) | set(own)) +
             [ROOT / "tests/test_hopper_matmul.py", ROOT / "tests/test_clc_matmul.py", ROOT / "tests/test_two_cta.py",
              ROOT / "tests/test_wide_tiles.py"]
             if any(re.search(rf"\b{re.escape(w)}\b", p.read_text()) for w in words)
             or any(p.name in (f"test_{c}_gpu.py", f"test_{c}.py") for c in chapters)]
    if not files:
        return False, "no GPU test names it"
    killed, detail = _pytest(["-m", "gpu"] + files, mutant_file, timeout,
                             f"GPU tests timed out after {timeout} s (a hang is a kill)")
    if not killed and " passed" not in detail:              # every test skipped: nothing ran
        return False, f"GPU tests did not run: {detail} ({', '.join(Path(f).name for f in files)})"
    return killed, detail if killed else f"GPU tests passed: {detail} ({', '.join(Path(f).name for f in files)})"


# ------------------------------------------------------------------ the run


def sample(all_mutants, per_kernel: int) -> list:
    """At most ``per_kernel`` mutants per unit, spread over the operators (round robin, in catalog order)."""
    by_unit = {}
    for names, m in all_mutants:
        by_unit.setdefault(m.unit, {}).setdefault(m.operator, []).append((names, m))
    out = []
    for ops in by_unit.values():
        picked, lists = [], list(ops.values())
        while len(picked) < per_kernel and any(lists):
            for lst in lists:
                if lst and len(picked) < per_kernel:
                    picked.append(lst.pop(0))
        out += picked
    return out


COLUMNS = ["unit", "kernels", "operator", "site", "verdict", "killer", "detail", "diff", "why_cpu_missed"]


def run(names=None, per_kernel=None, tests=True, gpu=False, configs="all", log=print, shard=(0, 1),
        span=(0, None)) -> dict:
    todo = mutants(names)
    if per_kernel:
        todo = sample(todo, per_kernel)
    todo = todo[shard[0]::shard[1]][span[0]:span[1]]
    folder = Path(tempfile.mkdtemp(prefix="mutants_"))
    rows, t0 = [], time.time()
    for i, (name_list, m) in enumerate(todo):
        t = time.time()
        try:
            built = build(m.unit, m.source, name_list)
            killer, detail = cpu_killers(name_list, m, built, configs)
        except Exception as exc:               # a mutant that does not even build (a syntax error) does not compile
            killer, detail = "no compile", f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        if killer is None and tests:
            path = write_mutant(m, folder)
            killed, detail = run_tests(m, name_list, path)
            killer = "tests" if killed else None
        if killer is None and gpu:
            path = write_mutant(m, folder)
            killed, detail = run_gpu_tests(m, name_list, path)
            killer = "gpu tests" if killed else None
        verdict = _verdict(killer)
        rows.append([m.unit, m.kernel, m.operator, m.site, verdict, killer, detail, m.diff])
        log(f"[{i + 1}/{len(todo)}] {time.time() - t:5.1f}s {verdict:12s} {killer or '':10s} {m.unit} | {m.operator}"
            f" | {m.site[:70]}")
    return summary(rows, time.time() - t0, per_kernel, tests, gpu, configs)


def _verdict(killer) -> str:
    return {"no compile": "not compiled", SAME: "equivalent", REORDERED: "equivalent", FENCED: "equivalent",
            None: "survived"}.get(killer, "killed")


def summary(rows, seconds, per_kernel, tests, gpu, configs) -> dict:
    """The record of a run: totals, per unit, and every row; a survivor's row says why no CPU check saw it."""
    rows = [r[:8] + [why_survived(r[0], r[2], r[3]) if r[4] == "survived" else ""] for r in rows]
    per = {}
    for unit, kernels, op, site, verdict, killer, *_ in rows:
        d = per.setdefault(unit, {"kernels": kernels, "mutants": 0, "compiled": 0, "equivalent": 0, "killed_cpu": 0,
                                  "killed_gpu": 0, "survived": 0})
        d["mutants"] += 1
        d["compiled"] += verdict != "not compiled"
        d["equivalent"] += verdict == "equivalent"
        d["killed_cpu"] += verdict == "killed" and killer != "gpu tests"
        d["killed_gpu"] += killer == "gpu tests"
        d["survived"] += verdict == "survived"
    compiled = sum(d["compiled"] for d in per.values())
    equivalent = sum(d["equivalent"] for d in per.values())
    cpu = sum(d["killed_cpu"] for d in per.values())
    return {"benchmark": "mutation_gpu" if gpu else "mutation_cpu", "date": datetime.date.today().isoformat(),
            "method": {"timer": "wall clock of the whole run (a check, not a benchmark)",
                       "harness": "python -m multicta_kernels.cli.mutate", "operators": list(OPERATORS),
                       "killers": ["compile", "expect", "census", "order", "program", "init fence", "tests"]
                       + (["gpu tests"] if gpu else []),
                       "sample_per_unit": per_kernel, "configurations": configs, "cpu_tests": tests, "seconds":
                       round(seconds, 1)},
            "totals": {"mutants": len(rows), "compiled": compiled, "equivalent": equivalent, "killed_cpu": cpu,
                       "killed_gpu": sum(d["killed_gpu"] for d in per.values()),
                       "survived": sum(d["survived"] for d in per.values()),
                       "cpu_score": round(cpu / (compiled - equivalent), 4) if compiled > equivalent else None},
            "per_unit": per, "ceilings": {}, "columns": COLUMNS, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m multicta_kernels.cli.mutate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", nargs="*", help="catalog names (default: every kernel)")
    ap.add_argument("--sample", type=int, default=None, help="at most this many mutants per unit (CI)")
    ap.add_argument("--configs", type=int, default=None, help="compile only the first N configurations per kernel")
    ap.add_argument("--no-tests", action="store_true", help="skip the pytest killer (in-process killers only)")
    ap.add_argument("--gpu", action="store_true", help="run the CPU survivors against the GPU tests (needs a GPU)")
    ap.add_argument("--from", dest="source", help="rerun only the survivors recorded in this JSON: against the CPU tests,"
                    " or with --gpu the GPU tests")
    ap.add_argument("--recheck", action="store_true", help="with --from: the survivors (and the program's kills) against this version's "
                    "in-process killers")
    ap.add_argument("--jobs", type=int, default=1, help="with --from: test runs at once (each a pytest process)")
    ap.add_argument("--budget", type=float, default=None, help="with --from: seconds after which no new test run starts")
    ap.add_argument("--shard", default="0/1", help="I/N: every N-th mutant from the I-th (run N processes, then "
                    "--merge their JSON)")
    ap.add_argument("--span", default="0:", help="START:STOP: only these mutants (in catalog order)")
    ap.add_argument("--merge", nargs="*", help="merge the JSON of shards into --out")
    ap.add_argument("--out", default=None, help="write the result JSON here")
    ap.add_argument("--max-survivors", type=int, default=None, help="exit 1 if more mutants than this survive")
    a = ap.parse_args(argv)
    if a.merge:
        parts = [json.loads(Path(x).read_text()) for x in a.merge]
        rows = [r for p in parts for r in p["rows"]]
        order_of = {m.key: i for i, (_, m) in enumerate(mutants())}
        rows.sort(key=lambda r: order_of.get(f"{r[0]} | {r[2]} | {r[3]}", 10**9))
        m0 = parts[0]["method"]
        res = summary(rows, max(p["method"]["seconds"] for p in parts), m0["sample_per_unit"], m0["cpu_tests"],
                      "gpu tests" in m0["killers"], m0["configurations"])
        res["method"]["shards"] = len(parts)
    elif a.source:
        res = rerun(json.loads(Path(a.source).read_text()), a.gpu, a.budget, a.recheck, a.configs or "all", a.jobs)
    else:
        i, n = (int(x) for x in a.shard.split("/"))
        lo, hi = a.span.split(":")
        res = run(a.kernels, a.sample, not a.no_tests, a.gpu, a.configs or "all", shard=(i, n),
                  span=(int(lo or 0), int(hi) if hi else None))
    res.update({"gpu": _gpu_name(), "triton": _version("triton"), "torch": _version("torch")})
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    t = res["totals"]
    print(f"{t['mutants']} mutants, {t['compiled']} compile, {t['killed_cpu']} killed on the CPU, "
          f"{t['killed_gpu']} on the GPU, {t['survived']} survive (CPU score {t['cpu_score']})")
    for row in res["rows"]:
        if row[4] == "survived":
            print(f"SURVIVED {row[0]} | {row[2]} | {row[3]}\n{row[7]}")
    return int(a.max_survivors is not None and t["survived"] > a.max_survivors)


def rerun(previous: dict, gpu: bool, budget_s: float | None = None, recheck: bool = False, configs="all",
          jobs: int = 1) -> dict:
    """A recorded run with its survivors run again: against the CPU tests (``gpu=False``: the pytest killer of a run
    made with ``--no-tests``), the GPU tests, or (``recheck``) the in-process killers of this version. Killed rows are kept as recorded. ``budget_s``: stop starting new
    pytest runs after this many seconds (the rest stay survivors, their detail says so). A recheck also runs the
    rows the program killed: that verdict comes after the equivalence check (:func:`cpu_killers`), so a sharper
    equivalence can take it back; the killers decided before it cannot change."""
    folder = Path(tempfile.mkdtemp(prefix="mutants_"))
    rows, t0, pending = [], time.time(), []
    col = {c: i for i, c in enumerate(previous["columns"])}
    cat = {m.key: (names, m) for names, m in mutants()}
    assert len(cat) == len(mutants()), "two mutants share a key"
    twins = collections.Counter()
    for n, row in enumerate(previous["rows"]):
        key = f"{row[col['unit']]} | {row[col['operator']]} | {row[col['site']]}"
        renamed = False
        if key not in cat:          # a record from before twins had keys of their own: the k-th row is the k-th twin
            twins[key] += 1
            count = sum(1 for k in cat if re.fullmatch(re.escape(key) + r" \(\d+ of \d+\)", k))
            twin = f"{key} ({twins[key]} of {count})"
            if twin in cat:
                key, renamed = twin, True
                row = row[:col["site"]] + [cat[key][1].site] + row[col["site"] + 1:]
        # a recheck runs the program's kills again (decided after the equivalence check, which a sharper one can
        # take back) and every twin of a record whose reruns ran one twin under both names
        again = recheck and (row[col["killer"]] == "program" or renamed)
        if row[col["verdict"]] != "survived" and not again:
            rows.append(row)
            continue
        if key not in cat:
            rows.append(row[:4] + ["survived", None, "mutant no longer generated", row[col["diff"]]])
            continue
        if recheck and budget_s is not None and time.time() - t0 > budget_s:
            rows.append(row[:5] + [None, "tests not run (time budget)", row[col["diff"]]])
            continue
        names, m = cat[key]
        if recheck:                                         # the in-process killers again (new ones since the run)
            killer, detail = cpu_killers(names, m, build(m.unit, m.source, names), configs)
            rows.append([m.unit, m.kernel, m.operator, m.site, _verdict(killer), killer, detail, m.diff])
        else:
            if gpu and not runs_here(names):
                rows.append(row[:5] + [None, f"not run: its kernels ({', '.join(names)}) do not run on this GPU",
                                       row[col["diff"]]])
                continue
            rows.append(None)                               # filled below: the test runs, ``jobs`` at a time
            pending.append((len(rows) - 1, names, m, write_mutant(m, folder)))
            continue
        print(f"[{n + 1}/{len(previous['rows'])}] {rows[-1][4]:9s} {rows[-1][5] or '':9s} {m.key[:110]}", flush=True)

    def test(job):
        i, names, m, path = job
        if budget_s is not None and time.time() - t0 > budget_s:
            return i, [m.unit, m.kernel, m.operator, m.site, "survived", None, "tests not run (time budget)", m.diff]
        try:
            killed, detail = run_gpu_tests(m, names, path) if gpu else run_tests(m, names, path)
        except HarnessError as exc:                      # no verdict: recorded as not run, with pytest's line
            return i, [m.unit, m.kernel, m.operator, m.site, "survived", None, f"tests not run: {exc}", m.diff]
        return i, [m.unit, m.kernel, m.operator, m.site, "killed" if killed else "survived",
                   ("gpu tests" if gpu else "tests") if killed else None, detail, m.diff]

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, jobs)) as pool:          # each job is a pytest process of its own
        for i, row in pool.map(test, pending):
            rows[i] = row
            print(f"[{i + 1}/{len(previous['rows'])}] {row[4]:9s} {row[5] or '':9s} {row[0]} | {row[2]} | "
                  f"{row[3][:60]}", flush=True)
    method = previous.get("method", {})
    res = summary(rows, time.time() - t0 + method.get("seconds", 0), method.get("sample_per_unit"),
                  method.get("cpu_tests", True) if recheck else True, gpu, method.get("configurations", "all"))
    res["method"]["reran_survivors_of"] = previous.get("benchmark"), previous.get("date")
    return res


def _gpu_name():
    try:
        import torch
        return torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)"
    except Exception:
        return "none (CPU)"


def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
