"""What every chapter's notebook needs: the hardware banner, live runs with a time limit, source
rendering, tables and glue."""
from __future__ import annotations

import html
import inspect
import textwrap
import time

from ..core import hardware


def banner(*features: hardware.Feature) -> hardware.Device:
    """Print the GPU this notebook runs on and, for each feature the chapter uses, whether its cells
    run live here or show the lens and recorded results; return the device. Kernels that have never
    run on the hardware they need say so (generated from results/, see ``results.label``)."""
    from ..results.labels import label
    dev = hardware.device()
    print(f"Running on {dev}.")
    for f in features or (hardware.CLUSTERS,):
        if dev.has(f):
            print(f"  {f.name:<9} live here   ({f.what})")
        else:
            print(f"  {f.name:<9} lens only   ({f.what}: needs {f.runs_on}); {label(f)}")
    if dev.capability is not None:
        print("  First time on this node? `python -m multicta_kernels.cli.doctor` checks every live kernel.")
    return dev


class KernelTimeout(hardware.OneLineError, RuntimeError):
    """A live kernel did not finish within its time limit."""


def run_live(name: str, launch, timeout: float = 60.0):
    """Call ``launch()`` (which compiles and launches, without waiting for the GPU), then wait for the
    GPU at most ``timeout`` seconds. A kernel that hangs ends the cell with a message naming it
    instead of freezing the notebook. Returns what ``launch()`` returned."""
    import torch
    result = launch()
    done = torch.cuda.Event()
    done.record()
    deadline = time.monotonic() + timeout
    while not done.query():
        if time.monotonic() > deadline:
            raise KernelTimeout(
                f"{name} did not finish within {timeout:.0f} s: it is hung on the GPU, and a cluster kernel "
                "cannot be stopped from inside this process. Restart the notebook's kernel (Kernel > Restart), "
                "then run `python -m multicta_kernels.cli.doctor` in a terminal to see which kernels work here.")
        time.sleep(0.002)
    return result


def source(obj, start: str | None = None, stop: str | None = None):
    """Render the source of a function, kernel or class from the package, highlighted.

    ``start`` / ``stop`` cut it to the lines from the first containing ``start`` up to (not
    including) the first containing ``stop``. Lines longer than the book's code column are fitted to it
    (``show.fit``: comments moved above, strings and argument lists broken; the code is the same).
    """
    from IPython.display import Code

    from .fit import fit
    fn = getattr(obj, "fn", obj)           # a @gluon.jit kernel wraps the Python function
    text = textwrap.dedent(inspect.getsource(fn))
    lines = text.splitlines()
    if start:
        lines = lines[next(i for i, ln in enumerate(lines) if start in ln):]
    if stop:
        lines = lines[:next((i for i, ln in enumerate(lines) if stop in ln and i > 0), len(lines))]
    return Code(fit("\n".join(lines)), language="python")


def ptx(text: str):
    from IPython.display import Code
    return Code(text, language="text")


# Padded cells (so "32768" and "3000" in neighbouring columns read as two numbers) and a first column that wraps
# (a long PTX opcode does not push the counts out of view): in the notebook (the <style> travels with the table)
# and in the book (_static/multicta.css says the same).
TABLE_STYLE = ("<style>table.mk-table td, table.mk-table th {padding: 0.15em 0.75em}"
               " table.mk-table td:first-child {overflow-wrap: anywhere; max-width: 28em}</style>")


def table(rows, header, floatfmt="{:.2f}", missing="not measured"):
    """A small HTML table (renders in Jupyter and in the built book). A float that is NaN shows as ``missing``; a
    dict (a shape, a set of options) as ``k = v, ...``."""
    import math
    from IPython.display import HTML

    def cell(v):
        if isinstance(v, float):
            return html.escape(missing) if math.isnan(v) else floatfmt.format(v)
        if isinstance(v, dict):
            return html.escape(", ".join(f"{k} = {x}" for k, x in v.items()))
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return HTML(f'{TABLE_STYLE}<table class="mk-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def glue(name: str, value, display: bool = False):
    """``myst_nb.glue`` where it is installed (the book build); otherwise just return the value."""
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return value
    _glue(name, value, display=display)
    return value


def diff(old, new, context: int = 3):
    """The unified diff of two functions' sources (e.g. a 1-CTA kernel and its 2-CTA twin)."""
    import difflib
    from IPython.display import Code
    a = textwrap.dedent(inspect.getsource(getattr(old, "fn", old))).splitlines()
    b = textwrap.dedent(inspect.getsource(getattr(new, "fn", new))).splitlines()
    lines = difflib.unified_diff(a, b, fromfile=getattr(old, "__name__", "old"), tofile=getattr(new, "__name__", "new"),
                                 n=context, lineterm="")
    return Code("\n".join(lines), language="diff")


def changed_code_lines(old, new) -> list[tuple[str, str]]:
    """The code lines that differ between two functions (e.g. a 1-CTA kernel and its 2-CTA twin), as
    (old line, new line) pairs ("" where a line has no counterpart): the body only, without the decorator,
    the def line, comments and blank lines, so a renamed kernel or an edited comment is no change."""
    import ast
    import difflib
    import itertools

    def code(fn):
        text = textwrap.dedent(inspect.getsource(getattr(fn, "fn", fn)))
        first = ast.parse(text).body[0].body[0].lineno          # the body's first line, after the signature
        lines = text.splitlines()[first - 1:]
        return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]
    a, b = code(old), code(new)
    return [(x, y) for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
            if tag != "equal" for x, y in itertools.zip_longest(a[i1:i2], b[j1:j2], fillvalue="")]


