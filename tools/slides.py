#!/usr/bin/env python3
"""Reveal.js slides from the book's notebooks, without a single slide tag in them, that work offline.

    python tools/slides.py                      # every notebook -> _build/slides/NAME.slides.html
    python tools/slides.py notebooks/02-mbarriers.ipynb --out /tmp/slides

(``make slides`` runs the first form.) The notebooks stay as they are: at build time each cell gets a
``slideshow.slide_type`` from the notebook's structure, and nbconvert's ``SlidesExporter`` writes
one HTML file per notebook (figures embedded), plus ``index.html`` linking them. The decks load
reveal.js and its notes plugin from ``reveal.js/`` beside them (a pinned release, fetched once and
checked by ``tools/vendor_reveal.py``) and nothing from a network: the folder can be copied to a
laptop in a room without internet and opened from disk.

The rules:

- a markdown cell that starts with ``#`` or ``##`` starts a new slide, ``###`` a sub-slide (a slide
  below it, reached with the down arrow);
- the slide shows a markdown cell's headings, its first paragraph, its lists, tables, code and
  exercises; its further paragraphs become the slide's speaker notes (press ``s``), so the teacher has
  the book's prose and the room sees the point (``--all-prose`` keeps everything on the slides);
- an exercise starts a sub-slide; its solution becomes speaker notes;
- when a (sub-)slide would overflow (about 20 lines of text, code and output, ``BUDGET``; a figure counts as
  14), the next cell starts a sub-slide, so nothing runs off the bottom; a single long cell
  scrolls;
- tags: ``remove-cell`` (and ``skip-slide``) drop the cell, ``hide-input`` / ``remove-input``
  drop its source and keep its output (a cell left with nothing to show is dropped), ``remove-output`` /
  ``hide-output`` drop the output;
- MyST markup that reveal.js does not know is turned into plain Markdown: ``{glue:text}`x``` into
  its value, other roles into their text, ``{literalinclude}`` into the code it names, directive
  fences (exercise, solution, note) into a bold heading.

Cells are dropped before nbconvert assigns the ``<section>`` tags: a dropped cell can carry the tag
that closes a slide (dropping the Colab cell after nbconvert had placed them left every later slide
nested a level deeper than reveal.js shows). ``deck_problems`` reads a built deck's nesting and
names every slide reveal.js cannot show; ``tools/browser_check.py --slides`` steps through the decks
in Chromium.

Outputs: where ``make book`` has run, the executed copy of a notebook
(``_build/jupyter_execute/notebooks/NAME.ipynb``) is used when it is at least as new as the source,
so the slides show the book's figures and tables; otherwise the slides show the code only
(``--source`` forces that). Nothing is executed here, so this needs no GPU and takes seconds.
"""
from __future__ import annotations

import argparse
import copy
import html
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vendor_reveal  # noqa: E402

EXECUTED = ROOT / "_build" / "jupyter_execute" / "notebooks"
TEMPLATES = Path(__file__).resolve().parent / "slides_template"     # offline-reveal: nbconvert's, no CDN
REMOVE_CELL = {"remove-cell", "skip-slide"}
REMOVE_INPUT = {"hide-input", "remove-input"}
REMOVE_OUTPUT = {"remove-output", "hide-output"}

BUDGET = 20              # lines that fit on one slide at the exporter's default size
FIGURE_LINES = 14
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Smaller code and outputs than reveal's default, so a kernel's source fits; figures scale to the slide.
STYLE = """<style>
.reveal .jp-Cell pre, .reveal .highlight pre, .reveal .jp-OutputArea pre { font-size: 14px !important; line-height: 1.3 !important; }
.reveal .jp-OutputArea img { max-height: 560px; width: auto; }
.reveal table { font-size: 16px; }
.reveal h1, .reveal h2, .reveal h3, .reveal h4 { text-transform: none; }
</style>
"""

