"""tools/slides.py: slide types from a notebook's structure, decks whose every slide reveal.js shows, that load
nothing from a network (reveal.js vendored by tools/vendor_reveal.py), with the prose as speaker notes (no
execution, no browser: tests/test_rendered_book.py steps through decks in Chromium)."""
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import slides  # noqa: E402
import vendor_reveal  # noqa: E402

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[1:]) if c.startswith("M") else nbformat.v4.new_code_cell(c[1:])
                for c in cells]
    return nb


def _write(tmp_path, nb, name="deck.ipynb"):
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


@pytest.fixture(autouse=True)
def _reveal_available():
    """Building a deck needs reveal.js: the cached tarball, else npm (the registry) to fetch it once."""
    cached = vendor_reveal.CACHE / f"reveal.js-{vendor_reveal.VERSION}.tgz"
    if not cached.exists() and shutil.which("npm") is None:
        pytest.skip(f"no npm to fetch reveal.js {vendor_reveal.VERSION} (and no {cached})")


def _types(nb):
    return [(c.cell_type, c.metadata["slideshow"]["slide_type"]) for c in nb.cells]


def test_headings_exercises_and_solutions():
    nb = _nb("M# Title\n\nintro", "Cx = 1", "M## Section\n\ntext", "M### Detail", "Mplain text",
             "M````{exercise} Masks\n:label: ex-a\n\nHow many?\n````",
             "M````{solution} ex-a\n:class: dropdown\n\nEight.\n````")
    nb.cells.append(nbformat.v4.new_code_cell("secret = 1", metadata={"tags": ["remove-cell"]}))
    out = slides.assign_slide_types(nb)
    assert [t for _, t in _types(out)] == ["slide", "-", "slide", "subslide", "-", "subslide", "notes"]  # no secret
    assert out.cells[5].source.startswith("**Exercise: Masks**") and ":label:" not in out.cells[5].source
    assert out.cells[6].source.startswith("**Solution**") and "````" not in out.cells[6].source
    assert "slideshow" not in nb.cells[0].metadata                     # the notebook itself is untouched


def test_a_cell_with_two_headings_is_split():
    out = slides.assign_slide_types(_nb("M## One\n\ntext\n\n## Two\n\n```python\n# not a heading\n```\n\n"
                                        "````{exercise} E\n:label: e\n\n```\n# code\n```\n````\n\n"
                                        "````{solution} e\n:class: dropdown\n\nS\n````"))
    assert [c.source.splitlines()[0] for c in out.cells] == ["## One", "## Two", "**Exercise: E**", "**Solution**"]
    assert [t for _, t in _types(out)] == ["slide", "slide", "subslide", "notes"]


def test_overflow_starts_a_subslide():
    long_code = "\n".join(f"x{i} = {i}" for i in range(15))
    out = slides.assign_slide_types(_nb("M## Section\n\ntext", "C" + long_code, "C" + long_code))
    assert [t for _, t in _types(out)] == ["slide", "-", "subslide"]


def test_myst_roles_and_glue():
    text = slides.myst_to_markdown("About {glue:text}`n` CTAs, see {doc}`the setup <setup>` and {term}`CTA`.",
                                   {"n": "30"})
    assert text.strip() == "About 30 CTAs, see the setup and CTA."


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
_DECKS = {}


@pytest.fixture(scope="module")
def decks_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("decks")


def _deck(folder, notebook) -> str:
    """The deck of one chapter (as saved: no outputs), built once per test module."""
    if notebook not in _DECKS:
        _DECKS[notebook] = slides.build(notebook, folder, use_executed=False).read_text()
    return _DECKS[notebook]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_every_deck_shows_every_slide(decks_dir, notebook):
    """Parse the deck's section nesting: reveal.js shows top-level <section>s and one nested level only,
    and a slide with no visible text, image or table is blank."""
    page = _deck(decks_dir, notebook)
    assert slides.deck_problems(page) == []
    shown = slides.visible_slides(page)
    headings = sum(1 for c in slides.split_at_headings(nbformat.read(notebook, as_version=4)).cells
                   if c.cell_type == "markdown" and re.match(r"#{1,3}\s", c.source.lstrip()))
    assert len(shown) >= headings >= 4                 # one slide per section at least (the appendix has 4)
    assert len({s.path[0] for s in shown}) >= min(headings, 6)   # and the sections are top-level slides


