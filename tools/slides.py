#!/usr/bin/env python3
"""Reveal.js slides from the book's notebooks, without a single slide tag in them.

    python tools/slides.py                      # every notebook -> _build/slides/NAME.slides.html
    python tools/slides.py notebooks/02-mbarriers.ipynb --out /tmp/slides

(``make slides`` runs the first form.) The notebooks stay as they are: at build time each cell gets a
``slideshow.slide_type`` from the notebook's structure, and nbconvert's ``SlidesExporter`` writes
one self-contained HTML file per notebook (figures embedded; reveal.js, its theme and MathJax come
from a CDN when the file is opened), plus ``index.html`` linking them.

The rules:

- a markdown cell that starts with ``#`` or ``##`` starts a new slide, ``###`` a sub-slide (a slide
  below it, reached with the down arrow);
- an exercise starts a sub-slide; its solution becomes speaker notes (press ``s`` in the slides);
- when a (sub-)slide would overflow (about 20 lines of text, code and output, ``BUDGET``; a figure counts as
  14), the next cell starts a sub-slide, so nothing runs off the bottom; a single long cell
  scrolls;
- tags: ``remove-cell`` (and ``skip-slide``) drop the cell, ``hide-input`` / ``remove-input``
  drop its source and keep its output, ``remove-output`` / ``hide-output`` drop the output;
- MyST markup that reveal.js does not know is turned into plain Markdown: ``{glue:text}`x``` into
  its value, other roles into their text, directive fences (exercise, solution, note) into a bold
  heading.

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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXECUTED = ROOT / "_build" / "jupyter_execute" / "notebooks"
REVEAL = "https://unpkg.com/reveal.js@4.0.2"

BUDGET = 20              # lines that fit on one slide at the exporter's default size
FIGURE_LINES = 14
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Smaller code and outputs than reveal's default, so a kernel's source fits; figures scale to the slide.
STYLE = """<style>
.reveal .jp-Cell pre, .reveal .highlight pre, .reveal .jp-OutputArea pre { font-size: 14px !important; line-height: 1.3 !important; }
.reveal .jp-OutputArea img { max-height: 560px; width: auto; }
.reveal table { font-size: 16px; }
</style>
"""

_HEADING = re.compile(r"^(#{1,6})\s")
_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|:{3,})\{([\w:-]+)\}\s*(.*)$")
_OPTION = re.compile(r"^\s*:[\w-]+:.*$")
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")


# ----------------------------------------------------------------------------------- markdown

def myst_to_markdown(text: str, glue: dict | None = None) -> str:
    """Plain Markdown for reveal.js: roles -> text (glue -> value), directive fences -> a bold heading."""
    glue = glue or {}

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


def assign_slide_types(nb, glue: dict | None = None):
    """Set ``metadata.slideshow.slide_type`` on every cell from the notebook's structure (a copy)."""
    nb = split_at_headings(copy.deepcopy(nb))
    used = 0                     # lines on the current (sub)slide
    started = False
    for cell in nb.cells:
        src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        tags = set(cell.metadata.get("tags", []))
        kind = "-"
        if tags & {"remove-cell", "skip-slide"}:
            kind = "skip"
        elif cell.cell_type == "markdown":
            directive = _directive(src)
            h = _HEADING.match(src.lstrip())
            if directive == "solution":
                kind = "notes"
            elif h and len(h.group(1)) <= 2:
                kind = "slide"
            elif h and len(h.group(1)) == 3 or directive == "exercise":
                kind = "subslide"
            cell.source = myst_to_markdown(src, glue)
        elif cell.cell_type == "raw":
            kind = "skip"
        if kind in ("-",) and started and used and used + cell_lines(cell) > BUDGET:
            kind = "subslide"
        if kind in ("slide", "subslide"):
            used = 0
        if kind not in ("skip", "notes"):
            used += cell_lines(cell)
            started = True
        cell.metadata.setdefault("slideshow", {})["slide_type"] = kind
    return nb


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


def build(notebook: Path, out_dir: Path, use_executed: bool = True, reveal: str = REVEAL) -> Path:
    """Write ``out_dir/NAME.slides.html`` for one notebook; return its path."""
    import nbformat
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    src, executed = source_for(Path(notebook), use_executed)
    nb = nbformat.read(src, as_version=4)
    glue = load_glue(src) if executed else {}
    nb = _clean_outputs(assign_slide_types(nb, glue))
    exporter = SlidesExporter(reveal_url_prefix=reveal, reveal_scroll=True, reveal_transition="none",
                              reveal_number="c/t", exclude_input_prompt=True, exclude_output_prompt=True)
    tags = TagRemovePreprocessor(remove_cell_tags={"remove-cell", "skip-slide"},
                                 remove_input_tags={"hide-input", "remove-input"},
                                 remove_all_outputs_tags={"remove-output", "hide-output"}, enabled=True)
    exporter.register_preprocessor(tags, enabled=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": Path(notebook).stem}})
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{Path(notebook).stem}.slides.html"
    out.write_text(body.replace("</head>", STYLE + "</head>", 1), encoding="utf-8")
    return out


def write_index(out_dir: Path, built: list) -> Path:
    items = "\n".join(f'<li><a href="{html.escape(p.name)}">{html.escape(title)}</a>{note}</li>'
                      for p, title, note in built)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Slides: Multi-CTA programming in Gluon"
            f"</title></head><body><h1>Slides: Multi-CTA programming in Gluon</h1>"
            f"<p>One deck per chapter (arrows move, <kbd>s</kbd> opens the speaker notes with the solutions).</p>"
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
    ap = argparse.ArgumentParser(description="reveal.js slides from the book's notebooks")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "slides")
    ap.add_argument("--source", action="store_true", help="use the notebooks as saved (no outputs), "
                                                          "even where `make book` left executed copies")
    ap.add_argument("--reveal", default=REVEAL, help=f"where reveal.js is served from (default {REVEAL}); "
                    "a local copy for a room without internet: npm pack reveal.js@4.0.2, unpack, give its path")
    args = ap.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(nb) for nb in notebooks if not nb.is_file() or nb.suffix != ".ipynb"]
    if missing:
        ap.error(f"no such notebook: {', '.join(missing)} (give paths like notebooks/01-cga-layouts.ipynb)")
    built = []
    for nb in notebooks:
        out = build(nb, args.out, use_executed=not args.source, reveal=args.reveal)
        executed = source_for(nb, not args.source)[1]
        note = "" if executed else " (code only: run <code>make book</code> first for outputs)"
        built.append((out, _title(nb), note))
        print(f"{out}  ({'with outputs' if executed else 'code only'})")
    print(write_index(args.out, built))
    return 0


if __name__ == "__main__":
    sys.exit(main())
