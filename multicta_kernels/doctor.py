"""The self-test of a new GPU node: ``python -m multicta_kernels.doctor``.

It prints the environment and which chapters run live here, then runs every live kernel of every
chapter that this GPU supports, each on small fresh inputs checked element by element against
PyTorch. The checks run in child processes with a time limit: a kernel that hangs is reported as
HANG (its process is killed: a cluster kernel cannot be stopped from inside the process that
launched it), one that kills its process as CRASH with its last lines, a wrong answer as FAIL.
A summary table follows; the exit status is non-zero on any failure.

    python -m multicta_kernels.doctor               # the check before a workshop
    python -m multicta_kernels.doctor --sanitize    # the same under Triton's concurrency sanitizer
    python -m multicta_kernels.doctor --record      # write results/<gpu>/doctor.json
    python -m multicta_kernels.doctor --record --bench   # ... and record this GPU's benchmarks

The book's "ran on ..." labels (README, chapter banners, workshop guide) are generated from the
recorded ``doctor.json`` files by :func:`label`, never typed.
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
from pathlib import Path

import multicta_kernels  # noqa: F401
from . import bench, hardware
from .bench import RESULTS, ROOT
from .hardware import CLUSTERS, CUDA, TCGEN05, WGMMA

CHAPTERS = {
    "0": "Triton foundations",
    "1": "CGA layouts and the multi-CTA softmax",
    "2": "multi-CTA mbarriers",
    "3": "TMA multicast",
    "4": "2-CTA tcgen05 MMA",
    "5": "the CLC matmul",
    "6": "the Hopper cluster matmul",
}
# What each chapter's live cells need (a chapter may have cells of several kinds).
CHAPTER_FEATURES = {"0": (CUDA, CLUSTERS), "1": (CLUSTERS,), "2": (CLUSTERS,), "3": (CLUSTERS, WGMMA, TCGEN05),
                    "4": (TCGEN05,), "5": (TCGEN05,), "6": (WGMMA,)}


@dataclass(frozen=True)
class Check:
    name: str
    chapter: str
    feature: hardware.Feature
    fn: str            # "module:function" (imported in the child); returns a one-line detail
    what: str


def _c(name, chapter, feature, fn, what):
    return Check(name, chapter, feature, f"multicta_kernels.doctor:{fn}", what)


# ------------------------------------------------------------------------------------ the checks
# Each returns a short detail line and raises AssertionError on a wrong element. Small inputs: the
# doctor checks that kernels work here, the benchmarks measure them.

def _sanitized() -> bool:
    """Under the concurrency sanitizer every shared-memory access is checked: keep loops short."""
    return os.environ.get("TRITON_INSTRUMENTATION_MODE") == "consan"


def _shape(M, N, K):
    return (min(M, 130), min(N, 264), min(K, 136)) if _sanitized() else (M, N, K)


def _rand(*shape, dtype="float32"):
    import torch
    return torch.randn(*shape, device="cuda").to(getattr(torch, dtype))


def check_scale():
    from . import foundations
    x = _rand(1000)
    y = foundations.scale(x, 3.0)
    from .checks import assert_equal
    assert_equal(y, x * 3.0, "scale")
    return "1000 elements, exact"


def check_persistent_matmul():
    import torch
    from . import foundations
    a, b = _rand(100, 72, dtype="float16"), _rand(72, 90, dtype="float16")
    c = foundations.persistent_matmul(a, b, programs=3)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    return "100x90x72 fp16 in, fp32 out, 3 programs"


def check_tma_double():
    from . import foundations
    from .checks import assert_equal
    a = _rand(64, 96)
    assert_equal(foundations.tma_double(a), a * 2, "tma_double")
    return "64x96, device and host descriptors"


def check_softmax():
    from .checks import assert_softmax_close, poisoned
    from .softmax import make_config, multicta_softmax
    cases = [(1, 1, None), (3, 1000, None), (5, 65536, None), (4, 4096, (4, 4)), (2, 70000, (16, 8))]
    for M, N, shape in cases:
        x = _rand(M, N) * 3
        y = poisoned((M, N), x.dtype)
        cfg = make_config(N, *shape) if shape else None
        multicta_softmax(x, y, config=cfg)
        assert_softmax_close(y, x, f"softmax {M}x{N}")
    x = _rand(7, 3000, dtype="float16")
    y = poisoned((7, 3000), x.dtype)
    multicta_softmax(x, y, config=make_config(3000, 2, 4, dtype="float16"), two_pass=True)
    assert_softmax_close(y, x, "two-pass softmax fp16, 2 CTAs")
    return "1 to 16 CTAs, fused and two-pass, M = 1 and N = 1 included"


def check_exchange():
    import torch
    from . import barriers
    from .checks import assert_equal
    for c in (2, 4, 16):
        x = torch.randint(-1000, 1000, (c, 128), device="cuda", dtype=torch.int32)
        for _ in range(1 if _sanitized() else 5):
            assert_equal(barriers.cluster_exchange(x), x + x.sum(0, keepdim=True), f"exchange {c} CTAs")
    return "2, 4, 16 CTAs, 5 repetitions each (1 under the sanitizer)"


def check_ping_pong():
    from . import barriers
    rounds = 4 if _sanitized() else 500
    for c in ((2, 4) if _sanitized() else (2, 16)):
        errors = barriers.ping_pong(c, rounds).tolist()
        assert errors == [0] * c, f"ping-pong at {c} CTAs counted errors {errors}"
    return f"{'2 and 4' if _sanitized() else '2 and 16'} CTAs, {rounds} rounds, no stale reads"


def check_pair_sums():
    import torch
    from . import barriers
    from .checks import assert_equal
    x = torch.randint(-10**6, 10**6, (8,), device="cuda", dtype=torch.int32)
    assert_equal(barriers.pair_sums(x), x[0::2] + x[1::2], "pair sums")
    return "8 CTAs, 4 pair barriers"


def check_cluster_barrier_in_partition():
    import torch
    from . import barriers
    for c in (2, 16):
        out = barriers.cluster_barrier_in_partition(c)
        torch.cuda.synchronize()
        assert out.tolist() == [1] * c, f"the worker partitions of {c} CTAs reported {out.tolist()}"
    return "2 and 16 CTAs"


def check_multicast_copy():
    from . import multicast as mc
    from .checks import assert_equal
    for c, dtype in ((2, "float16"), (16, "float32")):
        x = _rand(64, 64, dtype=dtype)
        bad, out = mc.multicast_copy(x, c)
        assert bad.tolist() == [0] * c, f"mismatches per CTA at {c} CTAs: {bad.tolist()}"
        assert_equal(out, x, f"multicast copy {c} CTAs")
    return "2 CTAs fp16, 16 CTAs fp32: every CTA holds the exact tile"


def check_tile_stream():
    from . import multicast as mc
    tiles = 6 if _sanitized() else 16
    for release in ("cluster", "mbarrier"):
        launch, _ = mc.tile_stream(4, multicast=True, release=release, clusters=2 if _sanitized() else 8, tiles=tiles)
        got = launch().tolist()
        assert got == [tiles] * len(got), f"release={release}: tiles seen per cluster {got}"
    return "4 CTAs, both releases"


def check_hopper_multicast_matmul():
    from . import multicast as mc
    from .checks import assert_matmul_close
    for c, release, shape in ((2, "mbarrier", (200, 136, 72)), (4, "cluster", (1, 256, 512)),
                              (4, "mbarrier", (300, 128, 64))):
        M, N, K = _shape(*shape)
        a, b = _rand(M, K, dtype="float16"), _rand(K, N, dtype="float16")
        assert_matmul_close(mc.hopper_multicast_matmul(a, b, num_ctas=c, release=release), a, b,
                            f"{c} CTAs {release} {M}x{N}x{K}")
    return "2 and 4 CTAs, both releases, M = 1 and K = one block included"


def check_blackwell_multicast_mma():
    from . import multicast as mc
    from .checks import assert_matmul_close
    a, b = _rand(512, 128, dtype="float16"), _rand(128, 128, dtype="float16")
    assert_matmul_close(mc.blackwell_multicast_mma(a, b), a, b, "4-CTA tcgen05 multicast loop")
    return "512x128x128, 4 CTAs (2 pairs)"


def check_mma_tile():
    from . import two_cta
    from .checks import assert_matmul_close
    for two, M in ((False, 128), (True, 256)):
        a, b = _rand(M, 64, dtype="bfloat16"), _rand(64, 128, dtype="bfloat16")
        assert_matmul_close(two_cta.mma_tile(a, b, two_ctas=two), a, b, f"{'2' if two else '1'}-CTA tile")
    return "1-CTA 128x128x64 and 2-CTA 256x128x64, bf16"


def _matmul_cases(matmul, cases):
    """Each (shape, options) case: fresh fp16 operands, a NaN-poisoned output, element-wise check."""
    from .checks import assert_matmul_close, poisoned
    for shape, cfg in cases:
        M, N, K = _shape(*shape)
        a, b = _rand(M, K, dtype="float16"), _rand(K, N, dtype="float16")
        c = poisoned((M, N), a.dtype)
        matmul(a, b, out=c, **cfg)
        assert_matmul_close(c, a, b, f"{matmul.__name__} {M}x{N}x{K} {cfg}")


def check_clc_matmul():
    from . import clc_matmul as cm
    _matmul_cases(cm.clc_matmul, [((1000, 776, 328), {}), ((1, 256, 64), {}),
                                  ((700, 520, 200), {"cga_layout": ((1, 0), (2, 0))}),
                                  ((600, 1024, 256), {"block_n": 128, "epilogue_n": 128, "stages": 4})])
    return "2 and 4 CTAs, edge tiles, M = 1, one sub-tile per tile"


def check_hopper_matmul():
    from . import hopper_matmul as hm
    # With no options the wrapper picks by K: the short-K ping-pong up to hm.SHORT_K, the 1-CTA kernel above.
    _matmul_cases(hm.hopper_matmul, [((1000, 776, 328), {}), ((1, 256, 64), {}), ((520, 776, 1032), {}),
                                     ((700, 520, 200), {"num_ctas": 4}), ((600, 1024, 256), hm.VARIANTS["ping-pong"]),
                                     ((300, 264, 136), {"warp_specialize": False, "num_ctas": 2})])
    return "picked by K (both picks), 4 CTAs, ping-pong, non-WS, edge tiles, M = 1"


CHECKS = {c.name: c for c in [
    _c("scale", "0", CUDA, "check_scale", "a first tl kernel: programs and masks"),
    _c("persistent_matmul", "0", CUDA, "check_persistent_matmul", "persistent grouped tl matmul"),
    _c("tma_double", "0", CLUSTERS, "check_tma_double", "tl TMA descriptors"),
    _c("softmax", "1", CLUSTERS, "check_softmax", "multi-CTA softmax"),
    _c("exchange", "2", CLUSTERS, "check_exchange", "DSMEM all-gather through mbarriers"),
    _c("ping_pong", "2", CLUSTERS, "check_ping_pong", "gather/release rounds with phases"),
    _c("pair_sums", "2", CLUSTERS, "check_pair_sums", "pair barriers, from_cta broadcast"),
    _c("cluster_barrier_in_partition", "2", CLUSTERS, "check_cluster_barrier_in_partition",
       "cluster barrier inside warp_specialize"),
    _c("multicast_copy", "3", CLUSTERS, "check_multicast_copy", "TMA multicast into every CTA"),
    _c("tile_stream", "3", CLUSTERS, "check_tile_stream", "multicast ring, both releases"),
    _c("hopper_multicast_matmul", "3", WGMMA, "check_hopper_multicast_matmul", "TMA multicast -> wgmma loop"),
    _c("blackwell_multicast_mma", "3", TCGEN05, "check_blackwell_multicast_mma", "TMA multicast -> tcgen05 loop"),
    _c("mma_tile", "4", TCGEN05, "check_mma_tile", "1-CTA and 2-CTA tcgen05 tiles"),
    _c("clc_matmul", "5", TCGEN05, "check_clc_matmul", "persistent CLC matmul"),
    _c("hopper_matmul", "6", WGMMA, "check_hopper_matmul", "warp-specialised Hopper cluster matmul"),
]}


# A runner that is itself checked: the tests (on a CPU) make these pass, fail, hang and crash.
def _demo_pass():
    return "fine"


def _demo_fail():
    raise AssertionError("element [3, 4] differs")


def _demo_hang():
    time.sleep(3600)


def _demo_crash():
    print("about to abort", flush=True)
    os.abort()


DEMO = {n: Check(n, "demo", CUDA, f"multicta_kernels.doctor:_demo_{n}", n) for n in ("pass", "fail", "hang", "crash")}


# ------------------------------------------------------------------------------------ the runner

@dataclass
class Outcome:
    check: Check
    status: str            # PASS, FAIL, HANG, CRASH, SKIP
    seconds: float
    detail: str


def _child(names: list[str]) -> None:
    """Run checks in this process, reporting each on stdout between markers the parent reads."""
    import importlib

    import torch
    if os.environ.get("TRITON_INSTRUMENTATION_MODE") == "consan":        # its checks need global scratch
        import triton
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    for name in names:
        check = CHECKS.get(name) or DEMO[name]
        print(f"@@START {name}", flush=True)
        module, fn = check.fn.split(":")
        try:
            detail = getattr(importlib.import_module(module), fn)()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except AssertionError as exc:
            print(f"@@FAIL {name} {' '.join(str(exc).split())[:400]}", flush=True)
            continue
        except Exception as exc:  # a wrapper's or compiler's error: the check failed, the process lives
            print(f"@@FAIL {name} {type(exc).__name__}: {' '.join(str(exc).split())[:400]}", flush=True)
            continue
        print(f"@@PASS {name} {detail or ''}", flush=True)


def _reader(stream, q):
    for line in iter(stream.readline, ""):
        q.put(line.rstrip("\n"))
    q.put(None)


def run_checks(checks: list[Check], timeout: float = 60.0, env: dict | None = None, log=print) -> list[Outcome]:
    """Run ``checks`` in child processes, ``timeout`` seconds each (compile included). A hang kills
    the child and the remaining checks go on in a fresh one."""
    outcomes: list[Outcome] = []
    todo = list(checks)
    while todo:
        cmd = [sys.executable, "-u", "-m", "multicta_kernels.doctor", "--child", ",".join(c.name for c in todo)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, **(env or {})})
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        current, started, tail = None, time.monotonic(), []
        while True:
            try:
                line = q.get(timeout=max(0.05, started + timeout - time.monotonic()))
            except queue.Empty:
                line = "@@TIMEOUT"
            if line is None or line == "@@TIMEOUT":
                if line == "@@TIMEOUT":
                    proc.kill()
                proc.wait()
                check = current or todo[0]
                took = time.monotonic() - started
                if line == "@@TIMEOUT":
                    o = Outcome(check, "HANG", took, f"no answer within {timeout:.0f} s; the process was killed")
                else:
                    last = " | ".join(tail[-3:]) or "no output"
                    o = Outcome(check, "CRASH", took, f"exit status {proc.returncode}: {last}"[:400])
                outcomes.append(o)
                log(_line(o))
                todo = todo[todo.index(check) + 1:]
                break
            if line.startswith("@@START "):
                current = next(c for c in todo if c.name == line.split()[1])
                started, tail = time.monotonic(), []
            elif line.startswith(("@@PASS ", "@@FAIL ")):
                kind, name, *rest = line[2:].split(" ", 2)
                o = Outcome(current, kind, time.monotonic() - started, rest[0] if rest else "")
                outcomes.append(o)
                log(_line(o))
                todo = todo[todo.index(current) + 1:]
                current = None
                started = time.monotonic()
                if not todo:
                    proc.wait()
                    break
            elif line.strip():
                tail.append(line.strip())
        if not todo:
            break
    return outcomes


def _line(o: Outcome) -> str:
    return f"[doctor] ch{o.check.chapter} {o.check.name:<30} {o.status:<5} {o.seconds:6.1f} s  {o.detail}"


def record_clc_timeline(folder: Path, env: dict, K: int = 512) -> Path:
    """Chapter 5's measured timeline, on the first Blackwell run: the CLC matmul with its scopes under
    proton, 8192 x 8192 x K, checked element by element, two clusters kept."""
    import tempfile

    import torch
    import triton
    from . import clc_matmul as cm
    from . import timeline as tl
    from .checks import assert_matmul_close, poisoned
    a = torch.randn(8192, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 8192, device="cuda", dtype=torch.float16)
    c = poisoned((8192, 8192), torch.float16)
    num_ctas = 1 << len(cm.CONFIG["cga_layout"])
    owner = tl.placed_partitions(cm.clc_matmul_spec(), ["epilogue", "loader", "mma", "scheduler"],
                                 "sm_100a")
    dev = triton.runtime.driver.active.get_current_device()
    clock = triton.runtime.driver.active.utils.get_device_properties(dev)["sm_clock_rate"] / 1000
    tr = tl.record(lambda: cm.clc_matmul(a, b, out=c, instrument=True), f"clc_matmul_k{K}", folder=tempfile.mkdtemp(),
                   mode=tl.default_mode(cm.TIMELINE_BUFFER), num_ctas=num_ctas, partitions=owner, clock_mhz=clock)
    assert_matmul_close(c, a, b, "the instrumented clc_matmul")
    path = tl.save(tl.trim(tr, clusters=2), folder / f"timeline_clc_matmul_k{K}.json", env,
                   benchmark=f"timeline-clc_matmul_k{K}",
                   method={"kernel": f"clc_matmul_kernel 8192 x 8192 x {K} fp16, CONFIG", "warmup_launches": 1,
                           "record_buffer_bytes": cm.TIMELINE_BUFFER,
                           "clock": {"clock_mhz": clock, "how": "the driver's reported SM clock"}})
    print(f"[doctor] wrote {path}")
    return path


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
        from .bench import environment
        env = environment()
        lines.append(f"driver {env.get('driver')}")
        try:
            from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version
            arch = 10 * dev.capability[0] + dev.capability[1]
            version = get_ptxas_version(arch).strip().splitlines()[-1]
            lines.append(f"ptxas {get_ptxas(arch).path}: {version}")
        except Exception as exc:  # ptxas is looked up lazily; say what went wrong
            lines.append(f"ptxas: not found ({type(exc).__name__}: {exc})")
    return lines


# ------------------------------------------------------------------------------ recorded labels

def gpu_folder(name: str) -> str:
    """results/ folder name of a GPU: "NVIDIA H200" -> "h200"."""
    return name.replace("NVIDIA", "").strip().lower().replace(" ", "-") or "gpu"


def ran_on(feature: hardware.Feature, results: Path = RESULTS) -> list[tuple[str, str]]:
    """(GPU, date) of every recorded doctor run in which every check needing ``feature`` passed."""
    out = []
    for path in sorted(results.glob("*/doctor.json")):
        rec = bench.load(path)
        mine = [r for r in bench.records(rec) if r["feature"] == feature.name]
        if mine and all(r["status"] == "PASS" for r in mine):
            out.append((rec["gpu"], rec["date"]))
    return out


def recorded(check: str, gpu: str = "h200", results: Path = RESULTS) -> dict:
    """The row of ``check`` in a GPU's recorded doctor run (``results/<gpu>/doctor.json``): what the chapters
    quote on a machine that cannot run the kernel itself."""
    rows = {r["check"]: r for r in bench.records(bench.load(results / gpu / "doctor.json"))}
    if check not in rows:
        raise KeyError(f"no check {check!r} in results/{gpu}/doctor.json; recorded: {', '.join(rows)}")
    return rows[check]


def label(feature: hardware.Feature, results: Path = RESULTS) -> str:
    """What the book may say about the kernels that need ``feature``: generated from results/."""
    runs = ran_on(feature, results)
    if runs:
        return "ran on " + "; ".join(f"{gpu}, {date}" for gpu, date in runs)
    arch = {TCGEN05: "sm_100a", WGMMA: "sm_90a"}.get(feature, "sm_90a")
    gpu = {TCGEN05: "a Blackwell GPU", WGMMA: "a Hopper GPU"}.get(feature, "a GPU")
    return f"compiled for {arch} and audited; not yet run on {gpu}"


def status_table(results: Path = RESULTS) -> str:
    """The markdown table the README and the workshop guide carry (between generated markers): for
    each chapter and each feature it needs, whether its kernels have run, and where."""
    feats = hardware.FEATURES
    lines = ["| chapter | " + " | ".join(f"`{f.name}`" for f in feats) + " |", "| --- |" + " --- |" * len(feats)]
    for ch, title in CHAPTERS.items():
        cells = [label(f, results) if f in CHAPTER_FEATURES[ch] else "" for f in feats]
        lines.append(f"| {ch}. {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


MARK_BEGIN, MARK_END = "<!-- generated: hardware-status -->", "<!-- /generated -->"
DOCS = ("README.md", "book/workshop.md")


def render_docs(text: str, results: Path = RESULTS) -> str:
    """``text`` with the block between the generated markers replaced by :func:`status_table`."""
    if MARK_BEGIN not in text or MARK_END not in text:
        return text
    head, rest = text.split(MARK_BEGIN, 1)
    _, tail = rest.split(MARK_END, 1)
    note = "<!-- written by `python -m multicta_kernels.doctor --update-docs` from results/*/doctor.json -->"
    return f"{head}{MARK_BEGIN}\n{note}\n\n{status_table(results)}\n\n{MARK_END}{tail}"


def update_docs(root: Path = ROOT) -> list[str]:
    changed = []
    for rel in DOCS:
        p = root / rel
        if p.exists():
            new = render_docs(p.read_text())
            if new != p.read_text():
                p.write_text(new)
                changed.append(rel)
    return changed


# ------------------------------------------------------------------------------------------ CLI

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m multicta_kernels.doctor", description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per check, compile included (default 60)")
    ap.add_argument("--only", help="comma-separated check names or chapter numbers")
    ap.add_argument("--sanitize", action="store_true", help="run under TRITON_INSTRUMENTATION_MODE=consan (slow)")
    ap.add_argument("--record", action="store_true", help="write results/<gpu>/doctor.json")
    ap.add_argument("--bench", action="store_true", help="with --record: also record this GPU's Blackwell benchmarks")
    ap.add_argument("--out", help="with --record: where to write (default results/<gpu>/doctor.json)")
    ap.add_argument("--list", action="store_true", help="list the checks and exit")
    ap.add_argument("--update-docs", action="store_true", help="regenerate the status tables in README and workshop")
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
    if args.update_docs:
        print("updated: " + (", ".join(update_docs()) or "nothing (already current)"))
        return 0
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
    timeout = args.timeout * (10 if args.sanitize else 1)
    print(f"[doctor] running {len(todo)} checks, each in a child process with a {timeout:.0f} s limit"
          + (" under the concurrency sanitizer" if args.sanitize else ""))
    t0 = time.monotonic()
    outcomes = run_checks(todo, timeout, env)
    outcomes += skipped
    bad = [o for o in outcomes if o.status not in ("PASS", "SKIP")]
    print(f"\n[doctor] summary ({time.monotonic() - t0:.0f} s): "
          + ", ".join(f"{k} {sum(o.status == k for o in outcomes)}" for k in ("PASS", "FAIL", "HANG", "CRASH", "SKIP")))
    for o in sorted(outcomes, key=lambda o: (o.check.chapter, o.check.name)):
        print(f"  ch{o.check.chapter} {o.check.name:<30} {o.status:<5} {o.check.feature.name:<8} {o.detail[:90]}")
    if args.record:
        _record(outcomes, dev, args.sanitize, bench=args.bench and not bad, out=args.out)
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


def _record(outcomes, dev, sanitized, bench, out=None):
    import multicta_kernels.bench as bench_mod
    env = bench_mod.environment()
    folder = RESULTS / gpu_folder(dev.name)
    result = {"benchmark": "doctor", **env, "command": "python -m multicta_kernels.doctor --record",
              "method": {"what": "every live kernel on small fresh inputs, checked element-wise against torch, "
                                 "each in a child process with a time limit", "sanitizer": sanitized,
                         "timer": "wall clock per check in the parent, compile included (a check, not a benchmark)"},
              "ceilings": {}, "columns": ["check", "chapter", "feature", "status", "seconds", "detail"],
              "rows": [[o.check.name, o.check.chapter, o.check.feature.name, o.status, round(o.seconds, 1), o.detail]
                       for o in outcomes]}
    name = "doctor_consan.json" if sanitized else "doctor.json"
    print(f"[doctor] wrote {bench_mod.save(result, out or folder / name)}")
    if bench and dev.has(TCGEN05):
        for b in ("clc-matmul",):
            bench_mod.run(b, folder / f"{b.replace('-', '_')}.json")
        record_clc_timeline(folder, env)
    elif bench:
        print("[doctor] --bench records the Blackwell benchmarks; this GPU has no tcgen05 (Hopper benchmarks: "
              "python -m multicta_kernels.bench NAME --out results/<gpu>/NAME.json)")


if __name__ == "__main__":
    sys.exit(main())