def test_deck_problems_reads_the_nesting():
    deck = ('<div class="reveal"><div class="slides">'
            '<section><section><h1>one</h1></section><section><p>two</p><section><p>deep</p></section></section></section>'
            '<section><aside class="notes">only notes</aside></section>'
            '<section><img src="x.png"></section>'
            '</div></div>')
    assert [s.path for s in slides.visible_slides(deck)] == [(0, 0), (0, 1), (1,), (2,)]
    assert slides.deck_problems(deck) == ["slide 1.2.1: nested 3 levels deep (reveal.js shows two): unreachable",
                                          "slide 2: blank (no visible text, image or table)"]


def test_a_removed_cell_after_the_title_closes_no_slide(tmp_path):
    """The Colab cell (skip-slide) after the title carried the tags that closed the title slide: removed after
    nbconvert placed the <section>s, it left every later slide nested a level too deep."""
    colab = nbformat.v4.new_code_cell("install()", metadata={"tags": ["colab", "hide-input", "skip-slide"]})
    nb = _nb("M# Title\n\nintro", "M## One\n\ntext", "Cx = 1", "M## Two\n\ntext", "M### Two, detail\n\nmore")
    nb.cells.insert(1, colab)
    page = slides.build(_write(tmp_path, nb), tmp_path, use_executed=False).read_text()
    assert slides.deck_problems(page) == []
    assert [s.path for s in slides.visible_slides(page)] == [(0, 0), (1, 0), (2, 0), (2, 1)]
    assert "install()" not in page


def test_a_cell_with_nothing_to_show_makes_no_slide(tmp_path):
    """A figure cell (hide-input) without its output (the notebook as saved) would start a blank sub-slide."""
    long_code = "\n".join(f"x{i} = {i}" for i in range(25))
    figure = nbformat.v4.new_code_cell("plot()", metadata={"tags": ["hide-input"]})
    nb = _nb("M## Section\n\ntext", "C" + long_code)
    nb.cells.append(figure)
    out = slides.assign_slide_types(nb)
    assert [c.source for c in out.cells if c.cell_type == "code"] == [long_code]
    page = slides.build(_write(tmp_path, nb), tmp_path, use_executed=False).read_text()
    assert slides.deck_problems(page) == [] and len(slides.visible_slides(page)) == 2    # the code overflows


def test_prose_beyond_the_first_paragraph_becomes_notes():
    md = ("## Heading\n\nThe lead paragraph.\n\nA second paragraph,\nover two lines.\n\n- a list\n- stays\n\n"
          "| a | b |\n| - | - |\n| 1 | 2 |\n\n```python\nx = 1\n\ny = 2\n```\n\nA third.\n\n### Sub\n\nIts lead.\n\nIts more.")
    slide, notes = slides.split_prose(md)
    assert slide == ("## Heading\n\nThe lead paragraph.\n\n- a list\n- stays\n\n| a | b |\n| - | - |\n| 1 | 2 |\n\n"
                     "```python\nx = 1\n\ny = 2\n```\n\n### Sub\n\nIts lead.")
    assert notes == "A second paragraph,\nover two lines.\n\nA third.\n\nIts more."
    out = slides.assign_slide_types(_nb("M" + md))
    assert [t for _, t in _types(out)] == ["slide", "notes", "subslide", "notes"]
    assert _types(slides.assign_slide_types(_nb("M" + md), prose_notes=False)) == [("markdown", "slide"),
                                                                                  ("markdown", "subslide")]


def test_literalinclude_becomes_the_code(tmp_path):
    (tmp_path / "mod.py").write_text("import x\n\n\n@deco\ndef f(a):\n    return a\n\n\ndef g():\n    pass\n")
    md = "See:\n\n```{literalinclude} mod.py\n:pyobject: f\n```\n\n```{glue} n\n```\n"
    out = slides.myst_to_markdown(md, {"n": "42"}, base=tmp_path)
    assert "```python\n@deco\ndef f(a):\n    return a\n```" in out and "def g" not in out and "42" in out
    assert "the book shows `h` from `mod.py`" in slides.myst_to_markdown(md.replace(": f", ": h"), base=tmp_path)


