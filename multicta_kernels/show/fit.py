"""Fit Python source to the book's code column (WIDTH = 87 characters: what the rendered book shows at 1440 px
without a scroll bar; tools/browser_check.py measures it) without changing what the code does: trailing comments
that make a line too long move above it, long comments and docstring lines are wrapped, long one-line strings are
cut at spaces into implicitly concatenated pieces, and long lines are broken after a comma inside brackets (the
continuation aligned after the bracket). ``notebook.source`` renders the package's functions through ``fit``;
``tools/format_notebooks.py`` applies it (after ``black``) to the notebooks' cells."""
from __future__ import annotations

import io
import re
import textwrap
import tokenize

WIDTH = 87


def long_lines(src: str, width: int = WIDTH) -> list[str]:
    return [ln for ln in src.split("\n") if len(ln) > width]


def _comment_lines(comment: str, indent: str, width: int) -> list[str]:
    """A comment (``# ...``) as lines of at most ``width`` characters at ``indent``."""
    body = comment.lstrip("#").strip()
    room = max(width - len(indent) - 2, 20)
    return [f"{indent}# {part}" for part in textwrap.wrap(body, room, break_long_words=False,
                                                          break_on_hyphens=False)] or [f"{indent}#"]


def fit_comments(src: str, width: int = WIDTH) -> str:
    """Move each trailing comment of a line over ``width`` onto its own line(s) above that line, at the line's
    indentation, and wrap standalone comments longer than ``width``. Code is not changed (comments found with
    ``tokenize``, so a ``#`` inside a string is not one)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src
    comments = {}                                             # line number (1-based) -> (column, text)
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string)
    lines = src.split("\n")
    out = []
    for no, line in enumerate(lines, start=1):
        if len(line) <= width or no not in comments:
            out.append(line)
            continue
        col, text = comments[no]
        code = line[:col].rstrip()
        indent = line[: len(line) - len(line.lstrip())]
        if code.strip() and len(code) + 2 + len(text) <= width:   # fits with the comment two spaces after it
            out.append(f"{code}  {text}")
            continue
        if not code.strip():                                  # a comment line of its own
            text = re.sub(r"([=*#~-])\1{5,}", lambda m: m.group(1) * 5, text)   # a banner's rules shorter
            out.extend(_comment_lines(text, indent, width))
        else:                                                 # above the line (above a `\\` chain's first)
            at = len(out)
            while at and out[at - 1].rstrip().endswith("\\"):
                at -= 1
            if at < len(out):
                indent = out[at][: len(out[at]) - len(out[at].lstrip())]
            out[at:at] = _comment_lines(text, indent, width)
            out.append(code)
    return "\n".join(out)


def _split_points(body: str, fstring: bool) -> list[int]:
    """Where a string's body may be cut: after a space that is outside an f-string's replacement fields."""
    points, depth, i = [], 0, 0
    while i < len(body):
        ch = body[i]
        if fstring and body.startswith(("{{", "}}"), i) and depth == 0:
            i += 2
            continue
        if fstring and ch == "{":
            depth += 1
        elif fstring and ch == "}":
            depth -= 1
        elif ch == "\\":
            i += 2
            continue
        elif ch == " " and depth == 0 and i + 1 < len(body):
            points.append(i + 1)
        i += 1
    return points


def _split_string(token: str, room: int) -> list[str] | None:
    """A one-line string literal as pieces (implicitly concatenated) of at most ``room`` characters."""
    prefix = token[: len(token) - len(token.lstrip("rRbBfFuU"))]
    q = token[len(prefix)]
    if token[len(prefix):].startswith((q * 3)):
        return None
    body = token[len(prefix) + 1 : -1]
    points = _split_points(body, "f" in prefix.lower())
    pieces, start = [], 0
    limit = room - len(prefix) - 2
    while len(body) - start > limit:
        cut = [p for p in points if start < p <= start + limit]
        if not cut:
            return None
        pieces.append(body[start : cut[-1]])
        start = cut[-1]
    pieces.append(body[start:])
    return [f"{prefix}{q}{piece}{q}" for piece in pieces]


def fit_strings(src: str, width: int = WIDTH) -> str:
    """Cut each one-line string literal on a line over ``width`` into implicitly concatenated pieces at spaces
    (in parentheses where it is not inside brackets already): the value is the same."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src
    lines = src.split("\n")
    depth, edits = 0, []
    for tok in tokens:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif (tok.type == tokenize.STRING and tok.start[0] == tok.end[0]
              and len(lines[tok.start[0] - 1]) > width):
            pieces = _split_string(tok.string, max(width - tok.start[1] - 4, 30))
            if pieces and len(pieces) > 1:
                edits.append((tok.start, tok.end, pieces, depth))
    for (row, col), (_, end), pieces, d in reversed(edits):
        line = lines[row - 1]
        pad = " " * (col + (0 if d else 1))
        text = ("\n" + pad).join(pieces)
        if not d:
            text = "(" + text + ")"
        lines[row - 1] = line[:col] + text + line[end:]
    return "\n".join(lines)


