"""Compiling a kernel spec for any NVIDIA target on a machine without a GPU.

Every kernel in the package registers a *spec* (signature, constexprs, options, targets and the
PTX instructions that carry its idea). :func:`compile` compiles a spec with ``triton.compile``
against an explicit :class:`GPUTarget`, so the same kernel that runs on an H200 or a B200 can be
read on a laptop: its TTGIR, LLVM IR and PTX (read with :mod:`multicta_kernels.lens.ptx`).

MLIR diagnostics go to file descriptor 2 and the Python exception only says that a pass failed;
the lens captures fd 2 around the compile and raises :class:`LensCompileError` with the first
``error:`` line instead.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from ..core import validate
from ..core.hardware import SMEM_PER_CTA, TARGETS, OneLineError, check_cluster_size
from ..core.isolation import TritonAborted, isolated
from ..core.layouts import check_layout_for
from .ptx import census, code, excerpt
from .sass import resources


class LensCompileError(OneLineError, RuntimeError):
    """A kernel failed to compile; ``diagnostic`` holds the compiler's first error line."""

    def __init__(self, diagnostic: str, spec_name: str, target: str):
        super().__init__(f"{spec_name} does not compile for {target}: {diagnostic}")
        self.diagnostic, self.spec_name, self.target = diagnostic, spec_name, target

    def __reduce__(self):                  # crosses the pipe from the compiling child process
        return LensCompileError, (self.diagnostic, self.spec_name, self.target)


@dataclass(frozen=True)
class KernelSpec:
    """Everything ``triton.compile`` needs, plus what the book expects to see in the PTX."""
    name: str
    fn: object
    signature: dict
    constexprs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    targets: tuple = ("sm_90a", "sm_100a")
    expect: tuple = ()           # substrings that must appear in the PTX for every target
    divisible: tuple = ()        # arguments assumed 16-divisible, as Triton specialises at launch
    language: str = "gluon"      # or "triton" for plain tl kernels (Part 0)


def specialise(s: KernelSpec, **values) -> KernelSpec:
    """``s`` as Triton compiles it for a launch with these runtime integer arguments: an argument
    equal to 1 becomes a constant (a ``constexpr``), a multiple of 16 is marked divisible. That is
    what the launcher does, so a kernel that breaks at M = 1 on a GPU breaks here, on a CPU."""
    from dataclasses import replace

    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    sig, consts, div = dict(s.signature), dict(s.constexprs), list(s.divisible)
    fn = getattr(s.fn, "compiled", s.fn)
    kept = {p.name for p in getattr(fn, "params", []) if p.do_not_specialize}     # @jit(do_not_specialize=...)
    for name, value in values.items():
        if sig.get(name) not in ("i32", "i64"):
            raise KeyError(f"{s.name} has no integer argument {name!r}; its signature: {s.signature}")
        kind, key = native_specialize_impl(BaseBackend, value, False, name not in kept, True)
        if kind == "constexpr":
            sig[name], consts[name] = "constexpr", value
        elif key == "D":
            div.append(name)
    return replace(s, signature=sig, constexprs=consts, divisible=tuple(dict.fromkeys(div)))


@dataclass(frozen=True)
class Compiled:
    spec: KernelSpec
    target: str
    ttgir: str
    llir: str
    ptx: str
    shared_bytes: int

    def census(self, patterns=None):
        return census(self.ptx, patterns)

    def resources(self) -> dict:
        """Registers, spills and stack per thread, as ptxas reports them (``ptxas -v`` on this PTX, with
        the ptxas Triton bundles: no GPU needed). Spills show here, never in the PTX itself."""
        return resources(self.ptx, self.target)

    def excerpt(self, pattern: str, context: int = 2, max_hits: int = 2) -> str:
        return excerpt(self.ptx, pattern, context, max_hits)

    @property
    def code(self) -> str:
        """The PTX without what says where it came from (see :func:`code`): what to compare."""
        return code(self.ptx)


def compile(s: KernelSpec, target: str = "sm_90a", fits: bool = True) -> Compiled:
    """Compile a kernel spec for ``target`` on any machine (the book's kernels by name: ``catalog.compile``).
    A kernel that needs more shared memory than a CTA has is refused (the driver would not launch it);
    ``fits=False`` returns it anyway, to read how much it needs."""
    if not isinstance(s, KernelSpec):
        raise TypeError(f"lens.compile takes a KernelSpec; compile the book's kernels by name with "
                        f"multicta_kernels.catalog.compile({s!r}, ...)")
    validate.boolean(fits, "fits")
    return _compile_spec(s, target, fits)


