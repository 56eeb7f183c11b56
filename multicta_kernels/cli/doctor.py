"""The self-test of a new GPU node: ``python -m multicta_kernels.cli.doctor``.

It prints the environment and which chapters run live here, then runs every live kernel of every
chapter that this GPU supports, each on small fresh inputs checked element by element against
PyTorch. The checks run in child processes, each in two phases with their own time limits: a
compile phase (every kernel the check launches is compiled and loaded, none is launched) and a
run phase (the check itself). A kernel that hangs is reported as HANG (its process is killed: a
cluster kernel cannot be stopped from inside the process that launched it), a compile that does
not finish as SLOW, one that kills its process as CRASH with its last lines, a wrong answer as
FAIL; each non-PASS line names its phase. After a hang, a crash or any failure other than a wrong
answer (a sticky CUDA error poisons the process) the remaining checks go on in a fresh child. A
summary table follows; the exit status is non-zero on any failure.

    python -m multicta_kernels.cli.doctor               # the check before a workshop
    python -m multicta_kernels.cli.doctor --sanitize    # the same under Triton's concurrency sanitizer
    python -m multicta_kernels.cli.doctor --record      # write results/<gpu>/doctor.json
    python -m multicta_kernels.cli.doctor --record --bench   # ... and record this GPU's benchmarks (in
                                                         # children with time limits, like the checks)
    python -m multicta_kernels.cli.doctor --dry-run     # on any machine: the tcgen05 checks walked to their
                                                    # launches with a B200 pretended (make blackwell-dry-run)

``MULTICTA_DOCTOR_INJECT=hang:softmax,crash:exchange,sticky:ping_pong`` injects faults into the named
checks to show what the report says (see :data:`FAULTS`); with ``--record`` such a run is written to
``doctor_injected.json``, never over the GPU's ``doctor.json``.

The book's "ran on ..." labels (README, chapter banners, workshop guide) are generated from the
recorded ``doctor.json`` files by :func:`multicta_kernels.results.label`, never typed (``tools/update_docs.py``
writes the tables in README.md and book/workshop.md: the package writes no file outside results/).
"""
from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import triton
import triton.language as tl

from ..core import dryrun, hardware
from ..core.hardware import TCGEN05
from ..results import store
from ..results.labels import CHAPTER_FEATURES, CHAPTERS, gpu_folder
from ..results.store import RESULTS
from .recorders import FOLDER_ENV, RECORD_TIMEOUT, RECORDERS
from .selftests import CHECKS, DEMO, Check


INJECT_ENV = "MULTICTA_DOCTOR_INJECT"
FAULTS = {
    "hang": "launches a kernel that spins forever (the run phase's time limit ends it: HANG)",
    "crash": "aborts the process (CRASH)",
    "sticky": "launches a kernel that executes `trap;`: the CUDA context is poisoned (FAIL, then a fresh child)",
    "slow-compile": "sleeps in the compile phase (its time limit ends it: SLOW)",
}


@triton.jit
def spin_kernel(flag):
    """Spins until ``*flag`` is non-zero; nobody sets it (volatile loads: every iteration reads memory)."""
    seen = tl.load(flag, volatile=True)
    while seen == 0:
        seen = tl.load(flag, volatile=True)
    tl.store(flag + 1, seen)


