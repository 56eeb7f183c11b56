"""tools/slides.py: slide types from a notebook's structure, and a deck built for one chapter (no execution)."""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import slides  # noqa: E402

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[1:]) if c.startswith("M") else nbformat.v4.new_code_cell(c[1:])
                for c in cells]
    return nb


def _types(nb):
    return [(c.cell_type, c.metadata["slideshow"]["slide_type"]) for c in nb.cells]


def test_headings_exercises_and_solutions():
    nb = _nb("M# Title\n\nintro", "Cx = 1", "M## Section\n\ntext", "M### Detail", "Mplain text",
             "M````{exercise} Masks\n:label: ex-a\n\nHow many?\n````",
             "M````{solution} ex-a\n:class: dropdown\n\nEight.\n````")
    nb.cells.append(nbformat.v4.new_code_cell("secret = 1", metadata={"tags": ["remove-cell"]}))
    out = slides.assign_slide_types(nb)
    assert [t for _, t in _types(out)] == ["slide", "-", "slide", "subslide", "-", "subslide", "notes", "skip"]
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


def test_one_chapter_builds(tmp_path):
    out = slides.build(ROOT / "notebooks" / "02-mbarriers.ipynb", tmp_path, use_executed=False)
    html = out.read_text()
    assert out.name == "02-mbarriers.slides.html"
    assert "Reveal.initialize" in html and "reveal.js" in html
    assert len(re.findall(r"<section", html)) > 10
    assert "{exercise}" not in html and "{glue:text}" not in html
    assert 'class="notes"' in html or "<aside class=\"notes\"" in html        # solutions as speaker notes


def test_a_missing_notebook_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        slides.main(["notebooks/no-such-chapter.ipynb"])
    assert e.value.code == 2 and "no such notebook: notebooks/no-such-chapter.ipynb" in capsys.readouterr().err