def test_remote_resources_are_found():
    old_deck = ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>'
                '<link rel="stylesheet" href="https://unpkg.com/reveal.js@4.0.2/dist/reveal.css">'
                '<style>@import url(https://fonts.googleapis.com/css?family=Lato);</style>'
                "<script type=\"module\">import mermaid from 'https://cdn.example/mermaid.mjs';</script>"
                '<a href="https://github.com/x">a link is no load</a><img src="data:image/png;base64,AA">')
    assert slides.remote_resources(old_deck) == [
        "https://cdn.example/mermaid.mjs", "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js",
        "https://fonts.googleapis.com/css?family=Lato", "https://unpkg.com/reveal.js@4.0.2/dist/reveal.css"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_no_deck_loads_anything_from_a_network(decks_dir, notebook):
    page = _deck(decks_dir, notebook)
    tmp_path = decks_dir
    assert slides.remote_resources(page) == []
    local = re.findall(r'<(?:script|link)\b[^>]*?(?:src|href)="([^"]+)"', page)
    assert {"reveal.js/dist/reveal.js", "reveal.js/plugin/notes/notes.js", "reveal.js/dist/reveal.css",
            f"reveal.js/dist/theme/{vendor_reveal.THEME}.css"} <= set(local)
    assert all((tmp_path / u).is_file() for u in local)
    for css in (tmp_path / "reveal.js").rglob("*.css"):                  # what the vendored style sheets load
        assert slides.remote_resources(css.read_text()) == [], css
    assert "jquery" not in page.lower() and "require.js" not in page and "mathjax" not in page.lower()


def test_no_slide_has_math():
    """The decks load no MathJax (offline): a chapter with TeX math needs it vendored (tools/vendor_reveal.py)."""
    assert slides.math_cells(slides.assign_slide_types(_nb("MCosts $5 and $6; `$x$` in code", "M$$a$$"))) == [1]
    assert slides.math_cells(slides.assign_slide_types(_nb(r"MThe ratio $\alpha / 2$"))) == [0]
    for nb in NOTEBOOKS:
        assert slides.math_cells(slides.assign_slide_types(nbformat.read(nb, as_version=4))) == [], nb.name


def test_reveal_is_checked_by_its_sha256(tmp_path):
    bad = tmp_path / "reveal.js-bad.tgz"
    bad.write_bytes(b"not reveal.js")
    with pytest.raises(vendor_reveal.VendorError, match="SHA-256 .* not reveal.js 5.2.1's"):
        vendor_reveal.ensure(tmp_path / "out", bad)
    with pytest.raises(vendor_reveal.VendorError, match="--reveal-package .*nothere.tgz: no such file"):
        vendor_reveal.ensure(tmp_path / "out", tmp_path / "nothere.tgz")
    out = vendor_reveal.ensure(tmp_path / "out")
    assert (out / "dist" / "reveal.js").is_file() and (out / "plugin" / "notes" / "notes.js").is_file()
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 3_000_000


def test_one_chapter_builds(tmp_path):
    out = slides.build(ROOT / "notebooks" / "02-mbarriers.ipynb", tmp_path, use_executed=False)
    html = out.read_text()
    assert out.name == "02-mbarriers.slides.html"
    assert "Reveal.initialize" in html and "plugins: [RevealNotes]" in html
    assert "{exercise}" not in html and "{glue:text}" not in html and "{literalinclude}" not in html
    notes = " ".join(s.notes for s in slides.deck_structure(html))
    assert "Solution" in notes                                                   # solutions as speaker notes
    assert "BarrierSim steps through these rules" in notes                       # and the prose
    assert '<span class="nf">sync_inits</span>' in html                          # the included source


def test_a_missing_notebook_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        slides.main(["notebooks/no-such-chapter.ipynb"])
    assert e.value.code == 2 and "no such notebook: notebooks/no-such-chapter.ipynb" in capsys.readouterr().err
