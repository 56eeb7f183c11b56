"""Launches intercepted: a Blackwell run walked up to its launch on a CPU, and a GPU run's compile phase.

No Blackwell GPU has run the book. :func:`dry_run` makes the next best thing routine: inside it the
package believes it runs on a B200 (:func:`hardware.pretend`, CPU tensors standing in for GPU ones)
and every ``kernel[grid](...)`` of a ``@gluon.jit`` or ``@triton.jit`` function is stopped at the
launch. What a launch would do first is done for real:

* the arguments are bound and specialised exactly as Triton's launcher does it (an integer equal to
  1 becomes a constant, 16-divisible integers and pointers are marked, tensor descriptors typed);
* the kernel is compiled for sm_100a (``triton.compile`` with an explicit ``GPUTarget``: no GPU is
  needed) with the launch's constexprs, ``num_warps`` and ``num_ctas``;
* what the driver would refuse when it loads and launches the kernel is refused here: shared memory
  over a CTA's 227 KiB, tensor memory over 512 columns, more than 1024 threads or 64 K registers per
  CTA, a grid over CUDA's limits or with a zero dimension (Triton then launches nothing, silently),
  global scratch without ``triton.set_allocator``, and every TMA descriptor against the rules of
  ``cuTensorMapEncodeTiled`` (CUDA driver API), which Triton calls at launch;
* the launch is recorded (kernel, grid, cluster size, warps, resources) and nothing runs.

Element-wise comparisons (:mod:`multicta_kernels.core.accuracy`) are skipped and counted: nothing was
computed. :func:`multicta_kernels.core.occupancy.max_clusters`, the occupancy calculator, needs a GPU; in a
dry run it returns an upper bound computed from the compiled kernel's resources (see
:func:`resident_bound`) and the session says that it was a bound.

:func:`compile_only` is the same interception on a real GPU, for the doctor's compile phase: every
kernel a check launches is compiled for this GPU through Triton's own path (``warmup``) and loaded,
none is launched, so the timed run phase that follows finds them in Triton's cache.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

from . import hardware
from .hardware import OneLineError

# What a B200 (compute capability 10.0) allows; CUDA Programming Guide, "Compute Capabilities" table.
SMEM_PER_SM = 228 * 1024          # shared memory per SM ...
SMEM_RESERVED_PER_CTA = 1024      # ... of which the system reserves 1 KiB per resident CTA
THREADS_PER_SM = 2048
THREADS_PER_CTA = 1024
CTAS_PER_SM = 32
REGISTERS_PER_SM = 64 * 1024      # 32-bit registers; also the most one CTA may use
REGISTER_UNIT = 256               # registers are allocated per warp in units of 256 (CUDA occupancy calculator)
TMEM_COLUMNS = hardware.TMEM_COLUMNS
GRID_X_MAX = 2 ** 31 - 1          # CTAs along x (Triton's grid counts clusters: times num_ctas)
GRID_YZ_MAX = 65535
SWIZZLE_BYTES = {1: 32, 2: 64, 3: 128}   # CUtensorMapSwizzle: 32B, 64B, 128B


class DryRunError(OneLineError, RuntimeError):
    """What a GPU's driver would refuse at this launch, found without the GPU."""


@dataclass
class Launch:
    """One intercepted launch (or warm-up: ``launched`` False)."""
    kernel: str
    grid: tuple
    num_ctas: int
    num_warps: int            # the kernel's warps per CTA, warp-specialised partitions included
    target: str
    shared: int               # bytes per CTA
    tmem: int                 # tensor-memory columns (0 without)
    registers: int | None     # per thread, from the cubin (None where unknown)
    compile_s: float          # seconds in triton.compile (Triton's disk cache may have served it)
    launched: bool = True
    compiled: bool = True     # False when this process had compiled it for an earlier launch
    signature: dict = field(default_factory=dict)   # as compiled: an integer argument of 1 is a "constexpr"
    binary: object = field(default=None, repr=False, compare=False)   # the CompiledKernel

    def __str__(self) -> str:
        grid = "x".join(map(str, self.grid)) if self.launched else "-"
        regs = f", {self.registers} regs" if self.registers is not None else ""
        tmem = f", {self.tmem} TMEM cols" if self.tmem else ""
        return (f"{self.kernel} [{self.target}] grid {grid}, {self.num_ctas} CTA{'s' if self.num_ctas > 1 else ''}"
                f" x {self.num_warps} warps, {self.shared // 1024} KiB smem{tmem}{regs}")