def fit_docstrings(src: str, width: int = WIDTH) -> str:
    """Wrap the lines over ``width`` of the docstrings of the functions and classes a cell defines."""
    import ast
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.split("\n")
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                spans.append((first.lineno, first.end_lineno))
    for lo, hi in sorted(spans, reverse=True):
        block = lines[lo - 1 : hi]
        if not long_lines("\n".join(block), width):
            continue
        out, para = [], []

        def flush():
            if para and long_lines("\n".join(para), width):
                indent = para[0][: len(para[0]) - len(para[0].lstrip())]
                text = " ".join(ln.strip() for ln in para)
                out.extend(textwrap.wrap(text, width, initial_indent=indent,
                                         subsequent_indent=indent, break_long_words=False,
                                         break_on_hyphens=False))
            else:
                out.extend(para)
            para.clear()
        for line in block:
            if line.strip() in ("", '"""', "'''"):
                flush()
                out.append(line)
            else:
                para.append(line)
        flush()
        lines[lo - 1 : hi] = out
    return "\n".join(lines)


def fit_code(src: str, width: int = WIDTH) -> str:
    """Break each line over ``width`` after the last comma inside brackets that keeps it within ``width``; the
    rest of the line continues under the bracket's first character (implicit continuation: the same code)."""
    for _ in range(200):
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return src
        lines = src.split("\n")
        stack, best = [], {}
        for tok in tokens:
            row, col = tok.start
            if tok.type == tokenize.OP and tok.string in "([{":
                stack.append(tok.end)
            elif tok.type == tokenize.OP and tok.string in ")]}":
                stack and stack.pop()
            elif (tok.type == tokenize.OP and tok.string == "," and stack and len(lines[row - 1]) > width
                  and tok.end[1] <= width):
                line = lines[row - 1]
                rest = line[tok.end[1]:].strip()
                under = stack[-1][1] if stack[-1][0] == row else len(line) - len(line.lstrip())
                if under + len(rest) > width:
                    under = len(line) - len(line.lstrip()) + 4
                if rest and not rest.startswith("#") and tok.end[1] > under + 1:
                    best[row] = (tok.end[1], under)
        if not best:
            return src
        row = min(best)
        cut, under = best[row]
        line = lines[row - 1]
        lines[row - 1: row] = [line[:cut].rstrip(), " " * under + line[cut:].lstrip()]
        src = "\n".join(lines)
    return src


def fit(src: str, width: int = WIDTH) -> str:
    """``src`` with as few lines over ``width`` as these rewrites can manage; the code is the same."""
    if not long_lines(src, width):
        return src
    return fit_code(fit_strings(fit_docstrings(fit_comments(src, width), width), width), width)
