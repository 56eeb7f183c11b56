"""The rendered book, opened in a real headless Chromium (tools/browser_check.py).

The checker is proved on a tiny site with one broken thing per page; then, where a build exists
(``make book``), the real book is checked: no missing image, no broken internal link or anchor, no
visible Python traceback on any page. ``make browser-check`` runs the same check after the build.
"""
import base64
import os
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
    assert site_report.pages == 8


@needs_chromium
@pytest.mark.parametrize("page, kind", [
    ("sub/missing_image.html", "missing image"),
    ("sub/broken_link.html", "broken link"),
    ("sub/broken_anchor.html", "broken anchor"),
    ("sub/traceback.html", "visible traceback"),
    ("sub/ipython_error.html", "visible traceback"),
    ("sub/missing_script.html", "missing resource"),
])
def test_each_kind_of_breakage_is_caught(site_report, page, kind):
    assert (page, kind) in {(p, k) for p, k, _ in site_report.problems}


@needs_chromium
def test_good_pages_pass(site_report):
    bad = {p for p, _, _ in site_report.problems}
    assert "index.html" not in bad and "sub/good.html" not in bad
    assert len(site_report.problems) == 6


def test_no_site_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="make book"):
        bc.check_site(tmp_path, "chromium")


def test_cli_skips_clearly_without_chromium(monkeypatch, capsys):
    monkeypatch.setattr(bc, "find_chromium", lambda: None)
    assert bc.main(["_build/html"]) == 0
    assert "SKIPPED" in capsys.readouterr().out
    assert bc.main(["_build/html", "--require-browser"]) == 1


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