@dataclass
class Session:
    """What happened inside one :func:`dry_run` or :func:`compile_only`."""
    mode: str                                      # "dry run" or "compile only"
    target: object = None                          # the GPUTarget compiled for (dry run)
    sms: int | None = None
    launches: list = field(default_factory=list)
    skipped: list = field(default_factory=list)    # comparisons not made
    bounds: list = field(default_factory=list)     # (kernel, num_ctas, bound) given for max_clusters

    @property
    def arch(self) -> str:
        return f"sm_{self.target.arch}a" if self.target is not None else "this GPU"

    def summary(self) -> str:
        """One line: what was compiled and launched, what was skipped, which bounds were used."""
        if not self.launches:
            return "no kernel launched" + (f"; {len(self.skipped)} comparison{'s' if len(self.skipped) > 1 else ''} "
                                           "skipped (nothing ran)" if self.skipped else "")
        kinds = {}
        for ln in self.launches:
            k = kinds.setdefault((ln.kernel, ln.num_ctas, ln.num_warps, ln.shared, ln.tmem, ln.registers), [0, []])
            k[0] += ln.launched
            if ln.launched and ln.grid not in k[1]:
                k[1].append(ln.grid)
        new = [ln for ln in self.launches if ln.compiled]
        n = sum(ln.launched for ln in self.launches)
        verb = "stopped after compiling for" if self.mode == "dry run" else "not launched, compiled and loaded for"
        parts = []
        for (name, ctas, warps, shared, tmem, regs), (count, grids) in kinds.items():
            shown = ", ".join("x".join(map(str, g)) for g in grids[:6]) + (", ..." if len(grids) > 6 else "")
            parts.append(f"{name} x{count} (grid{'s' if len(grids) > 1 else ''} {shown or '-'}; {ctas} CTA"
                         f"{'s' if ctas > 1 else ''} x {warps} warps, {shared // 1024} KiB smem"
                         + (f", {tmem} TMEM cols" if tmem else "") + (f", {regs} regs" if regs is not None else "")
                         + ")")
        line = (f"{n} launch{'es' if n != 1 else ''} {verb} {self.arch} ({len(new)} compile"
                f"{'s' if len(new) != 1 else ''}, {sum(ln.compile_s for ln in new):.1f} s): " + "; ".join(parts))
        if self.skipped:
            line += f"; {len(self.skipped)} comparison{'s' if len(self.skipped) > 1 else ''} skipped (nothing ran)"
        for kernel, ctas, bound in dict.fromkeys(self.bounds):
            line += f"; resident {ctas}-CTA clusters of {kernel}: at most {bound} (a bound, not the occupancy calculator)"
        return line


_ACTIVE: list[Session] = []
_SAVED: dict = {}
_COMPILED: dict = {}       # this process's dry-run compiles, by (kernel, target, specialisation, options)
_REGISTERS: dict = {}


def active() -> Session | None:
    """The innermost session, or None outside :func:`dry_run` and :func:`compile_only`."""
    return _ACTIVE[-1] if _ACTIVE else None


def comparing() -> bool:
    """Whether results exist to compare: False inside a session (nothing was computed)."""
    return not _ACTIVE


def skip_compare(what: str) -> bool:
    """For the comparison helpers: inside a session, record that ``what`` was not compared and return True."""
    if not _ACTIVE:
        return False
    _ACTIVE[-1].skipped.append(what)
    return True


@contextlib.contextmanager
def dry_run(capability=(10, 0), name: str = "NVIDIA B200", sms: int = 148):
    """Pretend a GPU of ``capability`` (by default a B200's 148 SMs) and stop every launch after compiling for
    it: yields the :class:`Session` that records what was launched."""
    from triton.backends.compiler import GPUTarget
    with hardware.pretend(capability, name, sms) as dev:
        s = Session("dry run", GPUTarget("cuda", 10 * capability[0] + capability[1], 32), dev.sms)
        with _intercepting(s):
            yield s


@contextlib.contextmanager
def compile_only():
    """On a GPU: compile and load every kernel a block launches, launch none (the doctor's compile phase)."""
    s = Session("compile only", None, hardware.device().sms)
    with _intercepting(s):
        yield s


@contextlib.contextmanager
def _intercepting(s: Session):
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction
    if not _ACTIVE:
        _SAVED.update(run=JITFunction.run, getitem=CompiledKernel.__getitem__)
        JITFunction.run = _run
        CompiledKernel.__getitem__ = _getitem
    _ACTIVE.append(s)
    try:
        yield s
    finally:
        _ACTIVE.remove(s)
        if not _ACTIVE:
            JITFunction.run = _SAVED["run"]
            CompiledKernel.__getitem__ = _SAVED["getitem"]


# ------------------------------------------------------------------------------ the interception

