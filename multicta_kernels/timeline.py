"""Measured warp timelines: Triton's profiler (proton) inside a Gluon kernel, read back as a table.

A kernel marks regions with ``with scope("load", INSTRUMENT):``. When proton's *instrumentation*
backend is on while the kernel compiles, each scope becomes two time stamps per warp; otherwise it
compiles to nothing. :func:`record` runs a launch under proton on a GPU, :func:`load` turns proton's
Chrome trace into rows (cluster, CTA rank, SM, warp, partition, scope, start and end in ns),
:func:`trim` keeps what a figure needs, :func:`save` writes it under ``results/<gpu>/`` with the
run's provenance, and :func:`gantt` and :func:`summary` draw and tabulate it on any machine.

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

import multicta_kernels  # noqa: F401  (sets TRITON_DEFAULT_FP_FUSION before triton loads)
import triton.profiler.language as pl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.language.core import _unwrap_if_constexpr

from . import bench, lens
from .hardware import CLUSTERS, SMEM_PER_CTA, check_cluster_size, check_on_gpu, log2, require
from .layouts import PALETTE

COLUMNS = ("cluster", "rank", "cta", "sm", "warp", "end_warp", "partition", "line", "scope", "kind",
           "start_ns", "end_ns")
MAX_SHARED = dict.fromkeys(lens.TARGETS, SMEM_PER_CTA)    # bytes a CTA may opt into, per lens target


# ------------------------------------------------------------------------------- in the kernel

class scope:
    """``with scope("load", INSTRUMENT):`` in a Gluon kernel: a proton scope when the constexpr
    ``INSTRUMENT`` is true (and proton's instrumentation is on), no code at all otherwise."""
    __triton_builtin__ = True              # lets @gluon.jit code use this class, like pl.scope

    def __init__(self, name, on=True, _semantic=None):
        self.name, self.on, self._semantic = _unwrap_if_constexpr(name), _unwrap_if_constexpr(on), _semantic

    def __enter__(self):
        if self.on:
            pl.enter_scope(self.name, _semantic=self._semantic)

    def __exit__(self, *exc):
        if self.on:
            pl.exit_scope(self.name, _semantic=self._semantic)


def scope_names(fn) -> list[str]:
    """The timeline scopes a Gluon function (or its ``@gluon.jit`` wrapper) opens, in source order: what a
    recorded timeline of that partition can show."""
    import inspect
    return re.findall(r'scope\("(\w+)"', inspect.getsource(getattr(fn, "fn", fn)))


@gluon.jit
def center_rows_kernel(x_ptr, out_ptr, N, BLOCK: gl.constexpr, layout: gl.constexpr,
                       INSTRUMENT: gl.constexpr):
    """out[r] = x[r] - mean(x[r]). One cluster per row; ``layout`` splits the row over its CTAs,
    so the sum is a cross-CTA reduction."""
    row = gl.program_id(0).to(gl.int64)
    cols = gl.arange(0, BLOCK, layout)
    mask = cols < N
    with scope("load", INSTRUMENT):
        x = gl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    with scope("cross_cta_sum", INSTRUMENT):
        mean = gl.sum(x, axis=0) / N
    with scope("store", INSTRUMENT):
        gl.store(out_ptr + row * N + cols, x - mean, mask=mask)


@gluon.jit
def _handoff_reducer(desc, bufs, ready, event, out_ptr, TILES: gl.constexpr, INSTRUMENT: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    acc = gl.zeros(desc.block_shape, gl.float32, layout)
    for t in gl.static_range(TILES):
        with scope("wait", INSTRUMENT):
            mbarrier.wait(ready.index(t), 0)
        if INSTRUMENT:
            pl.end_event(event)              # this warp has seen tile t land
        with scope("add", INSTRUMENT):
            acc += bufs.index(t).load(layout).to(gl.float32)
    gl.store(out_ptr + gl.program_id(0), gl.sum(gl.sum(acc, axis=1), axis=0))


@gluon.jit
def _handoff_loader(desc, bufs, ready, event, TILES: gl.constexpr, INSTRUMENT: gl.constexpr):
    ROWS: gl.constexpr = desc.block_shape[0]
    for t in gl.static_range(TILES):
        with scope("issue", INSTRUMENT):
            mbarrier.expect(ready.index(t), desc.nbytes_per_cta)
            if INSTRUMENT:
                pl.start_event(event)        # tile t is in flight from here
            tma.async_load(desc, [(gl.program_id(0) * TILES + t) * ROWS, 0], ready.index(t), bufs.index(t))


@gluon.jit
def tma_handoff_kernel(desc, out_ptr, TILES: gl.constexpr, INSTRUMENT: gl.constexpr):
    """out[p] = sum of TILES tiles: a loader partition issues one TMA load per tile, the default
    partition waits for each and adds it up. The event ``tma_in_flight`` spans issue -> seen."""
    bufs = gl.allocate_shared_memory(desc.dtype, [TILES] + desc.block_shape, desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=TILES)
    for t in gl.static_range(TILES):
        mbarrier.init(ready.index(t), count=1)
    event = pl.allocate_event("tma_in_flight") if INSTRUMENT else 0
    gl.warp_specialize([(_handoff_reducer, (desc, bufs, ready, event, out_ptr, TILES, INSTRUMENT)),
                        (_handoff_loader, (desc, bufs, ready, event, TILES, INSTRUMENT))], [4], [48])


HANDOFF = dict(tiles=4, rows=32, cols=64, num_warps=4, worker_warps=(4,), names=("reducer", "loader"))


def _row_layout(block: int, num_ctas: int, num_warps: int = 4):
    per_thread = max(1, block // (32 * num_warps * num_ctas))
    return gl.BlockedLayout([per_thread], [32], [num_warps], [0],
                            cga_layout=[[1 << i] for i in range(log2(num_ctas))])


def _handoff_layout():
    return gl.NVMMASharedLayout.get_default_for([HANDOFF["rows"], HANDOFF["cols"]], gl.float16)


def demo_spec(num_ctas: int = 1, instrument: bool = False, N: int = 1024) -> lens.KernelSpec:
    """``center_rows_kernel`` as the lens compiles it (not in the lens registry: not a chapter kernel)."""
    check_cluster_size(num_ctas)
    block = max(1 << (N - 1).bit_length(), 128 * num_ctas)
    return lens.KernelSpec(
        "center_rows", center_rows_kernel,
        {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32", "BLOCK": "constexpr", "layout": "constexpr",
         "INSTRUMENT": "constexpr"},
        {"BLOCK": block, "layout": _row_layout(block, num_ctas), "INSTRUMENT": instrument},
        {"num_warps": 4, "num_ctas": num_ctas}, targets=("sm_90a", "sm_100a"),
        divisible=("x_ptr", "out_ptr") + (("N",) if N % 16 == 0 else ()))


def handoff_spec(instrument: bool = False) -> lens.KernelSpec:
    """``tma_handoff_kernel`` for the lens. With ``instrument=True`` compile it through
    :func:`instrumented`: its event cannot be compiled without proton's instrumentation."""
    h = HANDOFF
    desc = f"tensordesc<fp16[{h['rows']},{h['cols']}],{_handoff_layout()!r}>"
    return lens.KernelSpec("tma_handoff", tma_handoff_kernel,
                           {"desc": desc, "out_ptr": "*fp32", "TILES": "constexpr", "INSTRUMENT": "constexpr"},
                           {"TILES": h["tiles"], "INSTRUMENT": instrument}, {"num_warps": h["num_warps"]})


# --------------------------------------------------------------------- compiling with proton on

def default_mode(buffer_size: int = 0):
    """The mode the book records with: cycle counter, one buffer per CTA in shared memory
    (``buffer_size`` bytes; 0: proton sizes it from what the kernel leaves free)."""
    import triton.profiler as proton
    return proton.mode.Default(buffer_type="shared", buffer_size=buffer_size)


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


def instrumented(spec: lens.KernelSpec, target: str = "sm_90a", mode=None) -> lens.Compiled:
    """Compile a spec with proton's instrumentation on, on any machine: the lens of a timed kernel."""
    with proton_compiler(mode, MAX_SHARED[target]) as mode_str:
        return lens.compile(replace(spec, options={**spec.options, "instrumentation_mode": mode_str}), target)


# ------------------------------------------------------------------------------ on a GPU

def center_rows(x, out=None, *, num_ctas: int = 1, instrument: bool = False):
    """``x - x.mean(1, keepdim=True)`` for a 2-D fp32 CUDA tensor, one cluster of ``num_ctas`` CTAs
    per row, through the JIT (what :func:`record` needs: it compiles inside the session)."""
    spec, grid, args = center_rows_args(x, out, num_ctas=num_ctas, instrument=instrument)
    center_rows_kernel[grid](*args, **spec.options)
    return args[1]


def center_rows_args(x, out=None, *, num_ctas: int = 1, instrument: bool = False):
    """Checked arguments of ``center_rows_kernel``: (spec, grid, args), for a launch or :func:`prepare`."""
    import torch
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.float32:
        raise TypeError("x must be a 2-D float32 torch.Tensor")
    check_cluster_size(num_ctas)
    M, N = x.shape
    if not 1 <= N <= 16384 or not x.is_contiguous():
        raise ValueError(f"rows must be contiguous and hold 1 to 16384 elements, got shape {tuple(x.shape)}")
    out = torch.empty_like(x) if out is None else _checked_out(out, x.shape, torch.float32, x.device)
    require(CLUSTERS, "the timeline demo (thread-block clusters)")
    check_on_gpu(x, "x")
    spec = demo_spec(num_ctas, instrument, N)
    return spec, (M,), [x, out, N, *spec.constexprs.values()]


def _checked_out(out, shape, dtype, device):
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or out.device != device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {dtype} tensor of shape {tuple(shape)} on {device}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    return out


def tma_handoff(x, out=None, *, instrument: bool = False):
    """Per-program sums of ``HANDOFF["tiles"]`` tiles of 32 x 64 fp16 rows of ``x`` (fp32 out)."""
    spec, grid, args = tma_handoff_args(x, out, instrument=instrument)
    tma_handoff_kernel[grid](*args, **spec.options)
    return args[1]


def tma_handoff_args(x, out=None, *, instrument: bool = False):
    """Checked arguments of ``tma_handoff_kernel``: (spec, grid, args)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    h = HANDOFF
    rows_per_program = h["tiles"] * h["rows"]
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float16 or x.dim() != 2 or x.shape[1] != h["cols"]:
        raise TypeError(f"x must be a 2-D float16 tensor with {h['cols']} columns")
    if x.shape[0] % rows_per_program or not x.is_contiguous():
        raise ValueError(f"x must be contiguous with a multiple of {rows_per_program} rows")
    programs = x.shape[0] // rows_per_program
    out = torch.empty(programs, device=x.device, dtype=torch.float32) if out is None else \
        _checked_out(out, (programs,), torch.float32, x.device)
    require(CLUSTERS, "the TMA hand-off demo (TMA and warp specialisation)")
    check_on_gpu(x, "x")
    desc = TensorDescriptor.from_tensor(x, [h["rows"], h["cols"]], _handoff_layout())
    return handoff_spec(instrument), (programs,), [desc, out, *handoff_spec(instrument).constexprs.values()]


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
    require(CLUSTERS, "timeline.record (proton's instrumentation backend on a Hopper or Blackwell GPU)")
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
    """Write a (trimmed) trace as a result (``bench.validate``): ``env`` is ``bench.environment()``
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
    return bench.save(result, path)


def from_result(result: dict) -> Trace:
    """A saved timeline result back into a :class:`Trace` (its provenance joins ``meta``)."""
    bench.validate(result)
    meta = dict(result.get("meta", {}), gpu=result["gpu"], date=result["date"])
    return Trace([tuple(r) for r in result["rows"]], meta, tuple(result["columns"]))


# ------------------------------------------------------------------------------ reading it

_SCOPE_COLOURS = [PALETTE[i] for i in (4, 0, 2, 5, 6, 1, 3, 7)]   # Okabe-Ito: blue, orange, green, ...


def scope_colours(trace: Trace) -> dict:
    """scope name -> colour, in order of first appearance (the same kernel gets the same colours)."""
    names = [r["scope"] for r in sorted(trace.records(), key=lambda r: (r["start_ns"], r["kind"] != "scope"))]
    return {s: _SCOPE_COLOURS[i % len(_SCOPE_COLOURS)] for i, s in enumerate(dict.fromkeys(names))}


def _row_key(r: dict, by: str):
    if by == "warp":
        return r["cluster"], r["rank"], r["warp"]
    return r["cluster"], r["rank"], r["partition"]


def gantt(trace: Trace, ax=None, *, by: str = "warp", title: str | None = None, colours: dict | None = None):
    """A Gantt chart: a row per warp (``by="warp"``) or partition (``by="partition"``), the CTAs of
    a cluster stacked, one colour per scope, nested scopes thinner, time in ns. Same-warp events
    are hatched bars; events that cross warps are arrows from the warp that started them."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    if by not in ("warp", "partition"):
        raise ValueError(f"by must be 'warp' or 'partition', not {by!r}")
    recs = trace.records()
    if not recs:
        raise ValueError("the trace is empty: nothing to draw")
    colours = colours or scope_colours(trace)
    first_warp = {}
    for r in recs:
        k = _row_key(r, by)
        first_warp[k] = min(first_warp.get(k, r["warp"]), r["warp"])
    keys = sorted(first_warp, key=lambda k: (k[0], k[1], first_warp[k]))
    y = {k: i for i, k in enumerate(keys)}
    ax = ax or plt.subplots(figsize=(8, 1.2 + 0.22 * len(keys)))[1]

    crossing = [r for r in recs if r["kind"] == "event" and r["warp"] != r["end_warp"]]
    bars = [r for r in recs if not (r["kind"] == "event" and r["warp"] != r["end_warp"])]
    for (scope_name, kind) in dict.fromkeys((r["scope"], r["kind"]) for r in bars):
        mine = [r for r in bars if r["scope"] == scope_name and r["kind"] == kind]
        event = kind == "event"
        ax.barh([y[_row_key(r, by)] + (0.2 if event else 0) for r in mine],
                [max(r["end_ns"] - r["start_ns"], 0.5) for r in mine], left=[r["start_ns"] for r in mine],
                height=[0.35 if event else 0.8 * 0.6 ** r["line"] for r in mine],
                color=colours[scope_name], alpha=0.6 if event else 1.0, hatch="////" if event else None,
                edgecolor="white" if event else "none", linewidth=0)
    owner = {int(w): p for w, p in trace.meta.get("partitions", {}).items()}
    for r in crossing:
        end = dict(r, warp=r["end_warp"], partition=owner.get(r["end_warp"], r["partition"]))
        ax.annotate("", xy=(r["end_ns"], y[_row_key(end, by)]), xytext=(r["start_ns"], y[_row_key(r, by)]),
                    arrowprops=dict(arrowstyle="->", color=colours[r["scope"]], lw=0.8, alpha=0.8))

    for i in range(1, len(keys)):                     # lines between CTAs, heavier between clusters
        if keys[i][:2] != keys[i - 1][:2]:
            ax.axhline(i - 0.5, color="0.3" if keys[i][0] != keys[i - 1][0] else "0.75", lw=0.8)
    label = (lambda k: f"cluster {k[0]} CTA {k[1]} warp {k[2]}" + (
        f" ({owner[k[2]]})" if owner.get(k[2], "default") != "default" else "")) if by == "warp" else (
        lambda k: f"cluster {k[0]} CTA {k[1]} {k[2]}")
    ax.set_yticks(range(len(keys)), [label(k) for k in keys], fontsize=7)
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.set_xlabel("time since the launch's first record (ns)" if trace.meta.get("clock_mhz") else
                  "time since the launch's first record (proton units: cycles, counted as ns)")
    ax.grid(axis="x", alpha=0.3)
    kinds = {(r["scope"], r["kind"]) for r in recs}
    handles = [Patch(facecolor=c, label=s) for s, c in colours.items() if (s, "scope") in kinds]
    handles += [Patch(facecolor=c, alpha=0.6, hatch="////", edgecolor="white", label=f"{s} (event)")
                for s, c in colours.items() if (s, "event") in kinds]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="scope",
              title_fontsize=8)
    where = f" on {trace.meta['gpu']}, {trace.meta.get('date', '?')}" if "gpu" in trace.meta else ""
    ax.set_title(title or f"{trace.meta.get('kernel', 'kernel')}: measured{where}", fontsize=10)
    return ax


def summary(trace: Trace) -> list[dict]:
    """Median, min and max duration (ns) of each scope in each partition, over every warp and CTA."""
    groups = {}
    for r in trace.records():
        groups.setdefault((r["partition"], r["scope"], r["kind"]), []).append(r["end_ns"] - r["start_ns"])
    return [{"partition": p, "scope": s, "kind": k, "count": len(d), "median_ns": round(statistics.median(d), 1),
             "min_ns": round(min(d), 1), "max_ns": round(max(d), 1)} for (p, s, k), d in groups.items()]


def overhead(with_scopes: float, without_scopes: float) -> dict:
    """What the scopes cost, from two times of one kernel measured the same way (same unit)."""
    if without_scopes <= 0:
        raise ValueError(f"the time without scopes must be positive, got {without_scopes}")
    return {"with": with_scopes, "without": without_scopes, "added": with_scopes - without_scopes,
            "ratio": with_scopes / without_scopes}
