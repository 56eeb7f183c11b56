"""Measured warp timelines: Triton's profiler (proton) inside a Gluon kernel, read back as a table.

A kernel marks regions with ``with scope("load", INSTRUMENT):`` (:mod:`multicta_kernels.gluon.scope`). When
proton's *instrumentation* backend is on while the kernel compiles, each scope becomes two time stamps per
warp; otherwise it compiles to nothing. :func:`record` runs a launch under proton on a GPU, :func:`load`
turns proton's Chrome trace into rows (cluster, CTA rank, SM, warp, partition, scope, start and end in ns),
:func:`trim` keeps what a figure needs, :func:`save` writes it under ``results/<gpu>/`` with the run's
provenance, and :func:`summary` tabulates it on any machine (``show.figures.gantt`` draws it).

What proton's instrumentation does with Gluon (triton 3.9, read from its sources and compiled here)
-----------------------------------------------------------------------------------------------------
* API. In the kernel: ``import triton.profiler.language as pl``; ``pl.enter_scope(name)`` /
  ``pl.exit_scope(name)`` or ``with pl.scope(name):`` (names are constexpr strings); events for
  asynchronous work: ``ev = pl.allocate_event(name)``, then ``pl.start_event(ev)`` and
  ``pl.end_event(ev)``, which may run in different loop iterations and different warps. On the host:
  ``proton.start(name, data="trace", backend="instrumentation", mode=proton.mode.Default())`` ...
  ``proton.finalize()`` writes ``name.chrome_trace``. Only the Gluon front end is instrumented by
  default (``pl.enable_semantic("triton")`` opts plain ``tl`` kernels in).
* Compiling away. ``pl.enter_scope`` emits nothing unless ``triton.profiler.flags.instrumentation_on``
  is set, which only an active instrumentation session does. So a kernel with scopes compiles to the
  very same PTX as one without when proton is off, whatever its flag; the instrumentation mode is part
  of the compile options, so the JIT keeps the two builds apart. The constexpr ``INSTRUMENT`` flag
  picks which kernels record inside a session. Events are stricter: outside a session
  ``pl.allocate_event`` returns an event without IR, which cannot be passed to a function or to
  ``gl.warp_specialize`` (compile error), so allocate them only ``if INSTRUMENT`` (``else 0``).
* What it costs (compiled here for sm_90a): each scope boundary reads ``%clock``/``%clock_hi`` (a
  64-bit SM cycle counter, 43 bits kept) and one lane per warp stores 8 bytes to a buffer in shared
  memory (default mode; by default as much as fits without lowering occupancy: 8 KiB for the 1-CTA
  demo, 4 KiB per CTA for the 2-CTA one). A header per CTA records ``%smid``, the linear CTA id and
  ``%globaltimer`` at start and around the final copy to global memory (a ``bar.sync`` at the end).
  The buffer is circular: a warp keeps its last ``bytes / warps / 8`` records; older ones are dropped
  with a warning.
* Trace format (proton's ``StreamChromeTraceWriter``): ``{"displayTimeUnit": "ns", "traceEvents":
  [...]}``, one ``"ph": "X"`` event per scope instance with ``name`` = scope, ``cat`` = kernel name,
  ``pid`` = ``"<kernel> Core<SM> CTA<linear CTA id>"``, ``tid`` = ``"warp <w> (line <l>)"`` (w: warp
  index in the CTA, ``threadIdx.x // 32``; l: a lane for overlapping scopes of one warp),
  ``args`` = init / post-final / finalization times (ns) and the host ``call_stack`` ending with
  the kernel name. ``ts``/``dur`` are in Chrome's microseconds but proton writes *cycles* / 1000
  (it assumes 1 GHz, ``"Frequency (MHz)": 1000``): inside a CTA, time is the cycle count since the
  CTA's first record, and that first record is drawn at the CTA's ``%globaltimer`` start (ns)
  relative to the earliest CTA. :func:`load` undoes this with the SM clock measured in the same run
  (``clock_mhz``), and checks it against the CTAs' own timer spans (``clock_estimate_mhz``, coarse:
  the timer ticks far slower than the clock). Cluster: Triton launches
  clusters of ``num_ctas`` CTAs along x, so CTA id ``c`` is rank ``c % num_ctas`` of cluster
  ``c // num_ctas``.
* Warp specialisation: scopes work inside ``gl.warp_specialize`` partitions. The trace names warps,
  not partitions: the default partition owns warps ``0 .. num_warps-1``, and Triton's
  allocate-warp-groups pass places the workers after them, larger partitions first and padded to
  whole warp groups (chapter 6's one-warp producer, behind eight consumer warps, is warp 10 of 12).
  :func:`placed_partitions` reads that placement from the compiler; :func:`partition_map` builds
  the map from given start warps.
* Asynchronous work: events (``cat`` "async" when one warp starts and ends them; otherwise two
  zero-length ``cat`` "flow" endpoints joined by ``bind_id``, ``flow_out`` at the start). They are
  stamped by the warps that execute ``start_event``/``end_event``: the span from issuing a TMA load
  (or an MMA) to the ``mbarrier.wait`` that observes it. Hardware completion itself (bytes landing,
  the MMA retiring) is not stamped; the end is an upper bound set by when a warp looks. Every warp
  that runs ``start_event``/``end_event`` stamps it; proton pairs the stamps into links.
* Each instrumented launch synchronises the stream and parses the buffer on the host, so time a
  kernel with and without scopes outside a session (:func:`prepare`), not under it. Other knobs of
  ``proton.mode.Default``: ``buffer_type="global"``, ``buffer_size``, ``optimizations="clock32,time_shift"``
  (32-bit stamps; subtract a fixed cost per record), ``sampling_strategy="selective"`` with
  ``sampling_options="0,4"`` (only those warps).

Proven on a CPU (tests/test_timeline.py): the scope-free and flag-off builds have identical
instructions; an instrumented build compiles here (:func:`instrumented`) and shows its clock reads;
the parser, trimming, summary and Gantt chart on traces in the writer's exact format. Needs a GPU
(``tools/record_timelines.py``): the traces themselves, the clock conversion and the overhead.
"""
from __future__ import annotations