def _run(self, *args, grid, warmup, **kwargs):
    """JITFunction.run inside a session: compile (for the pretended target, or through Triton's own warm-up on
    a GPU), check what the driver would check, record, and never launch."""
    s = _ACTIVE[-1]
    if s.mode == "compile only":
        t0 = time.monotonic()
        kernel = _SAVED["run"](self, *args, grid=grid, warmup=True, **kwargs)
        kernel._init_handles()                   # loaded now: the run phase only launches
        _record(s, kernel, None if callable(grid) or warmup else _grid(grid, None), time.monotonic() - t0, not warmup)
        return kernel
    kernel, bound, seconds = _compile(self, s.target, args, kwargs)
    g = _grid(grid, bound) if not warmup else None
    _check_kernel(kernel)
    if not warmup:
        _check_launch(kernel, g, list(bound.values()), list(bound))
    _record(s, kernel, g, seconds, not warmup)
    return kernel


def _getitem(self, grid):
    """CompiledKernel[grid] inside a session: a runner that checks and records instead of launching."""
    s = _ACTIVE[-1]
    if s.mode == "compile only":
        self._init_handles()

    def runner(*args, stream=None):
        g = _grid(grid, None)
        if s.mode == "dry run":
            _check_launch(self, g, list(args), list(self.src.fn.arg_names))
        _record(s, self, g, None, True)
    return runner


