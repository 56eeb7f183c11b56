"""Helpers the teaching tests share: the chapters' notebook cells, modules written from source (so that
``gluon.jit``, which reads a function's source from its file, can compile an edited kernel), and the counts
of a PTX's ``mbarrier.init``.

pytest puts this folder on ``sys.path`` (tests/ has a conftest.py and no ``__init__.py``: rootdir-based
"prepend" imports), so a test file imports it as ``from nbcells import ...``, as it does random_layouts.
"""
import collections
import inspect
import json
import textwrap
from pathlib import Path

from multicta_kernels import lens

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def chapter_cells(notebook):
    """(source, cell) for every cell of ``notebook``: a path, or a file name in notebooks/."""
    path = notebook if isinstance(notebook, Path) else NOTEBOOKS / notebook
    return [("".join(c["source"]), c) for c in json.loads(path.read_text())["cells"]]


def code_cell_with(notebook, needle):
    """The source of the first code cell of ``notebook`` that contains ``needle``."""
    found = [src for src, c in chapter_cells(notebook) if c["cell_type"] == "code" and needle in src]
    assert found, f"no code cell of {notebook} contains {needle!r}"
    return found[0]


def variant(tmp_path, name, *kernels, edits=None, drop=None):
    """The source of package ``kernels`` with ``edits`` (old -> new, each applying exactly once) and without
    the lines whose code is ``drop``, in a new module that star-imports the kernels' own module. One kernel:
    ``lens.variant``; several (a kernel and the helpers it calls, edited together) are written side by side."""
    if len(kernels) == 1:
        fn = lens.variant(kernels[0], edits=edits, drop=drop, name=name, folder=tmp_path)
        return inspect.getmodule(fn.fn)
    module = inspect.getmodule(kernels[0].fn)
    parts = [f"from {module.__name__} import *", "from triton.experimental import gluon"]
    src = "\n\n\n".join(parts + [textwrap.dedent(inspect.getsource(k.fn)) for k in kernels])
    for old, new in (edits or {}).items():
        assert src.count(old) == 1, f"edit {old!r} applies {src.count(old)} times"
        src = src.replace(old, new)
    if drop:
        lines = src.splitlines()
        src = "\n".join(ln for ln in lines if ln.split("#")[0].strip() != drop)
        assert len(src.splitlines()) < len(lines), f"no line {drop!r}"
    return lens.module_from_source(name, src, tmp_path)


def init_counts(ptx):
    """How many ``mbarrier.init`` of ``ptx`` have each count: {count: inits}."""
    return collections.Counter(lens.mbarrier_init_counts(ptx))
