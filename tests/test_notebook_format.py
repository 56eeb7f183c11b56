"""The notebooks' code fits the rendered book's code column, and every assert in them says what failed.

At 1440 px the book's code column holds 87 characters (tools/browser_check.py measures it); a longer line
scrolls, and its end (often the comment that explains it) is out of view. ``python tools/format_notebooks.py
--fix`` reformats the cells that do not fit; ``python tools/assert_messages.py --fix`` gives bare asserts a
message."""
import ast
import json
import pathlib

import pytest

from multicta_kernels.show import notebook
from multicta_kernels.show.fit import WIDTH, fit

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def code_cells(path):
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            yield cell.get("id"), "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_code_line_is_wider_than_the_column(path):
    wide = [(cid, len(ln), ln.strip()[:60]) for cid, src in code_cells(path) for ln in src.split("\n")
            if len(ln) > WIDTH]
    assert wide == [], f"{path.name}: lines over {WIDTH} characters (tools/format_notebooks.py --fix): {wide}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_assert_has_a_message(path):
    bare = [(cid, node.lineno, ast.unparse(node.test)[:60]) for cid, src in code_cells(path)
            for node in ast.walk(ast.parse(src)) if isinstance(node, ast.Assert) and node.msg is None]
    assert bare == [], f"{path.name}: asserts without a message (tools/assert_messages.py --fix): {bare}"


def test_shown_package_source_fits_and_is_the_same_code():
    """notebook.source renders a package function fitted to the column: every line fits, and it parses to the
    same code (comments moved, strings cut, argument lists broken)."""
    from multicta_kernels import clc_matmul as cm, softmax
    for fn in (cm.clc_matmul_kernel, cm.load_partition, softmax.softmax_kernel):
        shown = notebook.source(fn).data
        assert max(len(ln) for ln in shown.splitlines()) <= WIDTH, fn
        import inspect
        import textwrap
        original = textwrap.dedent(inspect.getsource(fn.fn))
        assert ast.dump(ast.parse(shown)) == ast.dump(ast.parse(original)), fn


def test_fit_breaks_long_lines_without_changing_the_code():
    src = ("def f(alpha_parameter, beta_parameter, gamma_parameter, delta_parameter, epsilon_parameter, zeta):\n"
           "    x = alpha_parameter + beta_parameter  # a trailing comment that does not fit on the line at all\n"
           "    return g('a long string literal that goes on and on past the column of the rendered book', x)\n")
    out = fit(src)
    assert max(len(ln) for ln in out.splitlines()) <= WIDTH, out
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(src))
    assert "# a trailing comment" in out