import contextlib
import json
import re
import statistics
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import lens
from ..core import validate
from ..core.hardware import CLUSTERS, SMEM_PER_CTA, require
from ..results import store


COLUMNS = ("cluster", "rank", "cta", "sm", "warp", "end_warp", "partition", "line", "scope", "kind",
           "start_ns", "end_ns")
MAX_SHARED = dict.fromkeys(lens.TARGETS, SMEM_PER_CTA)    # bytes a CTA may opt into, per lens target


# --------------------------------------------------------------------- compiling with proton on

def default_mode(buffer_size: int = 0):
    """The mode the book records with: cycle counter, one buffer per CTA in shared memory
    (``buffer_size`` bytes; 0: proton sizes it from what the kernel leaves free)."""
    import triton.profiler as proton
    return proton.mode.Default(buffer_type="shared", buffer_size=buffer_size)


def global_mode(buffer_size: int):
    """As :func:`default_mode`, with the records in global memory: ``buffer_size`` bytes a CTA, for a kernel that
    leaves too little shared memory for the records it makes (proton keeps a warp's last ones and warns). Proton
    splits it into one segment a warp and wants each a power of two: ``warps * 2**k``."""
    import triton.profiler as proton
    return proton.mode.Default(buffer_type="global", buffer_size=buffer_size)


@contextlib.contextmanager
def proton_compiler(mode=None, max_shared: int | None = None):
    """While open, kernels compile with proton's instrumentation passes, as inside a
    ``proton.start(backend="instrumentation")`` session, but nothing is recorded at launch and no
    GPU is needed (``max_shared``: the target's shared memory per CTA, sizes the default buffer)."""
    import triton
    from triton._C.libtriton import passes
    from triton._C.libtriton import proton as tp
    from triton._instrumentation import register_instrumentation, unregister_instrumentation
    from triton.profiler.flags import flags
    from triton.profiler.hooks.instrumentation import InstrumentationHook
    from triton.profiler.mode import Optimize

    if InstrumentationHook.active_count or flags.instrumentation_on:
        raise RuntimeError("a proton instrumentation session is active; finalize it first")
    mode = mode or default_mode()
    if max_shared is None:
        dev = triton.runtime.driver.active.get_current_device()
        max_shared = triton.runtime.driver.active.utils.get_device_properties(dev)["max_shared_mem"]
    hook = InstrumentationHook          # the same pass arguments as InstrumentationHook.activate

    def to_llvmir(pm):
        tp.add_convert_proton_to_protongpu(pm, mode.metric_type, mode.sampling_strategy, mode.sampling_options,
                                           mode.granularity, mode.buffer_strategy, mode.buffer_type,
                                           mode.buffer_size, max_shared, hook.profile_buffer_size,
                                           hook.profile_buffer_alignment, Optimize.CLOCK32 not in mode.optimizations)
        passes.common.add_cse(pm)
        tp.add_allocate_proton_shared_memory(pm)

    points = {"load-dialects": tp.load_dialects, "ttgpuir-to-llvmir": to_llvmir,
              "llvmir-to-llvm": tp.add_convert_proton_nvidia_gpu_to_llvm}
    saved_mode = triton.knobs.compilation.instrumentation_mode
    for point, callback in points.items():
        register_instrumentation(point=point, backend="nvidia", callback=callback)
    flags.instrumentation_on = True
    triton.knobs.compilation.instrumentation_mode = str(mode)
    try:
        yield str(mode)
    finally:
        triton.knobs.compilation.instrumentation_mode = saved_mode
        flags.instrumentation_on = False
        for point in points:
            unregister_instrumentation(point=point, backend="nvidia")


