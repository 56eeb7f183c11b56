"""The rendered book and the slide decks, opened in a real headless Chromium (tools/browser_check.py).

The checker is proved on a tiny site with one broken thing per page (and one layout finding per page:
reported, failed only with --strict) and on tiny decks built by tools/slides.py, one broken thing per deck;
then, where a build exists (``make book``, ``make slides``), the real book and decks are checked: no
missing image, no broken internal link or anchor, no visible Python traceback on any page; every slide
reached and showing something, nothing requested from a network. ``make browser-check`` runs the same
checks after the builds.
"""
import base64
import dataclasses
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import browser_check as bc  # noqa: E402

CHROMIUM = bc.find_chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine: apt-get install chromium "
                                                              "(.ci/run installs it)")

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def _page(body: str, title: str = "page") -> str:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "img").mkdir()
    (root / "img" / "ok.png").write_bytes(PNG)
    (root / "sub").mkdir()
    pages = {
        "index.html": _page('<h1 id="top">Book</h1><img src="img/ok.png" alt="fine">'
                            '<a href="sub/good.html#here">good</a> <a href="#top">self</a> '
                            '<a href="https://example.invalid/x">external, not checked</a>'
                            '<pre style="display:none">Traceback (most recent call last): hidden, not visible</pre>'),
        "sub/good.html": _page('<p id="here">here</p><a href="../index.html">up</a><img src="../img/ok.png">'),
        "sub/missing_image.html": _page('<img src="../img/nothere.png" alt="lost figure">'),
        "sub/broken_link.html": _page('<a href="gone.html">gone</a>'),
        "sub/broken_anchor.html": _page('<a href="good.html#nowhere">nowhere</a>'),
        "sub/traceback.html": _page("<pre>Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                                    "ValueError: boom</pre>"),
        "sub/ipython_error.html": _page('<div class="cell_output"><div class="output traceback">'
                                        "<pre>ValueError    Traceback</pre></div></div>"),
        "sub/missing_script.html": _page('<script src="../_static/nothere.js"></script><p>ok</p>'),
        "sub/redirect.html": '<meta http-equiv="Refresh" content="0; url=good.html" />',
        "sub/redirect_gone.html": '<meta http-equiv="Refresh" content="0; url=gone.html" />',
        # layout: reported, not failed (--strict fails)
        "sub/wide_code.html": _page('<div class="cell"><div class="cell_input"><div class="highlight">'
                                    '<pre style="overflow-x:auto; width:400px">short = 1\nwidest = 2  # ' + "w" * 150 +
                                    '</pre></div></div></div>'),
        "sub/wide_output.html": _page('<div class="cell"><div class="cell_input"><pre>x</pre></div>'
                                      '<div class="cell_output"><pre style="overflow:auto; width:400px">'
                                      + "verdict " * 60 + '</pre></div></div>'),
        "sub/wide_table.html": _page('<table style="width:2400px"><tr><td>opcode</td><td>yours</td></tr></table>'
                                     '<div style="overflow-x:auto"><table style="width:2400px"><tr><td>scrolls, fine'
                                     '</td></tr></table></div>'),
        "sub/small_font.html": _page('<p>normal</p><p style="font-size:9px">tiny print</p>'
                                     '<svg width="60" height="20"><text x="0" y="10" font-size="5">figure text, not '
                                     'measured</text></svg>'),
    }
    for name, text in pages.items():
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def site_report(site):
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run installs it)")
    return bc.check_site(site, CHROMIUM, log=None)


@needs_chromium
def test_every_page_is_opened(site_report):
    assert site_report.pages == 14


@needs_chromium
@pytest.mark.parametrize("page, kind", [
    ("sub/missing_image.html", "missing image"),
    ("sub/broken_link.html", "broken link"),
    ("sub/broken_anchor.html", "broken anchor"),
    ("sub/traceback.html", "visible traceback"),
    ("sub/ipython_error.html", "visible traceback"),
    ("sub/missing_script.html", "missing resource"),
    ("sub/redirect_gone.html", "broken link"),
])
def test_each_kind_of_breakage_is_caught(site_report, page, kind):
    assert (page, kind) in {(p, k) for p, k, _ in site_report.problems}


