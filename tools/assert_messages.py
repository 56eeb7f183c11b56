#!/usr/bin/env python3
"""Give every bare ``assert`` in the notebooks' code cells a message that says what failed.

    python tools/assert_messages.py            # list the bare asserts; exit 1 if any
    python tools/assert_messages.py --fix      # add the messages, in place

The message is the assert's trailing comment when it has one (the comment then goes: it *is* the message; an
exercise tag such as ``# ex-ch1-owners`` stays a comment), else ``expected <the condition>``; a single comparison
(``==``, ``<``, ``is`` ...) of something that is not a literal adds what it got (``got {left!r:.200}``: evaluated
only when the assert fails). Each changed cell is checked to compile to the same code, messages aside.
``tests/test_notebook_format.py`` fails on a bare assert.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = re.compile(r"^ex-ch\w*-[\w-]+")
GOT_OPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot)


def bare_asserts(tree) -> list[ast.Assert]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Assert) and n.msg is None]


def _pieces(text: str, size: int = 56) -> list[str]:
    """``text`` cut at spaces into pieces of about ``size`` characters (each keeps its trailing space)."""
    out, cur = [], ""
    for word in re.split(r"(?<= )", text):
        if cur and len(cur) + len(word) > size:
            out.append(cur)
            cur = ""
        cur += word
    return out + ([cur] if cur else [])


def _literal(text: str, fstring: bool) -> str:
    if fstring:
        text = text.replace("{", "{{").replace("}", "}}")
    r = repr(text)
    if r.startswith("'") and '"' not in text:
        r = '"' + r[1:-1].replace("\\'", "'") + '"'
    return ("f" if fstring else "") + r


def _src(src: str, node: ast.expr) -> str:
    return " ".join(ast.get_source_segment(src, node).split())


def message(src: str, test: ast.expr, comment: str | None) -> str:
    """The source of the message expression for an assert of ``test`` (in the cell ``src``)."""
    text = comment if comment else "expected " + _src(src, test)
    got = None
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], GOT_OPS)
            and not isinstance(test.left, ast.Constant)):
        expr = _src(src, test.left)
        if "\\" not in expr and '"' not in expr and "{" not in expr and "}" not in expr:
            got = expr
    parts = _pieces(text)
    lits = [_literal(p, fstring=False) for p in parts]
    if got:
        lits.append('f"' + (", got " if text else "got ") + "{" + got + '!r:.200}"')
    src = " ".join(lits)
    return f"({src})" if len(lits) > 1 else src


def _comments(src: str) -> dict:
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = (tok.start[1], tok.string)
    return out


def _strip_msgs(tree):
    for n in ast.walk(tree):
        if isinstance(n, ast.Assert):
            n.msg = None
    return ast.dump(tree)


def fix_cell(src: str) -> tuple[str, int]:
    tree = ast.parse(src)
    nodes = bare_asserts(tree)
    if not nodes:
        return src, 0
    comments = _comments(src)
    lines = src.split("\n")
    for node in sorted(nodes, key=lambda n: (n.test.end_lineno, n.test.end_col_offset), reverse=True):
        no = node.test.end_lineno
        line = lines[no - 1]
        end = len(line.encode()[: node.test.end_col_offset].decode())
        comment = None
        tail = line[end:]
        if no in comments and comments[no][0] >= end:
            col, text = comments[no]
            body = text.lstrip("#").strip()
            if TAG.match(body):
                rest = body[TAG.match(body).end():].lstrip(" :;,-")
                comment = rest or None
                tail = line[end:col] + ("# " + TAG.match(body).group(0))
            else:
                comment = body or None
                tail = line[end:col].rstrip()
        # a closing paren of `assert (...)` sits after the test: keep what is between the test and the comment
        between = tail.rstrip()
        keep_comment = ""
        if "#" in between:
            between, keep_comment = between.split("#", 1)
            keep_comment = "  #" + keep_comment
        lines[no - 1] = line[:end] + between.rstrip() + ", " + message(src, node.test, comment) + keep_comment
    new = "\n".join(lines)
    if _strip_msgs(ast.parse(new)) != _strip_msgs(ast.parse(src)):
        raise RuntimeError("adding messages changed the code:\n" + src)
    return new, len(nodes)


def _split_source(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--fix", action="store_true")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.paths] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    total = 0
    for path in paths:
        nb = json.loads(path.read_text())
        changed = False
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            if args.fix:
                new, n = fix_cell(src)
                if n:
                    cell["source"] = _split_source(new)
                    changed = True
                    print(f"{path.name} cell {cell.get('id')}: {n} message(s)")
            else:
                for node in bare_asserts(ast.parse(src)):
                    total += 1
                    print(f"{path.name} cell {cell.get('id')} line {node.lineno}: {ast.unparse(node)[:80]}")
        if changed:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    if not args.fix:
        print(f"{total} bare assert(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