def _compile(fn, target, args, kwargs):
    """Bind and specialise like JITFunction.run, then compile for ``target``: (kernel, bound args, seconds)."""
    import triton
    from triton import knobs
    from triton.compiler import ASTSource, make_backend
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import compute_cache_key, create_function_from_signature
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    kwargs["fpsan_homomorphic_casts"] = knobs.compilation.fpsan_homomorphic_casts
    for hook in fn.pre_run_hooks:
        hook(*args, **kwargs)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    key = (fn.cache_key, target.arch, compute_cache_key({}, specialization, options))   # cache_key: the source's hash
    if key in _COMPILED:
        return _COMPILED[key], bound, None
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    source = GluonASTSource if fn.is_gluon() else ASTSource
    t0 = time.monotonic()
    kernel = triton.compile(source(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
    _COMPILED[key] = kernel
    return kernel, bound, time.monotonic() - t0


def _grid(grid, bound):
    if callable(grid):
        grid = grid(bound)
    grid = tuple(int(g) for g in grid)
    return grid + (1,) * (3 - len(grid))


def _record(s, kernel, grid, seconds, launched):
    """``seconds`` None: no compile (this process had the kernel already)."""
    md = kernel.metadata
    target = f"sm_{md.target.arch}a" if md.target.arch >= 90 else f"sm_{md.target.arch}"
    s.launches.append(Launch(md.name, grid[:_rank(grid)] if grid else (), getattr(md, "num_ctas", 1), md.num_warps,
                             target, md.shared, getattr(md, "tmem_size", 0) or 0, registers(kernel), seconds or 0.0,
                             launched, seconds is not None, dict(getattr(kernel.src, "signature", {})), kernel))


def _rank(grid):
    return max([i + 1 for i, g in enumerate(grid) if g != 1] or [1])


# ------------------------------------------------------------------------ what the driver checks

def registers(kernel) -> int | None:
    """Registers per thread of a compiled kernel, read from its cubin with Triton's ``cuobjdump`` (no GPU)."""
    import os
    import re
    import subprocess
    import tempfile
    if kernel.hash in _REGISTERS:
        return _REGISTERS[kernel.hash]
    n = None
    cubin = kernel.asm.get("cubin")
    if cubin:
        from triton import knobs
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "k.cubin")
            with open(path, "wb") as f:
                f.write(cubin)
            try:
                out = subprocess.run([knobs.nvidia.cuobjdump.path, "-res-usage", path], capture_output=True,
                                     text=True, timeout=60).stdout
                m = re.search(r"REG:(\d+)", out)
                n = int(m.group(1)) if m else None
            except (OSError, subprocess.SubprocessError):
                n = None
    _REGISTERS[kernel.hash] = n
    return n


def _per_cta_registers(regs: int, warps: int) -> int:
    return warps * math.ceil(regs * hardware.LANES / REGISTER_UNIT) * REGISTER_UNIT


def _check_kernel(kernel) -> None:
    """What loading the kernel would refuse (Triton's CompiledKernel._init_handles and the driver)."""
    md = kernel.metadata
    name = md.name
    if md.shared > hardware.SMEM_PER_CTA:
        raise DryRunError(f"{name} needs {md.shared} bytes of shared memory per CTA; a CTA may have "
                          f"{hardware.SMEM_PER_CTA} (Triton refuses to load it: OutOfResources)")
    tmem = getattr(md, "tmem_size", 0) or 0
    if tmem > TMEM_COLUMNS:
        raise DryRunError(f"{name} allocates {tmem} tensor-memory columns; a CTA has {TMEM_COLUMNS}")
    threads = md.num_warps * hardware.LANES
    if threads > THREADS_PER_CTA:
        raise DryRunError(f"{name} has {threads} threads per CTA; CUDA launches at most {THREADS_PER_CTA}")
    regs = registers(kernel)
    if regs is not None and _per_cta_registers(regs, md.num_warps) > REGISTERS_PER_SM:
        raise DryRunError(f"{name}: {regs} registers x {threads} threads exceed the {REGISTERS_PER_SM} registers of "
                          "an SM (the launch would fail: too many resources requested)")


def _check_launch(kernel, grid, args, names) -> None:
    """What launching with this grid and these arguments would refuse."""
    md = kernel.metadata
    num_ctas = getattr(md, "num_ctas", 1)
    if min(grid) < 1:
        raise DryRunError(f"{md.name}: grid {grid} has a zero dimension: Triton launches nothing, silently")
    if grid[0] * num_ctas > GRID_X_MAX or max(grid[1:]) > GRID_YZ_MAX:
        raise DryRunError(f"{md.name}: grid {grid} of {num_ctas}-CTA clusters exceeds CUDA's grid limits "
                          f"({GRID_X_MAX} CTAs along x, {GRID_YZ_MAX} along y and z)")
    if getattr(md, "global_scratch_size", 0) > 0:
        from triton.runtime import _allocation
        if _allocation._allocator.get() is _allocation._NULL_ALLOCATOR:
            raise DryRunError(f"{md.name} needs {md.global_scratch_size} bytes of global scratch per CTA and no "
                              "allocator is set (triton.set_allocator): the launch would raise")
    metas = list(getattr(md, "tensordesc_meta", None) or [])
    sig = kernel.src.signature
    for name, value in zip(names, args):
        if str(sig.get(name, "")).startswith("tensordesc"):
            meta = metas.pop(0) if metas else None
            if meta is not None:
                check_descriptor(value, meta, f"{md.name}'s {name}")


def check_descriptor(desc, meta, what: str) -> None:
    """A tiled TMA descriptor against ``cuTensorMapEncodeTiled``'s requirements (CUDA driver API), with the
    per-CTA box, swizzle and element size the compiler chose (the kernel's ``tensordesc_meta``)."""
    elem = meta["elem_size"]
    box = list(meta["block_size"])
    shape, strides = list(desc.shape), list(desc.strides)
    if not 1 <= len(shape) <= 5:
        raise DryRunError(f"{what}: a tensor map has rank 1 to 5, got {len(shape)}")
    if desc.base.data_ptr() % 16:
        raise DryRunError(f"{what}: the global address must be 16-byte aligned")
    if any(not 0 < d <= 2 ** 32 for d in shape):
        raise DryRunError(f"{what}: every global dimension must be from 1 to 2**32, got {shape}")
    if strides[-1] != 1 or any((st * elem) % 16 or st * elem >= 2 ** 40 for st in strides[:-1]):
        raise DryRunError(f"{what}: strides {strides} (elements of {elem} bytes): the inner one must be 1, the "
                          "others multiples of 16 bytes under 2**40")
    if any(not 0 < b <= hardware.TMA_BOX_MAX for b in box):
        raise DryRunError(f"{what}: every box dimension must be from 1 to {hardware.TMA_BOX_MAX}, got {box}")
    inner = box[-1] * elem
    if inner % 16:
        raise DryRunError(f"{what}: the box's inner dimension is {inner} bytes, not a multiple of 16")
    span = SWIZZLE_BYTES.get(meta.get("swizzle", 0))
    if span and inner > span:
        raise DryRunError(f"{what}: the box's inner dimension is {inner} bytes, more than its {span}-byte swizzle")


# ------------------------------------------------------------------------ resident clusters, bounded

def resident_bound(kernel, num_ctas: int, sms: int) -> int:
    """An upper bound on the clusters of ``num_ctas`` CTAs of ``kernel`` resident at once on ``sms`` SMs: CTAs
    per SM limited by shared memory, threads, registers and CUDA's 32, times the SMs, over the cluster size.
    The true number can be lower (a cluster must fit in one GPC; CUDA's occupancy calculator knows the
    GPCs, and needs a GPU)."""
    md = kernel.metadata
    per_sm = [CTAS_PER_SM, THREADS_PER_SM // (md.num_warps * hardware.LANES),
              SMEM_PER_SM // (md.shared + SMEM_RESERVED_PER_CTA)]
    regs = registers(kernel)
    if regs:
        per_sm.append(REGISTERS_PER_SM // _per_cta_registers(regs, md.num_warps))
    return sms * max(min(per_sm), 0) // num_ctas


def bounded_max_clusters(kernel, num_ctas: int) -> int:
    """occupancy.max_clusters inside a dry run: :func:`resident_bound` on the pretended GPU's SMs, recorded as a bound."""
    s = _ACTIVE[-1]
    n = resident_bound(kernel, num_ctas, s.sms or hardware.device().sms)
    s.bounds.append((kernel.metadata.name, num_ctas, n))
    return n