def instrumented(spec: lens.KernelSpec, target: str = "sm_90a", mode=None, fits: bool = True) -> lens.Compiled:
    """Compile a spec with proton's instrumentation on, on any machine: the lens of a timed kernel. ``fits=False``:
    return it even when proton's record buffer takes it past a CTA's shared memory (see :func:`lens.compile`)."""
    validate.target(target)
    with proton_compiler(mode, MAX_SHARED[target]) as mode_str:
        return lens.compile(replace(spec, options={**spec.options, "instrumentation_mode": mode_str}), target, fits)


def prepare(spec: lens.KernelSpec, grid, args, *, mode=None):
    """Compile ``spec`` for this GPU through ``triton.compile`` (with proton's passes when its
    ``INSTRUMENT`` is true) and return ``launch()``, which only launches: no JIT, no proton session,
    so a timer sees the kernel alone. An instrumented build writes its records into one reused
    scratch buffer that nobody reads. Kept apart from the JIT's cache on purpose: a kernel that
    :func:`record` later launches must be loaded while proton's session is on."""
    import torch
    import triton
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime import _allocation
    names = list(spec.fn.arg_names)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in spec.divisible}
    source = GluonASTSource(spec.fn, spec.signature, spec.constexprs, attrs)
    target = triton.runtime.driver.active.get_current_target()
    with (proton_compiler(mode) if spec.constexprs.get("INSTRUMENT") else contextlib.nullcontext()) as mode_str:
        options = dict(spec.options, **({"instrumentation_mode": mode_str} if mode_str else {}))
        compiled = triton.compile(source, target=target, options=options)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    run = compiled[grid]
    need = compiled.metadata.profile_scratch_size * spec.options.get("num_ctas", 1) * grid[0] * grid[1] * grid[2]
    scratch = torch.empty(max(need, 1), device="cuda", dtype=torch.uint8)

    def launch():
        if not need:
            return run(*args)
        _allocation.set_profile_allocator(lambda size, align, stream: scratch)
        try:
            run(*args)
        finally:
            _allocation.set_profile_allocator(None)
    launch.compiled = compiled
    return launch


def record(launch, name: str = "timeline", *, folder=None, warmup: int = 1, mode=None, num_ctas: int = 1,
           partitions: dict | None = None, clock_mhz: float | None = None) -> "Trace":
    """Run ``launch()`` ``warmup`` times, then once more, under proton's instrumentation backend and
    return the last launch as a :class:`Trace`. ``launch`` must go through the JIT
    (``kernel[grid](...)``): the kernel compiles with its scopes inside the session. The Chrome
    trace is kept as ``folder/name.chrome_trace`` (a temporary folder by default)."""
    require(CLUSTERS, "traces.record (proton's instrumentation backend on a Hopper or Blackwell GPU)")
    import triton.profiler as proton
    folder = Path(folder or tempfile.mkdtemp(prefix="timeline-"))
    folder.mkdir(parents=True, exist_ok=True)
    stem = str(folder / name)
    proton.start(stem, data="trace", backend="instrumentation", mode=mode or default_mode())
    try:
        with proton.scope("warmup"):
            for _ in range(warmup):
                launch()
        with proton.scope("measured"):           # the host scope names this launch in the trace
            launch()
    finally:
        proton.finalize()
    return load(stem + ".chrome_trace", launch="measured", num_ctas=num_ctas, partitions=partitions,
                clock_mhz=clock_mhz)


# ------------------------------------------------------------------------------ the table

