"""What every chapter's notebook needs: a tier banner, source rendering, tables and glue."""
from __future__ import annotations

import html
import inspect
import textwrap

from . import hardware


def banner() -> hardware.Tier:
    """Print which tier this notebook runs on and what that means; return the tier."""
    t = hardware.tier()
    what = {hardware.BLACKWELL: "every kernel runs live",
            hardware.HOPPER: "Hopper kernels run live; Blackwell-only kernels are compiled and read through the lens",
            hardware.CPU: "kernels are compiled for sm_90a / sm_100a and read through the lens; "
                          "benchmarks come from results/ recorded on real GPUs"}[t.name]
    print(f"Running on {t}: {what}.")
    return t


def source(obj, start: str | None = None, stop: str | None = None):
    """Render the source of a function, kernel or class from the package, highlighted.

    ``start`` / ``stop`` cut it to the lines from the first containing ``start`` up to (not
    including) the first containing ``stop``.
    """
    from IPython.display import Code
    fn = getattr(obj, "fn", obj)           # a @gluon.jit kernel wraps the Python function
    text = textwrap.dedent(inspect.getsource(fn))
    lines = text.splitlines()
    if start:
        lines = lines[next(i for i, ln in enumerate(lines) if start in ln):]
    if stop:
        lines = lines[:next((i for i, ln in enumerate(lines) if stop in ln and i > 0), len(lines))]
    return Code("\n".join(lines), language="python")


def ptx(text: str):
    from IPython.display import Code
    return Code(text, language="text")


def table(rows, header, floatfmt="{:.2f}"):
    """A small HTML table (renders in Jupyter and in the built book)."""
    from IPython.display import HTML

    def cell(v):
        return floatfmt.format(v) if isinstance(v, float) else html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return HTML(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


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