@needs_chromium
def test_good_pages_pass(site_report):
    bad = {p for p, _, _ in site_report.problems} | {p for p, _, _ in site_report.layout}
    assert not {"index.html", "sub/good.html", "sub/redirect.html"} & bad
    assert len(site_report.problems) == 7


@needs_chromium
def test_layout_is_reported_not_failed(site_report):
    found = {(p, k): d for p, k, d in site_report.layout}
    assert set(found) == {("sub/wide_code.html", "wide code"), ("sub/wide_output.html", "wide output"),
                          ("sub/wide_table.html", "table overflow"), ("sub/small_font.html", "small font")}
    assert "cell 1" in found[("sub/wide_code.html", "wide code")]
    assert "widest line 164 chars" in found[("sub/wide_code.html", "wide code")]          # the widest, not the first
    assert "9 px" in found[("sub/small_font.html", "small font")] and "1 text run" in found[("sub/small_font.html",
                                                                                                 "small font")]
    assert site_report.scrolling_tables == 1                       # the table that scrolls inside itself is fine
    assert site_report.layout_counts()["sub/wide_table.html"] == {"table overflow": 1}
    assert "layout (reported, not failed" in site_report.summary()
    assert dataclasses.replace(site_report, problems=[]).ok                   # layout alone does not fail ...
    assert not dataclasses.replace(site_report, problems=[], strict=True).ok  # ... unless --strict


@needs_chromium
def test_cli_strict_fails_on_layout(tmp_path, capsys):
    (tmp_path / "index.html").write_text(_page('<p style="font-size:8px">tiny</p>'))
    assert bc.main([str(tmp_path), "-q", "--screenshots", str(tmp_path / "shots")]) == 0
    assert "small font" in capsys.readouterr().out
    assert (tmp_path / "shots" / "index.png").read_bytes().startswith(b"\x89PNG")
    assert bc.main([str(tmp_path), "-q", "--strict"]) == 1


def test_no_site_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="make book"):
        bc.check_site(tmp_path, "chromium")


def test_cli_skips_clearly_without_chromium(monkeypatch, capsys):
    monkeypatch.setattr(bc, "find_chromium", lambda: None)
    assert bc.main(["_build/html"]) == 0
    assert "SKIPPED" in capsys.readouterr().out
    assert bc.main(["_build/html", "--require-browser"]) == 1


# --------------------------------------------------------------------------------------- the decks