@dataclass
class Trace:
    """One launch's intervals, a row per scope (or event) instance per warp; see ``COLUMNS``.
    Times are ns since the launch's first record. ``meta`` says how they were made."""
    rows: list
    meta: dict = field(default_factory=dict)
    columns: tuple = COLUMNS

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]

    def column(self, name: str) -> list:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def __len__(self) -> int:
        return len(self.rows)


def partition_map(num_warps: int, worker_warps=(), names=None, starts=None) -> dict:
    """warp -> partition name for ``gl.warp_specialize(..., worker_num_warps, ...)`` in a kernel
    launched with ``num_warps``: the default partition owns the first warps, worker ``i`` the
    ``worker_warps[i]`` warps from ``starts[i]`` (default: one after another; Triton's own placement
    is what :func:`placed_partitions` reads)."""
    num_warps = validate.count(num_warps, "num_warps", high=64)
    if isinstance(worker_warps, (str, bytes)) or not isinstance(worker_warps, (list, tuple)):
        raise TypeError(f"worker_warps must be a list of warp counts, got {validate.shown(worker_warps)}")
    worker_warps = [validate.count(w, "worker_warps", high=64) for w in worker_warps]
    if starts is not None:
        if isinstance(starts, (str, bytes)) or not isinstance(starts, (list, tuple)) or len(starts) != len(worker_warps):
            raise ValueError(f"starts must be a list of {len(worker_warps)} first warps (one per worker), "
                             f"got {validate.shown(starts)}")
        starts = [validate.integer(s, "starts", 0, 64) for s in starts]
    names = list(names or ["default"] + [f"worker{i}" for i in range(len(worker_warps))])
    if len(names) != len(worker_warps) + 1:
        raise ValueError(f"{len(worker_warps) + 1} partitions need as many names, got {names}")
    if starts is None:
        starts = [num_warps + sum(worker_warps[:i]) for i in range(len(worker_warps))]
    owner = {w: names[0] for w in range(num_warps)}
    for name, first, n in zip(names[1:], starts, worker_warps):
        owner.update({w: name for w in range(first, first + n)})
    return owner


def placed_partitions(spec: lens.KernelSpec, names, target: str = "sm_90a") -> dict:
    """warp -> partition name as Triton places ``spec``'s ``warp_specialize`` partitions: its
    TTGIR through the compiler's allocate-warp-groups pass, which writes each worker's first warp
    (``warpGroupStartIds``; the padding partitions it adds come after the real ones). The scopes do
    not move partitions: compile the kernel without them (``instrument=False``)."""
    import tempfile
    from triton._C.libtriton import ir, nvidia, passes
    k = lens.compile(spec, target)
    ctx = ir.context()
    ir.load_dialects(ctx)
    nvidia.load_dialects(ctx)
    with tempfile.NamedTemporaryFile("w", suffix=".ttgir") as f:
        f.write(k.ttgir)
        f.flush()
        mod = ir.parse_mlir_module(f.name, ctx)
    pm = ir.pass_manager(ctx)
    passes.ttgpuir.add_allocate_warp_groups(pm, False)
    pm.run(mod, "placed_partitions")
    text = str(mod)
    found = re.findall(r"warpGroupStartIds = array<i32: ([\d, ]+)>", text)
    if len(found) != 1:
        raise ValueError(f"{spec.name} must have exactly one warp_specialize, found {len(found)}")
    size = re.compile(r"^\s*partition\d+\(.*\) num_warps\((\d+)\) \{$", re.M)
    workers = len(size.findall(k.ttgir))                  # before the pass: the kernel's own partitions
    if len(names) != workers + 1:
        raise ValueError(f"{spec.name} has a default partition and {workers} workers; got names {list(names)}")
    starts = [int(x) for x in found[0].split(",")][:workers]
    sizes = [int(n) for n in size.findall(text)][:workers]
    return partition_map(spec.options.get("num_warps", 4), sizes, names, starts)


_PID = re.compile(r"^(?P<kernel>.+) Core(?P<sm>\d+) CTA(?P<cta>\d+)$")
_TID = re.compile(r"^warp (?P<warp>\d+) \(line (?P<line>\d+)\)$")