def _compile_spec(s: KernelSpec, target: str, fits: bool = True) -> Compiled:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; the lens knows {sorted(TARGETS)}")
    if target not in s.targets:
        raise ValueError(f"{s.name} is written for {', '.join(s.targets)} only, not {target}")
    check_spec(s)
    try:
        k = Compiled(s, target, *isolated(_compile_here, s, target))
    except TritonAborted as exc:
        raise LensCompileError(str(exc), s.name, target) from None
    if fits and k.shared_bytes > SMEM_PER_CTA:          # Triton compiles it; the driver would refuse to launch it
        raise LensCompileError(f"it needs {k.shared_bytes // 1024} KiB of shared memory per CTA, more than the "
                               f"{SMEM_PER_CTA // 1024} KiB a CTA can have (it would not launch: OutOfResources); "
                               f"use fewer stages or smaller blocks", s.name, target)
    return k


def check_spec(s: KernelSpec) -> None:
    """What Triton would abort on, refused with a ValueError first: the cluster size, and every
    ``cga_layout`` among the constexprs (log2(num_ctas) bases, each a power of two along one
    dimension: see :func:`multicta_kernels.core.layouts.check_cga_layout`)."""
    num_ctas = s.options.get("num_ctas", 1)
    try:
        check_cluster_size(num_ctas)
    except ValueError as exc:
        raise ValueError(f"{s.name}: {exc}") from None
    warps = s.options.get("num_warps", 4)
    if not isinstance(warps, int) or warps < 1 or warps & (warps - 1) or warps > 32:
        raise ValueError(f"{s.name}: num_warps must be a power of two from 1 to 32, got {warps!r}")
    for name, value in s.constexprs.items():
        try:
            check_layout_for(value, num_ctas)
        except ValueError as exc:
            raise ValueError(f"{s.name}: constexpr {name!r}: {exc}") from None


def _compile_here(s: KernelSpec, target: str) -> tuple:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource

    fn = getattr(s.fn, "compiled", s.fn)     # a tl kernel made for the interpreter carries its JIT twin
    names = list(fn.arg_names)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in s.divisible}
    source = ASTSource if s.language == "triton" else GluonASTSource
    src = source(fn, s.signature, s.constexprs, attrs)
    with _captured_stderr() as err:
        try:
            k = triton.compile(src, target=GPUTarget("cuda", TARGETS[target], 32), options=dict(s.options))
        except Exception as exc:  # compiler errors come in many types; all become one
            raise LensCompileError(_first_error(err.read(), exc), s.name, target) from None
    return k.asm.get("ttgir", ""), k.asm.get("llir", ""), k.asm["ptx"], int(k.metadata.shared)


class _captured_stderr:
    """What is written to file descriptor 2 (where MLIR writes diagnostics) while the block runs. Inside
    :func:`~multicta_kernels.core.isolation.isolated` fd 2 is already a file, which the parent reads if the
    compiler aborts: keep writing there and read back what was added; elsewhere redirect to a file."""

    def __enter__(self):
        import stat
        self._own = not stat.S_ISREG(os.fstat(2).st_mode)
        if self._own:
            self._tmp = tempfile.TemporaryFile(mode="w+b")
            self._saved = os.dup(2)
            os.dup2(self._tmp.fileno(), 2)
        self._start = os.lseek(2, 0, os.SEEK_END)
        return self

    def read(self) -> str:
        end = os.lseek(2, 0, os.SEEK_END)
        return os.pread(2, end - self._start, self._start).decode(errors="replace")

    def __exit__(self, *exc):
        if self._own:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._tmp.close()
        return False


def _first_error(stderr_text: str, exc: Exception) -> str:
    for line in stderr_text.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    root = exc
    while root.__cause__ is not None:            # frontend errors wrap the real one
        root = root.__cause__
    lines = [ln.strip() for ln in str(root).splitlines() if ln.strip() and not ln.strip().startswith("^")]
    return lines[-1] if lines else type(root).__name__
