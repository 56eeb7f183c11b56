"""The bad-input sweep (issue 25): every public function of the package, called with wrong values, each call in its
own bounded child process.

    python tools/bad_input_sweep.py                    # the full sweep: results/bad_input_sweep.json
    python tools/bad_input_sweep.py --sample 600       # a deterministic sample (what CI runs, in tests/)

The call list is generated: every function ``inspect`` finds in the package's modules (public, defined there),
every parameter whose kind the sweep knows from its name, annotation or default (a size or count, an index,
a flag, a cga_layout, a finite number, a choice among strings), a few wrong values of that kind (wrong type,
zero, negative, huge, out of range, an invalid layout), the other required parameters at a valid value
(:data:`GOOD`; a function needing one the table lacks is not swept, and listed). Each call runs in a forked
child (a pool of ``--jobs``), with a time limit and a memory limit; its outcome is one of

``refused``      ValueError, TypeError or UnsupportedHardwareError (or SystemExit, for a command) whose message
                 is one line and names the parameter: what the book promises
``unnamed``      one of those, but multi-line or not naming the parameter (UnsupportedHardwareError for a bad
                 value means the value reached the hardware check unvalidated)
``accepted``     it returned (a wrong value the function takes: often legitimate, e.g. a negative alpha)
``error:Kind``   any other exception (an AttributeError, a ZeroDivisionError, an error from torch or Triton)
``hang``         no answer within the time limit (killed)
``abort``        the child died without answering (a signal, an LLVM abort)
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import json
import math
import os
import pickle
import pkgutil
import platform
import random
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HUGE = 2 ** 40

# Functions not called: they run other programs, loop for a user, or need inputs the sweep cannot make well.
SKIP = {
    "multicta_kernels.cli.doctor.main", "multicta_kernels.cli.doctor.run_checks", "multicta_kernels.cli.doctor.dry_run",
    "multicta_kernels.cli.bench.main", "multicta_kernels.benchmarks.hopper_matmul.main",
    "multicta_kernels.show.notebook.run_live",        # runs a launch in a child with a timeout of its own
    "multicta_kernels.core.hardware.pretend", "multicta_kernels.core.dryrun.dry_run",
    "multicta_kernels.core.dryrun.compile_only",       # context managers
    "multicta_kernels.foundations.kernel",             # a decorator
}


# ----------------------------------------------------------------------------------- valid values
def _t(*shape, dtype="float16"):
    import torch
    return torch.randn(*shape).to(getattr(torch, dtype))


def _protocol():
    from multicta_kernels.protocols import models
    return models.tile_stream(2, "mbarrier")


def _spec():
    from multicta_kernels import softmax
    return softmax.softmax_spec(1, 1024)


def _result():
    return {"benchmark": "x", "gpu": "g", "date": "2026-01-01", "triton": "3.9.0", "method": {"timer": "t"},
            "ceilings": {}, "columns": ["N", "ms"], "rows": [[1, 1.0]]}


def _layout():
    from triton.experimental.gluon import language as gl
    return gl.BlockedLayout([1, 1], [4, 8], [1, 1], [1, 0])


_PTX = ("//\n.version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n.reqnctapercluster 2, 1, 1\n{\n"
        "\tld.global.b32 %r1, [%rd1];\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], %r3;\n"
        "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n\tret;\n}\n")

GOOD = {   # parameter name -> a factory of a valid value (what the other required parameters get)
    "num_ctas": lambda: 2, "N": lambda: 64, "M": lambda: 128, "K": lambda: 64, "m_tiles": lambda: 4,
    "n_tiles": lambda: 4, "group_m": lambda: 2, "k_tiles": lambda: 2, "tiles": lambda: 4, "stages": lambda: 2,
    "rounds": lambda: 2, "num_warps": lambda: 4, "cta": lambda: 0, "from_cta": lambda: 1, "pid": lambda: 0,
    "lin": lambda: 0, "minor_dim": lambda: 0, "tile_width": lambda: 2, "capacity_blocks": lambda: 8,
    "concurrent": lambda: 2, "tile_m": lambda: 128, "tile_n": lambda: 128, "k": lambda: 64, "block_m": lambda: 1,
    "two_ctas": lambda: False, "multicast": lambda: True, "release": lambda: "mbarrier", "dtype": lambda: "float16",
    "bases": lambda: [(1, 0)], "acc_bases": lambda: [(1, 0)], "operand_bases": lambda: [[(1, 0)], [(0, 0)]],
    "shape": lambda: [16, 32], "layout": _layout, "ptx": lambda: _PTX, "text": lambda: _PTX, "before": lambda: _PTX,
    "after": lambda: _PTX, "pattern": lambda: "ld.global", "needle": lambda: "ld.global",
    "x": lambda: _t(4, 256, dtype="float32"), "a": lambda: _t(128, 64), "b": lambda: _t(64, 128),
    "protocol": _protocol, "spec": _spec, "s": _spec, "result": _result, "value": lambda: "[[1, 0]]",
    "what": lambda: "the sweep", "name": lambda: "softmax", "kind": lambda: "BlockedLayout", "target": lambda: "sm_90a",
    "script": lambda: "init 1\narrive 0\narrive 1\nwait 0 0", "durations": lambda: [1.0, 2.0, 3.0],
    "workers": lambda: 2, "dynamic": lambda: True, "alpha": lambda: 2.0, "order": lambda: [(0, 0), (0, 1)],
    "m": lambda: 2, "n": lambda: 4, "size": lambda: 4, "rank": lambda: 2, "index": lambda: (0, 0),
}

SIZE_NAMES = {"num_ctas", "N", "M", "K", "m_tiles", "n_tiles", "group_m", "k_tiles", "tiles", "src_tiles", "stages",
              "acc_stages", "rounds", "num_warps", "runs", "depth", "max_states", "chunk", "bm", "bn", "bk", "BM", "BN",
              "BK", "K_TILES", "block_m", "block_n", "block_k", "tile_width", "programs", "clusters", "capacity_blocks",
              "concurrent", "tile_m", "tile_n", "k", "k_steps", "subtiles", "slots", "consumers", "workers", "iters",
              "passes", "W", "count", "nbytes", "max_rows", "max_ctas", "min_values", "elem_bytes", "itemsize",
              "epilogue_n", "max_elements", "max_hits", "context", "n", "m", "size", "width", "vec", "worker_warps"}
INDEX_NAMES = {"cta", "from_cta", "pid", "lin", "hit", "leader", "minor_dim"}
BASES_NAMES = {"bases", "acc_bases", "cga_layout"}
FLOAT_NAMES = {"alpha", "timeout", "compile_timeout", "clock_mhz", "with_scopes", "without_scopes", "x_value", "target_value"}
CHOICE_NAMES = {"release", "dtype", "target", "how", "kind", "by", "staging", "free", "mode", "exchange"}


def kind_of(p: inspect.Parameter) -> str | None:
    ann, d, name = str(p.annotation), p.default, p.name
    if name in BASES_NAMES:
        return "bases"
    if name in INDEX_NAMES:
        return "index"
    if isinstance(d, bool) or ann == "bool":
        return "bool"
    if name in FLOAT_NAMES or ann in ("float", "float | None"):
        return "float"
    if name in SIZE_NAMES or ann in ("int", "int | None") or (isinstance(d, int) and d is not None):
        return "size"
    if name in CHOICE_NAMES:
        return "choice"
    return None


BAD = {   # kind -> wrong values (their repr is what the record shows)
    "size": [0, -1, HUGE, 2.5, "4"],
    "index": [-1, HUGE, "0"],
    "bool": ["yes", 2],
    "bases": [[(3, 0)], [(1, 0), (1, 0), (1, 0), (1, 0), (1, 0)], [[1]], "((1, 0),)", [(1, 0), (0, 1.5)]],
    "float": [float("nan"), float("inf"), "2"],
    "choice": ["nonesuch", 3],
}


def discover() -> list:
    """(module, function name) of every public function defined in a module of the package."""
    import multicta_kernels
    out = []
    for m in sorted(pkgutil.walk_packages(multicta_kernels.__path__, "multicta_kernels."), key=lambda m: m.name):
        mod = importlib.import_module(m.name)
        for name, fn in vars(mod).items():
            if not name.startswith("_") and inspect.isfunction(fn) and fn.__module__ == m.name:
                out.append((m.name, name))
    return out


def calls() -> tuple[list, list]:
    """The generated call list: dicts {fn, param, value (the bad value), kind}; and the functions not swept, why."""
    out, skipped = [], []
    for mod, name in discover():
        full = f"{mod}.{name}"
        if full in SKIP or mod in ("multicta_kernels.cli.mutate", "multicta_kernels.cli.mutants"):  # the harness: minutes a call
            skipped.append([full, "skipped: runs other programs or is a context manager/decorator"])
            continue
        fn = getattr(importlib.import_module(mod), name)
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        missing = [p.name for p in params if p.default is p.empty and p.name not in GOOD]
        if missing:
            skipped.append([full, f"no valid value for {', '.join(missing)}"])
            continue
        swept = 0
        for p in params:
            kind = kind_of(p)
            if kind is None:
                continue
            for v in BAD[kind]:
                out.append({"fn": full, "param": p.name, "value": v, "kind": kind})
                swept += 1
        if not swept:
            skipped.append([full, "no parameter of a kind the sweep knows"])
    return out, skipped


# --------------------------------------------------------------------------------------- running one
def _call(c: dict):
    mod, name = c["fn"].rsplit(".", 1)
    fn = getattr(importlib.import_module(mod), name)
    sig = inspect.signature(fn)
    kwargs, args = {}, []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name == c["param"]:
            v = c["value"]
        elif p.default is p.empty:
            v = GOOD[p.name]()
        else:
            continue
        if p.kind == p.POSITIONAL_ONLY:
            args.append(v)
        else:
            kwargs[p.name] = v
    return fn(*args, **kwargs)


def classify(c: dict, exc: BaseException | None) -> tuple[str, str]:
    from multicta_kernels.core.hardware import UnsupportedHardwareError
    if exc is None:
        return "accepted", ""
    msg = str(exc.code if isinstance(exc, SystemExit) else exc)
    if isinstance(exc, (ValueError, TypeError, UnsupportedHardwareError, SystemExit)) and \
            type(exc).__module__.split(".")[0] not in ("torch", "triton"):
        named = re.search(rf"(?<![A-Za-z0-9_]){re.escape(c['param'])}(?![A-Za-z0-9_])", msg) is not None
        if named and "\n" not in msg.strip() and not isinstance(exc, UnsupportedHardwareError):
            return "refused", msg
        return "unnamed", f"{type(exc).__name__}: {msg}"
    return f"error:{type(exc).__name__}", msg


def _child(c: dict, w, mem_bytes: int):
    os.close(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    except (ValueError, OSError):
        pass
    try:
        try:
            _call(c)
            res = classify(c, None)
        except BaseException as exc:  # noqa: BLE001 - everything a caller could see is what the sweep records
            res = classify(c, exc)
        data = pickle.dumps((res[0], res[1][:400]))
    except BaseException as exc:  # noqa: BLE001
        data = pickle.dumps(("error:sweep", repr(exc)[:400]))
    os.write(w, data)
    os._exit(0)


def run(call_list: list, jobs: int = 2, limit: float = 60.0, mem_gb: float = 8.0, log=print) -> list:
    """Run every call in its own forked child, ``jobs`` at a time; returns the calls with ``outcome``, ``message``
    and ``seconds`` added."""
    import multicta_kernels  # noqa: F401 - imported once here, so every child starts warm
    for mod, _ in discover():
        importlib.import_module(mod)
    pending, running, done = list(enumerate(call_list)), {}, [None] * len(call_list)
    t_start = time.time()
    while pending or running:
        while pending and len(running) < jobs:
            i, c = pending.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _child(c, w, int(mem_gb * 2 ** 30))
            os.close(w)
            os.set_blocking(r, False)
            running[pid] = (i, c, r, time.time(), bytearray())
        time.sleep(0.002)
        for pid, (i, c, r, t0, buf) in list(running.items()):
            try:
                while True:
                    chunk = os.read(r, 65536)
                    if not chunk:
                        break
                    buf += chunk
            except BlockingIOError:
                pass
            got, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.time() - t0
            if got == 0 and elapsed < limit:
                continue
            if got == 0:                                        # over the limit: a hang
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcome, msg = "hang", f"no answer within {limit:g} s"
            else:
                try:
                    while True:
                        chunk = os.read(r, 65536)
                        if not chunk:
                            break
                        buf += chunk
                except BlockingIOError:
                    pass
                if buf:
                    outcome, msg = pickle.loads(bytes(buf))
                else:
                    outcome, msg = "abort", f"child ended without answering (wait status {status})"
            os.close(r)
            del running[pid]
            done[i] = {**c, "value": repr(c["value"]), "outcome": outcome, "message": msg,
                       "seconds": round(elapsed, 2)}
        if log and pending and len(pending) % 200 == 0 and len(running) < jobs:
            log(f"[sweep] {len(call_list) - len(pending)} / {len(call_list)} started, {time.time() - t_start:.0f} s")
    return done


def summary(done: list) -> dict:
    counts: dict = {}
    for d in done:
        counts[d["outcome"]] = counts.get(d["outcome"], 0) + 1
    return dict(sorted(counts.items()))


def sample(call_list: list, n: int, seed: int = 25) -> list:
    """A deterministic sample of ``n`` calls, at least one per function swept."""
    rng = random.Random(seed)
    by_fn: dict = {}
    for c in call_list:
        by_fn.setdefault(c["fn"], []).append(c)
    first = [rng.choice(cs) for cs in by_fn.values()]
    rest = [c for c in call_list if c not in first]
    return first + rng.sample(rest, max(0, min(len(rest), n - len(first))))


def provenance() -> dict:
    import torch
    import triton
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "multicta_kernels"],
                                capture_output=True, text=True).stdout.strip())
    return {"gpu": "none (a CPU sweep: no kernel runs)", "date": datetime.date.today().isoformat(),
            "triton": triton.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "commit": commit + ("+uncommitted changes" if dirty else ""), "cpus": os.cpu_count()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "bad_input_sweep.json"))
    ap.add_argument("--sample", type=int, default=0, help="a deterministic sample of this many calls (0: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds a call may take before it counts as a hang")
    args = ap.parse_args(argv)
    call_list, skipped = calls()
    chosen = sample(call_list, args.sample) if args.sample else call_list
    t0 = time.time()
    done = run(chosen, args.jobs, args.limit)
    seconds = time.time() - t0
    counts = summary(done)
    print(f"[sweep] {len(done)} calls of {len({c['fn'] for c in call_list})} functions in {seconds:.0f} s: {counts}")
    columns = ["function", "parameter", "kind", "value", "outcome", "message", "seconds"]
    result = {"benchmark": "bad-input-sweep", **provenance(),
              "method": {"timer": "wall clock of the whole sweep (CPU)", "jobs": args.jobs, "limit_s": args.limit,
                         "memory_limit_gb": 8, "calls": len(done), "of_calls": len(call_list),
                         "functions_swept": len({c['fn'] for c in call_list}), "seconds": round(seconds, 1),
                         "counts": counts, "not_swept": skipped,
                         "generator": "tools/bad_input_sweep.py (each call in its own forked child process)"},
              "ceilings": {}, "columns": columns,
              "rows": [[d["fn"], d["param"], d["kind"], d["value"], d["outcome"], d["message"], d["seconds"]]
                       for d in done]}
    Path(args.out).write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    print(f"[sweep] wrote {args.out}")


if __name__ == "__main__":
    main()