_HEADING = re.compile(r"^(#{1,6})\s")
_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|:{3,})\{([\w:-]+)\}\s*(.*)$")
_OPTION = re.compile(r"^\s*:[\w-]+:.*$")
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")


# ------------------------------------------------------------------------------ deck structure

MEDIA_TAGS = {"img", "svg", "table", "canvas", "video", "iframe"}


@dataclass
class Slide:
    """One ``<section>`` of a deck: where it sits and what it shows outside its speaker notes."""
    path: tuple              # (h,) for a top-level section, (h, v) for a sub-slide, deeper when nested more
    text: str = ""           # visible text (outside <aside class="notes">, <script> and <style>)
    media: int = 0           # images, figures, tables
    notes: str = ""          # speaker-notes text
    children: int = 0        # sections directly inside it

    @property
    def depth(self) -> int:
        return len(self.path)

    @property
    def blank(self) -> bool:
        return not self.text.strip() and not self.media


def deck_structure(page: str) -> list:
    """Every ``<section>`` inside the deck's ``div.slides``, in document order (a static parse: what
    reveal.js would make of the nesting; ``deck_problems`` says what it cannot show)."""
    from html.parser import HTMLParser

    class Parser(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.sections, self.open, self.counts = [], [], [0]
            self.divs = 0                      # <div> nesting
            self.slides_div = None             # the nesting of div.slides while inside it
            self.done = False                  # past div.slides
            self.hidden, self.hidden_depth = None, 0     # inside notes, a script or a style

        def inside(self):
            return self.slides_div is not None and not self.done

        def handle_starttag(self, tag, attrs):
            classes = (dict(attrs).get("class") or "").split()
            if tag == "div":
                self.divs += 1
                if self.slides_div is None and not self.done and "slides" in classes:
                    self.slides_div = self.divs
            if not self.inside():
                return
            if self.hidden is not None:
                self.hidden_depth += tag == self.hidden
            elif tag in ("script", "style") or tag == "aside" and "notes" in classes:
                self.hidden, self.hidden_depth = tag, 1
            elif tag == "section":
                self.counts[-1] += 1
                if self.open:
                    self.open[-1].children += 1
                s = Slide(tuple(c - 1 for c in self.counts))
                self.sections.append(s)
                self.open.append(s)
                self.counts.append(0)
            elif tag in MEDIA_TAGS and self.open:
                self.open[-1].media += 1

        def handle_startendtag(self, tag, attrs):
            if self.inside() and self.hidden is None and tag in MEDIA_TAGS and self.open:
                self.open[-1].media += 1

        def handle_endtag(self, tag):
            if self.inside() and self.hidden is not None:
                if tag == self.hidden:
                    self.hidden_depth -= 1
                    if not self.hidden_depth:
                        self.hidden = None
            elif self.inside() and tag == "section" and self.open:
                self.open.pop()
                self.counts.pop()
            if tag == "div":
                if self.slides_div == self.divs and not self.done:
                    self.done = True
                self.divs -= 1

        def handle_data(self, data):
            if not self.inside() or not self.open:
                return
            if self.hidden == "aside":
                self.open[-1].notes += data
            elif self.hidden is None:
                self.open[-1].text += data

    p = Parser()
    p.feed(page)
    p.close()
    return p.sections


def deck_problems(page: str) -> list:
    """What reveal.js cannot show in a deck: sections nested below the second level (no key reaches
    them), blank slides (no visible text, image or table), text in a stack of sub-slides outside them."""
    problems = []
    for s in deck_structure(page):
        where = "slide " + ".".join(str(i + 1) for i in s.path)
        if s.depth > 2:
            problems.append(f"{where}: nested {s.depth} levels deep (reveal.js shows two): unreachable")
        elif s.depth == 1 and s.children and s.text.strip():
            problems.append(f"{where}: text outside its sub-slides: {' '.join(s.text.split())[:60]!r}")
        elif (s.depth == 2 or not s.children) and s.blank:
            problems.append(f"{where}: blank (no visible text, image or table)")
    return problems


def visible_slides(page: str) -> list:
    """The slides reveal.js shows, in order: top-level sections without sub-slides, and the sub-slides."""
    return [s for s in deck_structure(page) if s.depth == 2 or s.depth == 1 and not s.children]


# ----------------------------------------------------------------------------------- markdown

_INCLUDE = re.compile(r"^([ \t]*)(`{3,}|:{3,})\{(literalinclude|glue)\}[ \t]*(.*)\n((?:[ \t]*:[\w-]+:.*\n)*)[ \t]*\2[ \t]*$",
                      re.M)


def _pyobject(source: str, name: str) -> str | None:
    """The source of a top-level function or class (``Class.method`` too), decorators included."""
    import ast
    tree = ast.parse(source)
    body, node = tree.body, None
    for part in name.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            return None
        body = getattr(node, "body", [])
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = source.splitlines()[first - 1:node.end_lineno]
    indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
    return "\n".join(x[indent:] for x in lines)


def _include(m, glue: dict, base: Path | None) -> str:
    indent, _, name, arg, opts = m.groups()
    options = dict(re.findall(r":([\w-]+):[ \t]*(.*)", opts))
    if name == "glue":                                      # a glued value: its text, if it has one
        return indent + str(glue[arg.strip()]) if arg.strip() in glue else ""
    path = (base or ROOT / "notebooks") / arg.strip()
    code = None
    try:
        text = path.read_text()
        if "pyobject" in options:
            code = _pyobject(text, options["pyobject"].strip())
        elif "lines" in options and re.fullmatch(r"\s*\d+\s*-\s*\d+\s*", options["lines"]):
            a, b = (int(x) for x in options["lines"].split("-"))
            code = "\n".join(text.splitlines()[a - 1:b])
        else:
            code = text
    except (OSError, SyntaxError, ValueError):
        code = None
    if code is None:
        what = options.get("pyobject", "").strip()
        return f"{indent}(the book shows {'`' + what + '` from ' if what else ''}`{arg.strip()}` here)"
    lang = options.get("language", "python" if path.suffix == ".py" else "").strip()
    fence = "````" if "```" in code else "```"
    return "\n".join([f"{indent}{fence}{lang}", *code.splitlines(), f"{indent}{fence}"])


def myst_to_markdown(text: str, glue: dict | None = None, base: Path | None = None) -> str:
    """Plain Markdown for reveal.js: roles -> text (glue -> value), ``{literalinclude}`` -> the code it names
    (``base``: the notebook's folder), ``{glue}`` -> the glued text, other directive fences -> a bold heading."""
    glue = glue or {}
    text = _INCLUDE.sub(lambda m: _include(m, glue, base), text if text.endswith("\n") else text + "\n")

    def role(m):
        name, body = m.group(1), m.group(2)
        if name.startswith("glue"):
            return str(glue.get(body.strip(), body))
        target = re.match(r"^(.*?)\s*<[^>]*>$", body)            # {doc}`title <target>`
        return target.group(1) if target else body
    out, stack, options = [], [], False
    for line in text.splitlines():
        m = _FENCE_OPEN.match(line)
        if m:
            indent, fence, name, arg = m.groups()
            stack.append(fence)
            title = {"exercise": "Exercise", "solution": "Solution"}.get(name, name.split(":")[-1].capitalize())
            if name == "solution":
                arg = ""                                           # its argument is a label
            out.append(f"{indent}**{title}{': ' + arg if arg else ''}**")
            out.append("")
            options = True
            continue
        if options and _OPTION.match(line):
            continue
        options = False
        if stack and line.strip() == stack[-1]:
            stack.pop()
            continue
        out.append(_ROLE.sub(role, line))
    return "\n".join(out).strip() + "\n"


def _directive(text: str) -> str | None:
    m = _FENCE_OPEN.match(text.lstrip().splitlines()[0]) if text.strip() else None
    return m.group(3) if m else None


# ------------------------------------------------------------------------------------- sizing

def _text_lines(text: str, width: int = 95) -> int:
    n = 0
    for line in text.splitlines():
        h = _HEADING.match(line)
        n += (4 if len(h.group(1)) == 1 else 3) if h else 1 + len(line) // width
    return n


def output_lines(cell) -> int:
    n = 0
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            n += _text_lines("".join(out.get("text", "")))
            continue
        data = out.get("data", {})
        if "image/png" in data or "image/svg+xml" in data or "image/jpeg" in data:
            n += FIGURE_LINES
        elif "text/html" in data:
            h = "".join(data["text/html"])
            rows = h.count("<tr")
            n += rows + 1 if rows else _text_lines(re.sub(r"<[^>]+>", "", h))
        elif "text/plain" in data:
            n += _text_lines("".join(data["text/plain"]))
    return n


def cell_lines(cell) -> int:
    tags = set(cell.get("metadata", {}).get("tags", []))
    n = 0
    if not tags & {"hide-input", "remove-input"}:
        n += _text_lines(cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"]))
    if cell["cell_type"] == "code" and not tags & {"remove-output", "hide-output"}:
        n += output_lines(cell)
    return n


# -------------------------------------------------------------------------------------- rules

def split_at_headings(nb):
    """A markdown cell with several headings (or exercises and solutions) becomes one cell per heading,
    exercise and solution, so each can start a slide or become notes."""
    import nbformat
    cells = []
    for cell in nb.cells:
        src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        if cell.cell_type != "markdown":
            cells.append(cell)
            continue
        parts, cur, fence = [], [], None
        for line in src.splitlines():
            d = _FENCE_OPEN.match(line)
            starts = _HEADING.match(line) or (d and d.group(3) in ("exercise", "solution"))
            if fence is None and starts and any(x.strip() for x in cur):
                parts.append(cur)
                cur = []
            m = re.match(r"^\s*(`{3,}|:{3,})", line)
            if m:
                fence = None if fence and line.strip() == fence else (fence or m.group(1))
            cur.append(line)
        parts.append(cur)
        for i, p in enumerate(parts):
            new = nbformat.v4.new_markdown_cell("\n".join(p).strip("\n"))
            new.metadata = copy.deepcopy(cell.metadata)
            cells.append(new)
    nb.cells = cells
    return nb


_FENCE_ANY = re.compile(r"^\s*(`{3,}|:{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


def _blocks(md: str) -> list:
    """A markdown cell as its blocks: (kind, text), kind one of heading, paragraph, list, table, fence
    (code or a directive, kept whole), quote; blank lines separate them, fences hold theirs."""
    blocks, cur, fence = [], [], None

    def flush():
        if not cur:
            return
        first = cur[0]
        text = "\n".join(cur)
        if _FENCE_ANY.match(first):
            kind = "fence"
        elif first.lstrip().startswith("|"):
            kind = "table"
        elif _LIST_ITEM.match(first):
            kind = "list"
        elif first.lstrip().startswith(">"):
            kind = "quote"
        elif first.startswith(("  ", "\t")) and blocks and blocks[-1][0] == "list":
            kind = "list"                                    # a list item's next paragraph
        else:
            kind = "paragraph"
        if kind == "list" and blocks and blocks[-1][0] == "list":
            blocks[-1] = ("list", blocks[-1][1] + "\n\n" + text)  # a loose list stays one block
        else:
            blocks.append((kind, text))
        cur.clear()

    for line in md.splitlines():
        if fence is not None:
            cur.append(line)
            if line.strip() == fence:
                fence = None
            continue
        m = _FENCE_ANY.match(line)
        if m and not (cur and cur[0].startswith(("  ", "\t")) or cur and _LIST_ITEM.match(cur[0])):
            flush()
            fence = m.group(1)
            cur.append(line)
            continue
        if m:                                                # a fence inside a list item
            fence = m.group(1)
            cur.append(line)
            continue
        if not line.strip():
            flush()
            continue
        if _HEADING.match(line):
            flush()
            blocks.append(("heading", line))
            continue
        cur.append(line)
    flush()
    return blocks


def split_prose(md: str) -> tuple[str, str]:
    """(what the slide shows, what the speaker notes say) of one markdown cell: headings, lists, tables,
    code, directives and the first paragraph under each heading stay; further paragraphs are notes."""
    slide, notes, lead = [], [], False
    for kind, text in _blocks(md):
        if kind == "heading":
            slide.append(text)
            lead = False
        elif kind in ("paragraph", "quote"):
            (notes if lead else slide).append(text)
            lead = True
        else:
            slide.append(text)
    return "\n\n".join(slide), "\n\n".join(notes)


def apply_tags(nb):
    """The book's tags, applied before any slide is placed: ``remove-cell``/``skip-slide`` and raw cells
    go, removed outputs go, a removed input is marked for the template; a cell left with nothing to show
    goes too (it would make a blank slide)."""
    cells = []
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        if tags & REMOVE_CELL or cell.cell_type == "raw":
            continue
        if cell.cell_type == "code":
            if tags & REMOVE_OUTPUT:
                cell.outputs = []
            if tags & REMOVE_INPUT:
                cell.metadata["transient"] = {"remove_source": True}
            shows_input = bool(src.strip()) and not tags & REMOVE_INPUT
            if not shows_input and not cell.get("outputs"):
                continue
        elif not src.strip():
            continue
        cells.append(cell)
    nb.cells = cells
    return nb


def assign_slide_types(nb, glue: dict | None = None, base: Path | None = None, prose_notes: bool = True):
    """A copy of ``nb`` ready for the exporter: tags applied (removed cells are gone), one cell per heading,
    prose beyond a heading's first paragraph as speaker notes (unless ``prose_notes=False``), and
    ``metadata.slideshow.slide_type`` on every cell."""
    import nbformat
    nb = split_at_headings(apply_tags(copy.deepcopy(nb)))
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        if cell.cell_type != "markdown":
            continue
        directive = _directive(src)
        h = _HEADING.match(src.lstrip())
        kind = "-"
        if directive == "solution":
            kind = "notes"
        elif h and len(h.group(1)) <= 2:
            kind = "slide"
        elif h and len(h.group(1)) == 3 or directive == "exercise":
            kind = "subslide"
        notes = ""
        if prose_notes and kind != "notes" and directive is None:
            src, notes = split_prose(src)
        cell.source = myst_to_markdown(src, glue, base)
        cell.metadata.setdefault("slideshow", {})["slide_type"] = kind
        if notes.strip():
            extra = nbformat.v4.new_markdown_cell(myst_to_markdown(notes, glue, base))
            extra.metadata["slideshow"] = {"slide_type": "notes"}
            cells.append(extra)
    nb.cells = cells
    used = 0                     # lines on the current (sub)slide
    started = False
    for cell in nb.cells:
        kind = cell.metadata.setdefault("slideshow", {}).get("slide_type", "-")
        if kind == "-" and started and used and used + cell_lines(cell) > BUDGET:
            kind = "subslide"
        if kind in ("slide", "subslide"):
            used = 0
        if kind != "notes":
            used += cell_lines(cell)
            started = True
        cell.metadata["slideshow"]["slide_type"] = kind
    return nb


_MATH = re.compile(r"\$\$|\\\(|\\\[|\{math\}|(?<![\w$\\])\$(?=\S)[^$\n]+(?<=\S)\$(?![\w$])")


def math_cells(nb) -> list:
    """Markdown cells of a prepared notebook with TeX math in them (the decks load no MathJax)."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = re.sub(r"(`{3,}).*?\1", "", cell.source, flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        if _MATH.search(text):
            found.append(i)
    return found


def _clean_outputs(nb):
    """Drop what a static slide cannot show: widget views (their static copy stays) and glue records."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            if "scrapbook" in out.get("metadata", {}):
                continue
            data = out.get("data")
            if data is not None:
                data.pop(WIDGET_VIEW, None)
                if not data:
                    continue
            keep.append(out)
        cell.outputs = keep
    return nb


def load_glue(executed: Path) -> dict:
    """Glued values (``myst_nb.glue``) saved beside an executed notebook, as the text the book shows."""
    path = executed.with_suffix(".glue.json")
    if not path.exists():
        return {}
    out = {}
    for name, rec in json.loads(path.read_text()).items():
        text = rec.get("data", {}).get("text/plain", "")
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        out[name] = text
    return out


def source_for(notebook: Path, use_executed: bool = True) -> tuple[Path, bool]:
    """The executed copy of ``notebook`` if the book build left a current one, else the notebook."""
    executed = EXECUTED / notebook.name
    if use_executed and executed.exists() and executed.stat().st_mtime >= notebook.stat().st_mtime:
        return executed, True
    return notebook, False


class SlidesError(RuntimeError):
    pass


_REMOTE = [re.compile(r"<(?:script|img|iframe|source|video|audio|embed)\b[^>]*?\ssrc\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)", re.I),
           re.compile(r"<link\b[^>]*?\shref\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)", re.I),
           re.compile(r"url\(\s*[\"']?((?:https?:)?//[^\"')\s]+)", re.I),
           re.compile(r"@import\s+[\"']((?:https?:)?//[^\"']+)", re.I),
           re.compile(r"\bimport\b[^;\n]*?from\s*[\"']((?:https?:)?//[^\"']+)", re.I),
           re.compile(r"\brequire\s*\(\s*\[?\s*[\"']((?:https?:)?//[^\"']+)", re.I)]


def remote_resources(page: str) -> list:
    """URLs on another host that a page would load: scripts, style sheets, images, frames, CSS ``url()`` and
    ``@import``, ES module imports (links a reader may follow, ``<a href>``, are not loads)."""
    found = []
    for pattern in _REMOTE:
        found += pattern.findall(page)
    return sorted(set(found))


def build(notebook: Path, out_dir: Path, use_executed: bool = True, reveal_package: Path | None = None,
          prose_notes: bool = True, warn=None, lang: str | None = None) -> Path:
    """Write ``out_dir/NAME.slides.html`` for one notebook (and ``out_dir/reveal.js/`` once); return its path.
    Raises SlidesError if the deck would load anything from a network or reveal.js would not show a slide.
    ``lang`` (e.g. ``zh_CN``): the markdown cells from that edition's catalogs (tools/i18n.py), outputs the same."""
    import nbformat
    from nbconvert import SlidesExporter

    notebook = Path(notebook)
    src, executed = source_for(notebook, use_executed)
    nb = nbformat.read(src, as_version=4)
    if lang:
        import i18n
        try:
            doc = notebook.resolve().relative_to(ROOT).with_suffix("").as_posix()
        except ValueError:
            doc = "notebooks/" + notebook.stem
        nb = i18n.translate_notebook(nb, doc, lang)
    glue = load_glue(src) if executed else {}
    nb = assign_slide_types(_clean_outputs(nb), glue, base=notebook.resolve().parent, prose_notes=prose_notes)
    math = math_cells(nb)
    if math and warn:
        warn(f"{notebook.name}: TeX math in {len(math)} slide cell(s) shows as its source: the decks load no "
             f"MathJax (offline); vendor it in tools/vendor_reveal.py")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vendor_reveal.ensure(out_dir, reveal_package)
    exporter = SlidesExporter(extra_template_basedirs=[str(TEMPLATES)], template_name="offline-reveal",
                              reveal_url_prefix=vendor_reveal.FOLDER, reveal_theme=vendor_reveal.THEME,
                              reveal_scroll=True, reveal_transition="none", reveal_number="c/t",
                              exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    body = body.replace("</head>", STYLE + "</head>", 1)
    remote = remote_resources(body)
    if remote:
        raise SlidesError(f"{notebook.name}: the deck would load {len(remote)} URL(s) from a network: "
                          f"{', '.join(remote[:3])}")
    problems = deck_problems(body)
    if problems:
        raise SlidesError(f"{notebook.name}: {len(problems)} slide(s) reveal.js would not show: "
                          + "; ".join(problems[:3]))
    out = out_dir / f"{notebook.stem}.slides.html"
    out.write_text(body, encoding="utf-8")
    return out


def write_index(out_dir: Path, built: list) -> Path:
    items = "\n".join(f'<li><a href="{html.escape(p.name)}">{html.escape(title)}</a>{note}</li>'
                      for p, title, note in built)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Slides: Multi-CTA programming in Gluon"
            f"</title></head><body><h1>Slides: Multi-CTA programming in Gluon</h1>"
            f"<p>One deck per chapter (arrows move, <kbd>s</kbd> opens the speaker notes: the prose and the solutions). "
            f"Nothing here is loaded from a network: copy this folder and open it from disk.</p>"
            f"<ul>\n{items}\n</ul></body></html>\n")
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def _title(notebook: Path) -> str:
    import nbformat
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            return cell.source.lstrip().splitlines()[0].lstrip("#").strip()
    return notebook.stem


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="reveal.js slides from the book's notebooks (offline decks)")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "slides")
    ap.add_argument("--source", action="store_true", help="use the notebooks as saved (no outputs), "
                                                          "even where `make book` left executed copies")
    ap.add_argument("--all-prose", action="store_true",
                    help="keep every paragraph on the slides (default: a heading's first paragraph; the rest "
                         "become speaker notes)")
    ap.add_argument("--reveal-package", type=Path, metavar="FILE.tgz",
                    help=f"reveal.js from this file (`npm pack reveal.js@{vendor_reveal.VERSION}` on a machine "
                         "with the registry) instead of fetching it; checked by its SHA-256 all the same")
    ap.add_argument("--lang", metavar="LANG", help="decks in that edition's language (zh_CN: the markdown cells "
                                                   "from locale/zh_CN, untranslated ones stay English)")
    args = ap.parse_args(argv)
    if args.lang and not (ROOT / "locale" / args.lang / "LC_MESSAGES").is_dir():
        ap.error(f"--lang: a language with catalogs under locale/ (e.g. zh_CN), not {args.lang!r}")
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(nb) for nb in notebooks if not nb.is_file() or nb.suffix != ".ipynb"]
    if missing:
        ap.error(f"no such notebook: {', '.join(missing)} (give paths like notebooks/01-cga-layouts.ipynb)")
    built = []
    warn = lambda msg: print(f"warning: {msg}", file=sys.stderr)  # noqa: E731
    for nb in notebooks:
        try:
            out = build(nb, args.out, use_executed=not args.source, reveal_package=args.reveal_package,
                        prose_notes=not args.all_prose, warn=warn, lang=args.lang)
        except (SlidesError, vendor_reveal.VendorError) as e:
            print(f"slides: {e}", file=sys.stderr)
            return 1
        executed = source_for(nb, not args.source)[1]
        note = "" if executed else " (code only: run <code>make book</code> first for outputs)"
        built.append((out, _title(nb), note))
        n = len(visible_slides(out.read_text()))
        print(f"{out}  ({n} slides, {'with outputs' if executed else 'code only'})")
    print(write_index(args.out, built))
    return 0


if __name__ == "__main__":
    sys.exit(main())