@triton.jit
def trap_kernel(flag):
    """Executes PTX ``trap;``: the kernel aborts and the CUDA context is unusable (a sticky error)."""
    x = tl.load(flag)
    y = tl.inline_asm_elementwise("trap;\n\tmov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(flag, y)


def faults(text: str | None = None, known=None) -> dict:
    """{check: fault} from ``KIND:CHECK,...`` (by default the environment's MULTICTA_DOCTOR_INJECT)."""
    text = os.environ.get(INJECT_ENV, "") if text is None else text
    out = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        kind, _, name = item.partition(":")
        if kind not in FAULTS or not name:
            raise ValueError(f"{INJECT_ENV}: each fault is KIND:CHECK with KIND one of {', '.join(FAULTS)}, "
                             f"got {item!r}")
        if known is not None and name not in known:
            raise ValueError(f"{INJECT_ENV}: no check {name!r}; the checks are {', '.join(known)}")
        out[name] = kind
    return out


def _inject(kind: str | None) -> None:
    """Do the fault ``kind`` here: inside a compile-phase session its kernel is only compiled."""
    if kind is None:
        return
    compiling = dryrun.active() is not None
    if kind == "slow-compile":
        if compiling:
            time.sleep(3600)
        return
    if kind == "crash":
        if not compiling:
            print("injected fault: aborting the process", flush=True)
            os.abort()
        return
    import torch
    flag = torch.zeros(2, dtype=torch.int32, device=hardware.tensor_device())
    (spin_kernel if kind == "hang" else trap_kernel)[(1,)](flag)
    if not compiling:
        print(f"injected fault: {kind} kernel launched", flush=True)
        torch.cuda.synchronize()              # hang: never returns; sticky: raises the CUDA error
        print(f"injected fault: the {kind} kernel returned", flush=True)


# ------------------------------------------------------------------------------------ the runner

COMPILE_TIMEOUT = 600.0      # seconds for a check's compile phase: its kernels compiled and loaded, none launched
STARTUP_TIMEOUT = 120.0      # a child's imports before its first check, or the pause between two checks
DRY_RUN_ENV = "MULTICTA_DOCTOR_DRY_RUN"
STATUSES = ("PASS", "FAIL", "HANG", "CRASH", "SLOW", "SKIP", "DRY")


@dataclass
class Outcome:
    check: Check
    status: str            # PASS, FAIL, HANG (run phase over its limit), CRASH, SLOW (compile phase over its
                           # limit), SKIP, DRY (walked to its launches in a dry run)
    seconds: float         # the run phase (a dry run: the compile phase)
    detail: str
    compile_seconds: float = 0.0


def _child(names: list[str]) -> None:
    """Run checks in this process, reporting each on stdout between markers the parent reads: @@COMPILE,
    then @@START (the run phase) and @@PASS / @@FAIL, or @@DRY in a dry run. After a failure that is not
    an AssertionError (a wrong answer) this process may be unusable: it says @@RESTART and exits."""
    import torch
    dry = os.environ.get(DRY_RUN_ENV) == "1"
    injected = faults()
    if os.environ.get("TRITON_INSTRUMENTATION_MODE") == "consan" and not dry:   # its checks need global scratch
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    for name in names:
        check = CHECKS.get(name) or DEMO.get(name) or RECORDERS[name]
        print(f"@@COMPILE {name}", flush=True)
        body = check.fn
        try:
            if check.phases or dry:
                with dryrun.dry_run() if dry else dryrun.compile_only() as session:
                    _inject(injected.get(name))
                    walked = body()
                if dry:
                    print(f"@@DRY {name} {session.summary()}" + (f"; the check: {walked}" if walked else ""), flush=True)
                    continue
            print(f"@@START {name}", flush=True)
            _inject(injected.get(name))
            detail = body()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except AssertionError as exc:           # a wrong answer: this process is fine
            print(f"@@FAIL {name} {' '.join(str(exc).split())[:400]}", flush=True)
            continue
        except Exception as exc:  # a wrapper's, compiler's or CUDA's error: the next checks get a fresh process
            print(f"@@FAIL {name} {type(exc).__name__}: {' '.join(str(exc).split())[:400]}", flush=True)
            print("@@RESTART", flush=True)
            return
        print(f"@@PASS {name} {detail or ''}", flush=True)


def _reader(stream, q):
    for line in iter(stream.readline, ""):
        q.put(line.rstrip("\n"))
    q.put(None)


def run_checks(checks: list[Check], timeout: float = 60.0, env: dict | None = None, log=print,
               compile_timeout: float = COMPILE_TIMEOUT, dry_run: bool = False) -> list[Outcome]:
    """Run ``checks`` in child processes. A check's compile phase (every kernel it launches compiled and loaded,
    none launched) has ``compile_timeout`` seconds, its run phase ``timeout``: HANG is the GPU's, never a slow
    compiler's. A hang, a crash, or any failure that is not an AssertionError ends the child (a sticky CUDA
    error would fail every later check in it) and the remaining checks go on in a fresh one. ``dry_run``: each
    check walked to its launches with a B200 pretended (:mod:`multicta_kernels.core.dryrun`), reported as DRY."""
    outcomes: list[Outcome] = []
    todo = list(checks)
    limits = {"startup": STARTUP_TIMEOUT, "compile": compile_timeout, "run": timeout}
    while todo:
        cmd = [sys.executable, "-u", "-m", "multicta_kernels.cli.doctor", "--child", ",".join(c.name for c in todo)]
        child_env = {**os.environ, **(env or {}), **({DRY_RUN_ENV: "1"} if dry_run else {})}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env)
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        current, phase, started, compiled, tail, restart = None, "startup", time.monotonic(), 0.0, [], False

        def finish(status, detail, seconds):
            nonlocal todo, current
            o = Outcome(current, status, seconds, detail, compiled)
            outcomes.append(o)
            log(_line(o))
            todo = todo[todo.index(current) + 1:]
            current = None
        while True:
            limit = limits[phase] if current is not None or phase == "startup" else STARTUP_TIMEOUT
            try:
                line = q.get(timeout=max(0.05, started + limit - time.monotonic()))
            except queue.Empty:
                line = "@@TIMEOUT"
            now = time.monotonic()
            if line is None or line == "@@TIMEOUT":
                if line == "@@TIMEOUT":
                    proc.kill()
                proc.wait()
                if line is None and restart and current is None:
                    break                                     # it said so: the rest in a fresh child
                current = current or todo[0]
                last = " | ".join(tail[-3:])
                if line == "@@TIMEOUT":
                    finish(*_timed_out(current, phase, limit, compiled, last), now - started)
                else:
                    where = {"startup": "starting", "between": "between checks", "compile": "compile phase",
                             "run": "run phase"}[phase] if not (dry_run and phase == "compile") else "dry run"
                    finish("CRASH", f"{where}: exit status {proc.returncode}: {last or 'no output'}"[:400],
                           now - started)
                break
            if line.startswith("@@COMPILE "):
                current = next(c for c in todo if c.name == line.split()[1])
                phase, started, compiled, tail = "compile", now, 0.0, []
                if not current.phases and not dry_run:
                    phase = "run"                             # one phase, compile included (the recorders)
            elif line.startswith("@@START "):
                phase, compiled, started = "run", now - started, now
            elif line.startswith(("@@PASS ", "@@FAIL ", "@@DRY ")):
                kind, _name, *rest = line[2:].split(" ", 2)
                detail = rest[0] if rest else ""
                if phase == "compile":
                    compiled = now - started
                    if kind == "FAIL":
                        detail = f"{'dry run' if dry_run else 'compile phase'}: {detail}"
                finish(kind, detail, 0.0 if phase == "compile" and kind == "FAIL" else now - started)
                phase, started = "between", now
                if not todo:
                    try:
                        proc.wait(timeout=STARTUP_TIMEOUT)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                    break
            elif line == "@@RESTART":
                restart = True
            elif line.strip():
                tail.append(line.strip())
        if not todo:
            break
    return outcomes