def load(path, *, launch: str | None = None, kernel: str | None = None, num_ctas: int = 1,
         partitions: dict | None = None, clock_mhz: float | None = None) -> Trace:
    """Read proton's Chrome trace (or a result written by :func:`save`) into a :class:`Trace`.

    ``launch`` keeps the launch made under that host ``proton.scope`` (``record`` uses "measured");
    ``kernel`` picks one kernel when several were traced. ``num_ctas`` (CTAs per cluster) gives the
    cluster and rank columns; ``partitions`` maps warp -> partition name. ``clock_mhz`` converts
    cycles to ns (proton counts a cycle as a ns); without it times stay in proton's units."""
    with open(path) as f:
        doc = json.load(f)
    if "columns" in doc:
        return from_result(doc)
    events = []
    for e in doc["traceEvents"]:
        pid, tid = _PID.match(str(e.get("pid", ""))), _TID.match(str(e.get("tid", "")))
        if e.get("ph") != "X" or not pid or not tid:
            continue                                 # metadata, CPU-side or other profilers' events
        stack = tuple(e.get("args", {}).get("call_stack", ()))[:-1]
        if launch is not None and launch not in stack:
            continue
        events.append((e, pid, int(tid["warp"]), int(tid["line"]), stack))
    kernels = sorted({p["kernel"] for _, p, *_ in events})
    if kernel is None and len(kernels) > 1:
        raise ValueError(f"the trace holds several kernels {kernels}; pick one with kernel=")
    kernel = kernel or (kernels[0] if kernels else None)
    events = [ev for ev in events if ev[1]["kernel"] == kernel]
    if not events:
        raise ValueError(f"no instrumented events in {path}" + (f" under host scope {launch!r}" if launch else "")
                         + ": did the kernel compile inside the session, through the JIT, with its scopes on?")

    # A CTA's first record sits at its %globaltimer start (ns); later ones add cycles to it.
    first, init = {}, {}
    for e, p, *_, stack in events:
        key = (stack, p["cta"])
        first[key] = min(first.get(key, float("inf")), round(e["ts"] * 1000))
        if "Init Time (ns)" in e["args"]:
            init.setdefault(key, set()).add(e["args"]["Init Time (ns)"])
    if any(len(v) > 1 for v in init.values()):
        raise ValueError("one CTA appears in several launches: wrap each launch in its own proton.scope "
                         "and pick it with launch=")
    if len({stack for *_, stack in events}) > 1:
        raise ValueError("the trace holds several launches; pick one with launch= (a host proton.scope name)")

    def ns(e, p, stack, at):
        base = first[(stack, p["cta"])]
        t = round(at * 1000)
        return t if clock_mhz is None else base + (t - base) * 1000.0 / clock_mhz

    owner = partitions or {}
    rows, flows = [], {}
    for e, p, warp, line, stack in events:
        cta = int(p["cta"])
        where = (cta // num_ctas, cta % num_ctas, cta, int(p["sm"]))
        start = ns(e, p, stack, e["ts"])
        if e.get("cat") == "flow":                   # one end of an event that crossed warps
            flows.setdefault(e["bind_id"], {})["out" if e.get("flow_out") else "in"] = (where, warp, e["name"], start)
            continue
        kind = "event" if e.get("cat") == "async" else "scope"
        end = ns(e, p, stack, e["ts"] + e["dur"])
        rows.append((*where, warp, warp, owner.get(warp, "default"), line, e["name"], kind, start, end))
    for ends in flows.values():
        if "out" in ends and "in" in ends:
            (where, warp, name, start), (_, end_warp, _, end) = ends["out"], ends["in"]
            rows.append((*where, warp, end_warp, owner.get(warp, "default"), 0, name, "event", start, end))
    t0 = min(r[10] for r in rows)
    rows = sorted(((*r[:10], round(r[10] - t0, 1), round(r[11] - t0, 1)) for r in rows),
                  key=lambda r: (r[0], r[1], r[4], r[10], r[7]))          # cluster, rank, warp, start, line
    meta = {"kernel": kernel, "num_ctas": num_ctas, "launch": launch, "clock_mhz": clock_mhz,
            "partitions": {str(w): n for w, n in sorted(owner.items())},
            "clock_estimate_mhz": _clock_estimate(events),
            "time": ("ns since the launch's first record: cycles / clock_mhz inside a CTA, CTA starts from "
                     "%globaltimer" if clock_mhz else
                     "proton's units: cycles inside a CTA (counted as ns), CTA starts from %globaltimer (ns)")}
    return Trace(rows, meta)


def _clock_estimate(events):
    """Median over CTAs of (cycles from first to last record) / (ns between the CTA's %globaltimer
    start and its final copy): a check on clock_mhz, coarse (the timer ticks slower than the clock)."""
    span = {}
    for e, p, *_ in events:
        a = e["args"]
        if "Init Time (ns)" not in a:
            continue
        lo, hi, _ = span.get(p["cta"], (float("inf"), 0, 0))
        ns_span = a["Post Final Time (ns)"] - a["Finalization Time (ns)"] - a["Init Time (ns)"]
        span[p["cta"]] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]), ns_span)
    ratios = [(hi - lo) * 1000 / n * 1000 for lo, hi, n in span.values() if n > 0]
    return round(statistics.median(ratios), 1) if ratios else None


