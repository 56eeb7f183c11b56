"""What every chapter carries: the Colab set-up cell (the same everywhere, a no-op anywhere but Colab: nbval runs
it on every machine; on Colab it asks for the repository to clone until the book has a public home), and its
exercises listed in the workshop guide."""
import json
import re
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def colab_cell(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    src = "".join(cells[0]["source"])
    return src if "google.colab" in src else None


def test_every_chapter_starts_with_the_colab_cell():
    assert len(NOTEBOOKS) >= 7
    assert [p.name for p in NOTEBOOKS if not colab_cell(p)] == []


def test_colab_cells_are_identical_and_say_what_they_need():
    """Until the book has a public home there is no repository to clone: the cell names none, asks for one on
    Colab, and the rendered book shows no launch buttons (_config.yml has no Binder or Colab URL)."""
    cells = {p.name: colab_cell(p) for p in NOTEBOOKS if colab_cell(p)}
    assert len(set(cells.values())) == 1, sorted(cells)
    assert 'REPO = ""' in next(iter(cells.values()))
    config = (ROOT / "_config.yml").read_text()
    launch = config.split("launch_buttons:")[1].split("\n\n")[0]
    assert 'binderhub_url: ""' in launch and 'colab_url: ""' in launch, launch


def test_colab_cell_without_a_repository_says_so_on_colab(monkeypatch):
    src = colab_cell(ROOT / "notebooks/01-cga-layouts.ipynb")
    monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    calls = []

    class Done:
        returncode = 1          # "import multicta_kernels" fails: not installed yet

    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: calls.append(cmd) or Done())
    with pytest.raises(SystemExit, match="Set REPO"):
        exec(compile(src, "colab-cell", "exec"), {})
    assert not any("git" in c for c in calls)


def test_colab_cell_does_nothing_outside_colab(monkeypatch):
    src = colab_cell(ROOT / "notebooks/01-cga-layouts.ipynb")
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    exec(compile(src, "colab-cell", "exec"), {})
    assert calls == []


def test_colab_cell_installs_when_on_colab_and_package_missing(monkeypatch):
    src = colab_cell(ROOT / "notebooks/01-cga-layouts.ipynb")
    monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    calls = []

    class Done:
        returncode = 1          # "import multicta_kernels" fails: not installed yet

    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: calls.append(cmd) or Done())
    monkeypatch.setattr(sys, "path", list(sys.path))
    src = src.replace('REPO = ""', 'REPO = "https://example.org/multicta-gluon.git"')
    exec(compile(src, "colab-cell", "exec"), {})
    flat = [" ".join(c) for c in calls]
    assert any("git clone" in c for c in flat)
    assert any("--no-deps triton==3.9.0" in c for c in flat)
    assert any("-e /content/multicta-gluon" in c for c in flat)
    assert "/content/multicta-gluon" in sys.path


def test_every_exercise_is_in_the_workshop_guide():
    labels = {m for p in NOTEBOOKS for m in re.findall(r":label: (ex-[\w-]+)", p.read_text())}
    listed = re.findall(r"\{ref\}`[^`<]+<(ex-[\w-]+)>`", (ROOT / "book/workshop.md").read_text())
    assert len(labels) > 20
    assert sorted(labels - set(listed)) == [] and sorted(set(listed) - labels) == []
    assert len(listed) == len(set(listed))