def _timed_out(check: Check, phase: str, limit: float, compiled: float, last: str) -> tuple[str, str]:
    """(status, detail) of a check whose child said nothing for ``limit`` seconds in ``phase``."""
    said = f"; last output: {last}" if last else ""
    if phase == "run" and check.phases:
        return "HANG", (f"run phase: no answer within {limit:.0f} s (its kernels had compiled in {compiled:.1f} s "
                        f"before the clock started); the process was killed{said}")[:400]
    if phase == "run":
        return "HANG", f"no answer within {limit:.0f} s, compile included; the process was killed{said}"[:400]
    if phase == "compile":
        return "SLOW", (f"compile phase: not compiled within {limit:.0f} s (nothing of it launched yet); "
                        f"the process was killed{said}")[:400]
    where = "starting" if phase == "startup" else "between checks"
    return "SLOW", f"{where}: the child process said nothing for {limit:.0f} s; it was killed{said}"[:400]


def _line(o: Outcome) -> str:
    if o.status == "DRY":
        took = f"{o.seconds:6.1f} s compile         "
    else:
        took = f"{o.seconds:6.1f} s run, {o.compile_seconds:5.1f} s compile"
    return f"[doctor] ch{o.check.chapter} {o.check.name:<30} {o.status:<5} {took}  {o.detail}"