def trim(trace: Trace, *, clusters=None, ctas=None, warps=None, scopes=None, window_ns=None) -> Trace:
    """Keep the rows a figure needs. ``clusters``: ids, or an int n for clusters 0..n-1; ``ctas``:
    ranks within a cluster; ``warps``: warp ids; ``scopes``: names; ``window_ns``: (lo, hi), keeping
    intervals that overlap it, uncut. Times are not shifted."""
    if isinstance(clusters, int):
        clusters = range(clusters)
    keep = []
    for r in trace.records():
        if clusters is not None and r["cluster"] not in clusters:
            continue
        if ctas is not None and r["rank"] not in ctas:
            continue
        if warps is not None and r["warp"] not in warps:
            continue
        if scopes is not None and r["scope"] not in scopes:
            continue
        if window_ns is not None and not (r["end_ns"] >= window_ns[0] and r["start_ns"] <= window_ns[1]):
            continue
        keep.append(tuple(r.values()))
    meta = dict(trace.meta, trimmed={"clusters": None if clusters is None else list(clusters),
                                     "ctas": None if ctas is None else list(ctas),
                                     "warps": None if warps is None else list(warps),
                                     "scopes": None if scopes is None else list(scopes),
                                     "window_ns": None if window_ns is None else list(window_ns),
                                     "rows_before": len(trace)})
    return Trace(keep, meta, trace.columns)


def save(trace: Trace, path, env: dict, *, benchmark: str = "timeline", method: dict | None = None,
         max_rows: int = 20000) -> Path:
    """Write a (trimmed) trace as a result (``results.store.validate``): ``env`` is ``results.store.environment()``
    from the recording run. Refuses big tables: trim first, results/ is read by every CPU."""
    if len(trace) > max_rows:
        raise ValueError(f"{len(trace)} rows; trim the trace to at most {max_rows} before saving")
    result = {"benchmark": benchmark, **env,
              "method": {"timer": "proton intra-kernel instrumentation (per-warp cycle counters), not a benchmark timer",
                         "profiler": "proton instrumentation backend, data='trace', Default mode "
                                     "(shared-memory buffer, 64-bit cycle counter)",
                         "statistic": "one launch after a warm-up launch, every warp of every CTA kept",
                         "time": trace.meta.get("time"), **(method or {})},
              "ceilings": {}, "meta": trace.meta, "columns": list(trace.columns),
              "rows": [list(r) for r in trace.rows]}
    return store.save(result, path)


def from_result(result: dict) -> Trace:
    """A saved timeline result back into a :class:`Trace` (its provenance joins ``meta``)."""
    store.validate(result)
    meta = dict(result.get("meta", {}), gpu=result["gpu"], date=result["date"])
    return Trace([tuple(r) for r in result["rows"]], meta, tuple(result["columns"]))


def summary(trace: Trace, by: tuple = ()) -> list[dict]:
    """Median, min and max duration (ns) of each scope in each partition, over every warp and CTA; ``by``: more record
    columns to group by (e.g. ``("rank",)``: one row per CTA rank of the cluster), rows sorted by them."""
    keys = ("partition", "scope", "kind") + tuple(by)
    groups = {}
    for r in trace.records():
        groups.setdefault(tuple(r[k] for k in keys), []).append(r["end_ns"] - r["start_ns"])
    order = sorted(groups, key=lambda g: g[3:]) if by else list(groups)
    return [{**dict(zip(keys, g)), "count": len(groups[g]), "median_ns": round(statistics.median(groups[g]), 1),
             "min_ns": round(min(groups[g]), 1), "max_ns": round(max(groups[g]), 1)} for g in order]


def overhead(with_scopes: float, without_scopes: float) -> dict:
    """What the scopes cost, from two times of one kernel measured the same way (same unit)."""
    if without_scopes <= 0:
        raise ValueError(f"the time without scopes must be positive, got {without_scopes}")
    return {"with": with_scopes, "without": without_scopes, "added": with_scopes - without_scopes,
            "ratio": with_scopes / without_scopes}
