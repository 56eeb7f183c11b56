"""The PTX lens: compile a Gluon kernel for any NVIDIA target on a machine without a GPU.

Every kernel in the package registers a *spec* (signature, constexprs, options, targets and the
PTX instructions that carry its idea). The lens compiles a spec with ``triton.compile`` against
an explicit :class:`GPUTarget`, so the same kernel that runs on an H200 or a B200 can be read on a
laptop: its TTGIR, LLVM IR and PTX, an instruction census, and excerpts around the instructions
that matter.

MLIR diagnostics go to file descriptor 2 and the Python exception only says that a pass failed;
the lens captures fd 2 around the compile and raises :class:`LensCompileError` with the first
``error:`` line instead.
"""
from __future__ import annotations

import collections
import os
import re
import tempfile
from dataclasses import dataclass, field

import multicta_kernels  # noqa: F401  (sets TRITON_DEFAULT_FP_FUSION before triton loads)

from .hardware import OneLineError, check_cluster_size
from .isolation import TritonAborted, isolated

TARGETS = {"sm_90a": 90, "sm_100a": 100}


@dataclass(frozen=True)
class Dtype:
    gl: object          # the Gluon dtype
    short: str          # its name in a kernel signature
    bytes: int
    eps: float          # unit roundoff: half a unit in the last place, relative


def _dtypes():
    from triton.experimental.gluon import language as gl
    return {"float32": Dtype(gl.float32, "fp32", 4, 2.0 ** -24), "float16": Dtype(gl.float16, "fp16", 2, 2.0 ** -11),
            "bfloat16": Dtype(gl.bfloat16, "bf16", 2, 2.0 ** -8)}


DTYPES = _dtypes()      # the dtypes the book's kernels take, by torch's name


def dtype_name(dtype) -> str:
    """"float16" for ``torch.float16``, ``gl.float16``, "float16" or "fp16"."""
    for name, d in DTYPES.items():
        if dtype in (name, d.short) or dtype is d.gl or str(dtype) in (f"torch.{name}", name):
            return name
    return str(dtype).replace("torch.", "")


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


def compile(s: KernelSpec, target: str = "sm_90a") -> Compiled:
    """Compile a kernel spec for ``target`` on any machine (the book's kernels by name: ``catalog.compile``)."""
    if not isinstance(s, KernelSpec):
        raise TypeError(f"lens.compile takes a KernelSpec; compile the book's kernels by name with "
                        f"multicta_kernels.catalog.compile({s!r}, ...)")
    return _compile_spec(s, target)


def _compile_spec(s: KernelSpec, target: str) -> Compiled:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; the lens knows {sorted(TARGETS)}")
    if target not in s.targets:
        raise ValueError(f"{s.name} is written for {', '.join(s.targets)} only, not {target}")
    check_spec(s)
    try:
        return Compiled(s, target, *isolated(_compile_here, s, target))
    except TritonAborted as exc:
        raise LensCompileError(str(exc), s.name, target) from None


def check_spec(s: KernelSpec) -> None:
    """What Triton would abort on, refused with a ValueError first: the cluster size, and every
    ``cga_layout`` among the constexprs (log2(num_ctas) bases, each a power of two along one
    dimension: see :func:`multicta_kernels.layouts.check_cga_layout`)."""
    from .layouts import check_layout_for
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
    :func:`~multicta_kernels.isolation.isolated` fd 2 is already a file, which the parent reads if the
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
    """Count instructions: by opcode, or (with ``patterns``) lines containing each substring."""
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


def resources(ptx: str, target: str) -> dict:
    import subprocess

    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        run = subprocess.run([get_ptxas(TARGETS[target]).path, "-v", f"--gpu-name={target}", f.name, "-o", os.devnull],
                             capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"ptxas failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}")
    text = run.stderr

    def number(pattern):
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0
    return {"registers": number(r"Used (\d+) registers"), "spill_stores": number(r"(\d+) bytes spill stores"),
            "spill_loads": number(r"(\d+) bytes spill loads"),
            "stack": max(number(r"(\d+) bytes stack frame"), number(r"(\d+) bytes cumulative stack size"))}


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


def module_from_source(name: str, src: str, folder):
    """``src`` written to ``folder/name.py`` and imported as module ``name`` (registered in ``sys.modules``,
    where Gluon's aggregates resolve their annotations): ``@gluon.jit`` reads a function's source from its
    file, so an edited copy of a kernel needs one before it can compile."""
    import importlib.util
    import sys
    from pathlib import Path
    path = Path(folder) / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def with_kernel(spec: KernelSpec, fn, **constexprs) -> KernelSpec:
    """``spec`` with its kernel replaced by ``fn`` (a reader's edited copy) and ``constexprs`` changed: the
    same layouts and options, and only the arguments ``fn`` has (a copy may drop, say, an INSTRUMENT flag)."""
    from dataclasses import replace
    keep = fn.arg_names                                # a @gluon.jit function's arguments
    unknown = set(constexprs) - set(keep)
    if unknown:
        raise KeyError(f"{fn.__name__} has no argument {sorted(unknown)}; its arguments: {keep}")
    consts = {**spec.constexprs, **constexprs}
    return replace(spec, name=f"{spec.name} (your copy)", fn=fn,
                   signature={k: v for k, v in spec.signature.items() if k in keep},
                   constexprs={k: v for k, v in consts.items() if k in keep})


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
    tested = [m.group(1) for _, text in chain if (m := re.search(r"setp\.eq\.b32\s+%p\d+, (%r\d+), 0;", text))]
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


# ------------------------------------------------------------------ SASS, from Triton's own ptxas

def sass(ptx: str, target: str = "sm_90a") -> list[str]:
    """The SASS that Triton's bundled ``ptxas`` makes of this PTX, read with its ``cuobjdump`` (no GPU
    needed): [instruction text], predicates included. Raises OSError or CalledProcessError where the
    installation has no ptxas or cuobjdump."""
    import subprocess

    from triton import knobs
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([get_ptxas(TARGETS[target]).path, f"--gpu-name={target}", src, "-o", cubin],
                       check=True, capture_output=True)
        dump = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", cubin], check=True, capture_output=True, text=True)
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", dump.stdout)]


def sass_census(ptx: str, target: str = "sm_90a") -> collections.Counter:
    """SASS opcodes (with their modifiers, e.g. ``MEMBAR.ALL.GPU``) and how often each occurs in the kernel."""
    return collections.Counter(t.split()[1] if t.startswith("@") else t.split()[0] for t in sass(ptx, target))