# ------------------------------------------------------------------------------ what runs where

def chapters_here(dev: hardware.Device | None = None) -> list[list[str]]:
    """One row per chapter: which of its features run live on ``dev``, which are read through the lens."""
    dev = dev or hardware.device()
    rows = []
    for ch, title in CHAPTERS.items():
        live = [f.name for f in CHAPTER_FEATURES[ch] if dev.has(f)]
        lens = [f.name for f in CHAPTER_FEATURES[ch] if not dev.has(f)]
        rows.append([ch, title, ", ".join(live) or "-", ", ".join(lens) or "-"])
    return rows


def environment_lines() -> list[str]:
    import platform
    lines = [f"python {platform.python_version()}"]
    try:
        import triton
        ok = triton.__version__.startswith("3.9")
        lines.append(f"triton {triton.__version__}" + ("" if ok else "  <-- 3.9.x is required (pip install triton==3.9.0)"))
    except ImportError:
        lines.append("triton: not installed (pip install triton==3.9.0)")
    import torch
    lines.append(f"torch {torch.__version__}, CUDA {torch.version.cuda}")
    dev = hardware.device()
    lines.append(f"GPU: {dev}" + (f", {dev.sms} SMs" if dev.sms else ""))
    if dev.capability is not None:
        env = store.environment()
        lines.append(f"driver {env.get('driver')}")
        try:
            from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version
            arch = 10 * dev.capability[0] + dev.capability[1]
            version = get_ptxas_version(arch).strip().splitlines()[-1]
            lines.append(f"ptxas {get_ptxas(arch).path}: {version}")
        except Exception as exc:  # ptxas is looked up lazily; say what went wrong
            lines.append(f"ptxas: not found ({type(exc).__name__}: {exc})")
    return lines