def _deck_notebook():
    import nbformat
    nb = nbformat.v4.new_notebook()
    md = nbformat.v4.new_markdown_cell
    nb.cells = [md("# A deck\n\nThe lead.\n\nProse that the teacher reads: speaker notes."),
                nbformat.v4.new_code_cell("install()", metadata={"tags": ["skip-slide"]}),
                md("## One\n\nFirst section."), nbformat.v4.new_code_cell("x = 1"),
                md("## Two\n\nSecond section.\n\n````{exercise} Count\n:label: ex-c\n\nHow many?\n````\n\n"
                   "````{solution} ex-c\n:class: dropdown\n\nThree.\n````"),
                md("### Two, detail\n\nMore.")]
    return nb


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """A good deck built by tools/slides.py, and one copy per way a deck can break."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbconvert")
    import slides
    import vendor_reveal
    if not (vendor_reveal.CACHE / f"reveal.js-{vendor_reveal.VERSION}.tgz").exists() and shutil.which("npm") is None:
        pytest.skip(f"no npm to fetch reveal.js {vendor_reveal.VERSION}")
    root = tmp_path_factory.mktemp("decks")
    nbformat.write(_deck_notebook(), root / "good.ipynb")
    good = slides.build(root / "good.ipynb", root, use_executed=False).read_text()
    (root / "good.ipynb").unlink()
    stack = "</section></section><section><section>"
    first_slide_end = good.index(stack)
    breakages = {
        # the Colab-cell bug: the title slide's closing tags lost, every later slide nested a level deeper
        "nested": good[:first_slide_end] + "</section><section><section>" + good[first_slide_end + len(stack):],
        # a slide whose only text is hidden (a static parse cannot tell)
        "blank": good[:first_slide_end] + '</section></section><section><section><p style="display:none">hidden</p>'
                 '<aside class="notes">only notes</aside>' + good[first_slide_end:],
        "remote": good.replace("<p>First section.</p>",
                               '<p>First section.</p><img src="https://example.invalid/figure.png" alt="cdn">', 1),
        "cdn_reveal": good.replace('src="reveal.js/dist/reveal.js"',
                                   'src="https://unpkg.com/reveal.js@5.2.1/dist/reveal.js"', 1),
        "no_notes_plugin": good.replace("plugins: [RevealNotes]", "plugins: []", 1),
    }
    for name, text in breakages.items():
        assert text != good, name
        (root / f"{name}.slides.html").write_text(text)
    return root


@pytest.fixture(scope="module")
def deck_report(decks):
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run installs it)")
    return bc.check_decks(decks, CHROMIUM, log=None)


@needs_chromium
def test_a_good_deck_passes(decks, deck_report):
    assert deck_report.decks == 6
    assert not [p for p in deck_report.problems if p[0] == "good.slides.html"]
    with bc.Browser(CHROMIUM) as browser:
        problems, shown = bc.check_deck(browser, decks / "good.slides.html")
        assert problems == [] and shown == 5           # title, One, Two, the exercise, Two's detail: all reached
        assert bc.check_speaker_view(browser, decks / "good.slides.html") == []    # the notes, offline


@needs_chromium
@pytest.mark.parametrize("deck, kind, words", [
    ("nested", "unreachable", "nested deeper than reveal.js shows"),
    ("nested", "blank slide", '"One'),
    ("blank", "blank slide", "1.0"),
    ("remote", "non-local request", "https://example.invalid/figure.png"),
    ("remote", "non-local request", "speaker view: https://example.invalid/figure.png"),   # its previews
    ("cdn_reveal", "non-local request", "https://unpkg.com/reveal.js@5.2.1/dist/reveal.js"),
    ("cdn_reveal", "no slides", "reveal.js did not load"),
    ("no_notes_plugin", "no speaker notes", "no notes plugin"),
])
def test_each_kind_of_broken_deck_is_caught(deck_report, deck, kind, words):
    found = [d for p, k, d in deck_report.problems if p == f"{deck}.slides.html" and k == kind]
    assert found and any(words in d for d in found), (deck, kind, deck_report.problems)


def test_no_decks_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="make slides"):
        bc.check_decks(tmp_path, "chromium")


# --------------------------------------------------------------------------------- the real book

BOOK = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))


@pytest.mark.book
@needs_chromium
def test_built_book(capsys):
    """Every page of the rendered book: images load, internal links resolve, no traceback shows."""
    if not (BOOK / "index.html").exists():
        if "BOOK_HTML" in os.environ:
            pytest.fail(f"BOOK_HTML={BOOK} has no index.html: the book was not built")
        pytest.skip("no rendered book: run `make book` (or `make browser-check`)")
    report = bc.check_site(BOOK, CHROMIUM, log=None)
    assert report.pages >= 10
    assert report.ok, "\n" + report.summary()


SLIDES = Path(os.environ.get("SLIDES_HTML", ROOT / "_build" / "slides"))


@pytest.mark.book
@needs_chromium
def test_built_slides():
    """Every deck of `make slides`: every slide reached and showing something, nothing from a network."""
    if not bc.decks_of(SLIDES):
        if "SLIDES_HTML" in os.environ:
            pytest.fail(f"SLIDES_HTML={SLIDES} has no deck: the slides were not built")
        pytest.skip("no slides: run `make slides` (or `make browser-check`)")
    report = bc.check_decks(SLIDES, CHROMIUM, log=None)
    assert report.decks >= 7 and report.slides > 100
    assert report.ok, "\n" + report.summary()