def census_diff(before, after, patterns=None, names=("package", "yours")):
    """A table of what a change to a kernel did to its PTX: the instructions whose counts differ between two
    compiled kernels (``lens.Compiled``), an ``mbarrier.init`` also by its count and an ``expect_tx`` by its
    bytes (``lens.census_changes``), and the shared memory if it changed. ``patterns`` restricts it to lines
    containing those strings (then without the operand split)."""
    from .. import lens
    if patterns is None:
        rows = lens.census_changes(before.ptx, after.ptx)
    else:
        a, b = before.census(patterns), after.census(patterns)
        rows = [[op, a.get(op, 0), b.get(op, 0), b.get(op, 0) - a.get(op, 0)]
                for op in sorted(set(a) | set(b)) if a.get(op, 0) != b.get(op, 0)]
    if before.shared_bytes != after.shared_bytes:
        rows.append(["(shared memory, bytes)", before.shared_bytes, after.shared_bytes,
                     after.shared_bytes - before.shared_bytes])
    if not rows:
        return table([["(no instruction count changed)", "", "", ""]], ["instruction", *names, "difference"])
    return table(rows, ["instruction", *names, "difference"])


def refusals(cases: dict, errors=(ValueError, TypeError)) -> list:
    """Call each of ``cases`` (name -> a call that must be refused) and print one line per refusal, ``name: Error:
    message``, the names right-aligned; return [(name, error)]. A call that is accepted, or fails with an error
    that is not one of ``errors`` (by default a caller's mistake: ValueError or TypeError), stops the cell."""
    width = max((len(n) for n in cases), default=0)
    out = []
    for name, call in cases.items():
        try:
            call()
        except errors as err:
            print(f"{name:>{width}}: {type(err).__name__}: {err}")
            out.append((name, err))
        else:
            raise AssertionError(f"{name} was accepted")
    return out


def cpu_survivors(chapter: str, record: str = "mutation_cpu.json", gpu_record: str = "h200/mutation_gpu.json"):
    """The mutants of one chapter's kernels that no CPU check killed, from the recorded mutation run
    (``results/mutation_cpu.json``, ``python -m multicta_kernels.cli.mutate``), each with why a CPU misses it and
    what the GPU tests made of it on the H200 (``results/h200/mutation_gpu.json``, the same harness with
    ``--gpu``), after one line of counts: compiled, killed on the CPU, equivalent (``lens.same_schedule``).
    ``chapter``: the chapter module's name ("barriers", "multicast", ...); a shared helper's survivors are listed in
    every chapter whose kernels call it."""
    from IPython.display import HTML

    from .. import catalog
    from ..results import store
    modules = {}
    for name in catalog.registered():
        fn = catalog.spec(name).fn
        modules[name] = getattr(getattr(fn, "fn", fn), "__module__", "").rsplit(".", 1)[-1]
    chapters = sorted(set(modules.values()))
    if chapter not in chapters:
        raise ValueError(f"chapter {chapter!r}: the chapter modules with kernels are {', '.join(chapters)}")
    try:
        on_gpu = {(r["unit"], r["operator"], r["site"]): r for r in store.records(store.load(gpu_record))}
    except FileNotFoundError:
        on_gpu = {}
    rows, count = [], {"compiled": 0, "killed": 0, "equivalent": 0}
    for r in store.records(store.load(record)):
        unit_module = r["unit"].split(".")[1]
        mine = unit_module == chapter if unit_module in chapters else any(
            modules.get(k) == chapter for k in r["kernels"].split(","))
        if not mine or r["verdict"] == "not compiled":
            continue
        count["compiled"] += 1
        count[r["verdict"]] = count.get(r["verdict"], 0) + 1
        if r["verdict"] == "survived":
            site = r["site"] if len(r["site"]) <= 70 else r["site"][:67] + "..."
            g = on_gpu.get((r["unit"], r["operator"], r["site"]))
            ran = g is not None and (g["killer"] == "gpu tests" or g["verdict"] == "survived" and g["detail"])
            seen = "not rerun" if not ran else "killed" if g["killer"] == "gpu tests" else \
                "not run (needs tcgen05)" if g["detail"].startswith("not run") else "passed them"
            rows.append((r["unit"].rsplit(".", 1)[1], r["operator"], site, r["why_cpu_missed"], seen))
    name = html.escape(chapter)
    head = (f"<p>{count['compiled']} compiled mutants of the kernels of {name}.py: {count['killed']} killed on a CPU, "
            f"{count['equivalent']} equivalent (the kernel's PTX, up to independent instructions in another order, "
            f"registers numbered otherwise, or fences more), "
            f"{len(rows)} left for the GPU tests.</p>")
    if not count["compiled"]:
        return HTML(f"<p>The mutation operators find nothing to break in the kernels of {name}.py (no barrier operations).</p>")
    if not rows:
        return HTML(head)
    return HTML(head + table(rows, ("function", "operator", "mutation", "why no CPU check sees it",
                                    "GPU tests, H200")).data)