# ------------------------------------------------------------------------------------------ CLI

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m multicta_kernels.cli.doctor", description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds for each check's run phase, after its kernels compiled (default 60)")
    ap.add_argument("--compile-timeout", type=float, default=COMPILE_TIMEOUT,
                    help=f"seconds for each check's compile phase (default {COMPILE_TIMEOUT:.0f})")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU needed: walk the tcgen05 checks to their launches with a B200 pretended")
    ap.add_argument("--only", help="comma-separated check names or chapter numbers")
    ap.add_argument("--sanitize", action="store_true", help="run under TRITON_INSTRUMENTATION_MODE=consan (slow)")
    ap.add_argument("--record", action="store_true", help="write results/<gpu>/doctor.json")
    ap.add_argument("--bench", action="store_true", help="with --record: also record this GPU's Blackwell benchmarks")
    ap.add_argument("--out", help="with --record: where to write (default results/<gpu>/doctor.json)")
    ap.add_argument("--list", action="store_true", help="list the checks and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if (args.bench or args.out) and not args.record:
        ap.error("--bench and --out go with --record (they say what to record, and where)")
    if args.only:
        try:
            plan(hardware.device(), args.only)
        except ValueError as exc:
            ap.error(str(exc))
    if args.child:
        _child(args.child.split(","))
        return 0
    try:
        faults(known={**CHECKS, **DEMO})
    except ValueError as exc:
        ap.error(str(exc))
    if args.dry_run:
        if args.record or args.sanitize:
            ap.error("--dry-run launches nothing: there is nothing to record or to sanitize")
        return dry_run(args.only, args.compile_timeout)
    if args.list:
        for c in CHECKS.values():
            print(f"ch{c.chapter} {c.name:<30} needs {c.feature.name:<8} {c.what}")
        return 0
    print("[doctor] " + "\n[doctor] ".join(environment_lines()))
    dev = hardware.device()
    print("[doctor] chapters:   live here            | lens only")
    for ch, title, live, lens in chapters_here(dev):
        print(f"[doctor]   {ch}. {title:<40} {live:<20} | {lens}")
    todo, skipped = plan(dev, args.only)
    if not todo:
        print(f"[doctor] nothing runs live on {dev}: the book's CPU path (lens, models, recorded results) is all there is")
        return 0
    env = {"TRITON_INSTRUMENTATION_MODE": "consan"} if args.sanitize else {}
    scale = 10 if args.sanitize else 1
    timeout, compile_timeout = args.timeout * scale, args.compile_timeout * (2 if args.sanitize else 1)
    injected = faults()
    if injected:
        print("[doctor] injected faults (MULTICTA_DOCTOR_INJECT): "
              + ", ".join(f"{kind} in {name} ({FAULTS[kind]})" for name, kind in injected.items()))
    print(f"[doctor] running {len(todo)} checks, each in a child process: a compile phase of at most "
          f"{compile_timeout:.0f} s (kernels compiled and loaded, none launched), then a run phase of at most "
          f"{timeout:.0f} s" + (" under the concurrency sanitizer" if args.sanitize else ""))
    t0 = time.monotonic()
    outcomes = run_checks(todo, timeout, env, compile_timeout=compile_timeout)
    outcomes += skipped
    bad = [o for o in outcomes if o.status not in ("PASS", "SKIP")]
    print(f"\n[doctor] summary ({time.monotonic() - t0:.0f} s): "
          + ", ".join(f"{k} {sum(o.status == k for o in outcomes)}" for k in STATUSES if k != "DRY"))
    for o in sorted(outcomes, key=lambda o: (o.check.chapter, o.check.name)):
        print(f"  ch{o.check.chapter} {o.check.name:<30} {o.status:<5} {o.check.feature.name:<8} {o.detail[:90]}")
    if args.record:
        recorded = _record(outcomes, dev, args.sanitize, bench=args.bench and not bad, out=args.out, scale=scale)
        bad += [o for o in recorded if o.status != "PASS"]
    if bad:
        print("\n[doctor] FAILED: " + ", ".join(f"{o.check.name} ({o.status})" for o in bad)
              + ". Chapters whose checks failed: read them through the lens until this is fixed.")
    return 1 if bad else 0


def plan(dev: hardware.Device, only: str | None = None) -> tuple[list, list]:
    """(checks to run on ``dev``, SKIP outcomes of those it lacks the feature for); ``only``:
    comma-separated check names or chapter numbers, each of which must name something."""
    names = [x.strip() for x in only.split(",")] if only else []
    unknown = [x for x in names if x not in CHECKS and x not in {c.chapter for c in CHECKS.values()}]
    if unknown:
        raise ValueError(f"--only {','.join(unknown)}: no such check or chapter; the checks are "
                         f"{', '.join(CHECKS)} (or chapters 0-6)")
    wanted = [c for c in CHECKS.values() if not names or c.name in names or c.chapter in names]
    return ([c for c in wanted if dev.has(c.feature)],
            [Outcome(c, "SKIP", 0.0, f"needs {c.feature.runs_on}") for c in wanted if not dev.has(c.feature)])


def _record(outcomes, dev, sanitized, bench, out=None, log=print, scale: float = 1.0) -> list[Outcome]:
    """Write doctor.json; with ``bench`` on Blackwell also record the RECORDERS, each in a child process with its
    time limit (times ``scale``). Returns the recorders' outcomes."""
    env = store.environment()
    folder = RESULTS / gpu_folder(dev.name)
    result = {"benchmark": "doctor", **env, "command": "python -m multicta_kernels.cli.doctor --record",
              "method": {"what": "every live kernel on small fresh inputs, checked element-wise against torch, "
                                 "each in a child process with a time limit", "sanitizer": sanitized,
                         "timer": "wall clock per check in the parent: the run phase (seconds) apart from the "
                                  "compile phase before it (compile_seconds: every kernel compiled and loaded, "
                                  "none launched); a check, not a benchmark"},
              "ceilings": {}, "columns": ["check", "chapter", "feature", "status", "seconds", "detail",
                                          "compile_seconds"],
              "rows": [[o.check.name, o.check.chapter, o.check.feature.name, o.status, round(o.seconds, 1), o.detail,
                        round(o.compile_seconds, 1)] for o in outcomes]}
    injected = faults()
    if injected:                                 # a demonstration of the report, never the GPU's record
        result["method"]["injected"] = {name: f"{kind}: {FAULTS[kind]}" for name, kind in injected.items()}
        bench = False
    name = "doctor_injected.json" if injected else "doctor_consan.json" if sanitized else "doctor.json"
    log(f"[doctor] wrote {store.save(result, out or folder / name)}")
    recorded = []
    if bench and dev.has(TCGEN05):
        for rec in RECORDERS.values():
            limit = RECORD_TIMEOUT[rec.name] * scale
            log(f"[doctor] recording {rec.what}, in a child process with a {limit:.0f} s limit")
            recorded += run_checks([rec], timeout=limit, env={FOLDER_ENV: str(folder)}, log=log)
    elif bench:
        log("[doctor] --bench records the Blackwell benchmarks; this GPU has no tcgen05 (Hopper benchmarks: "
            "python -m multicta_kernels.cli.bench NAME --out results/<gpu>/NAME.json)")
    return recorded


def dry_run(only: str | None = None, compile_timeout: float = COMPILE_TIMEOUT, log=print) -> int:
    """``--dry-run``: every check that needs tcgen05, walked on this machine with a B200 pretended up to its
    launches (compiled for sm_100a, launch checked, nothing run), each in a child process; 0 if all got there."""
    with hardware.pretend((10, 0), "NVIDIA B200", 148) as dev:
        todo, _ = plan(dev, only)
    walked = [c for c in todo if c.feature is TCGEN05]
    log(f"[doctor] dry run: {dev.name} pretended ({dev.arch}, {dev.sms} SMs); each tcgen05 check walked to its "
        "launches: compiled for sm_100a and checked as the driver would, nothing launched, nothing compared")
    others = [c.name for c in todo if c.feature is not TCGEN05]
    if others:
        log(f"[doctor]   not walked (a B200 runs them too; the dry run walks the tcgen05 checks): {', '.join(others)}")
    if not walked:
        log("[doctor] nothing to walk: no tcgen05 check was asked for")
        return 1
    t0 = time.monotonic()
    outcomes = run_checks(walked, env={}, log=log, compile_timeout=compile_timeout, dry_run=True)
    bad = [o for o in outcomes if o.status != "DRY"]
    log(f"[doctor] dry run ({time.monotonic() - t0:.0f} s): {len(outcomes) - len(bad)} of {len(walked)} checks "
        "reached their launches" + (": " + ", ".join(f"{o.check.name} ({o.status})" for o in bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
