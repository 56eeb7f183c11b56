"""The Chinese edition (tools/i18n.py, tools/i18n_sphinx.py, locale/zh_CN/).

- The route, proved on a tiny book (a page and a notebook with a glued number, inline code and an output): the
  gettext builder extracts the notebook's markdown cells and not its code or outputs; a build with the catalogs
  shows the translation, the glued number pasted from the English build's execution (nothing executes twice),
  the same outputs, a language switch both ways; a changed English paragraph shows in English (never the stale
  translation), is counted fuzzy, and fails the check while its page is in the manifest.
- The checkers: a translation that loses a glue role, code span, math or link is reported; a translation
  against locale/zh_CN/TERMS.md is reported (mutations of the real glossary translation).
- The real catalogs: every page of the manifest (the glossary) 100 % translated and 0 fuzzy against the
  current English text, every translation keeps its glue roles and code, the glossary follows TERMS.md;
  code cells, outputs and PTX excerpts are no messages.
- The built book, where `make book` has run: both editions, a working switch on every page, the same outputs.
"""
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the Chinese edition's tools need the book's environment")
read_po = pytest.importorskip("babel.messages.pofile",
                              reason="the Chinese edition's tools need Babel (Sphinx's own dependency)").read_po

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402

LANG = "zh_CN"
TOOLS = ROOT / "tools"


# ------------------------------------------------------------------------------------ the checkers

def test_lost_tokens():
    en = ("The answer is {glue:text}`answer:.1f` (see {doc}`setup`), computed by `mapa` and `ld.shared::cluster`; "
          "[the table](#tab) has $x^2$.")
    good = "答案是 {glue:text}`answer:.1f`（见 {doc}`安装 <setup>`），由 `ld.shared::cluster` 和 `mapa` 算出；[表](#tab) 中有 $x^2$。"
    assert i18n.lost_tokens(en, good) == []
    assert i18n.lost_tokens(en, good.replace("{glue:text}`answer:.1f`", "42.0")) == ["{glue:text}`answer:.1f`"]
    assert i18n.lost_tokens(en, good.replace("`mapa`", "mapa")) == ["`mapa`"]
    assert i18n.lost_tokens(en, good.replace("{doc}`安装 <setup>`", "安装")) == ["{doc}`…setup…`"]
    assert i18n.lost_tokens(en, good.replace("(#tab)", "(#other)")) == ["link to #tab"]
    assert i18n.lost_tokens(en, good.replace("$x^2$", "x^2")) == ["$x^2$"]
    twice = "`a` or `a`"
    assert i18n.lost_tokens(twice, "`a`") == ["`a`"] and i18n.lost_tokens(twice, "") == ["`a` (x2)"]


def test_prose_and_code_only_messages():
    assert not i18n.needs_translation("1")
    assert not i18n.needs_translation("`where_am_i_kernel`, `grid_ids_kernel`")
    assert not i18n.needs_translation("{glue:text}`x` / {glue:text}`y`")
    assert i18n.needs_translation("[2-D blocks](#p0-2d)")
    assert i18n.needs_translation("GPU")


def glossary_entries():
    with (i18n.po_path("book/glossary", LANG)).open("rb") as f:
        catalog = read_po(f)
    return [(m.id, m.string) for m in catalog if m.id]


TERMS = i18n.load_terms(ROOT / "locale" / LANG / "TERMS.md")


def test_terms_table():
    by_english = {t.english[0]: t for t in TERMS}
    for kept in ["CTA", "CGA", "mbarrier", "TMA", "warp", "warpgroup", "PTX", "SASS", "wgmma", "tcgen05", "MMA"]:
        assert by_english[kept].kept, kept
    assert by_english["CLC"].first == ["簇启动控制", "CLC"]
    assert by_english["DSMEM"].first == ["分布式共享内存", "DSMEM"]
    assert by_english["TMEM"].first == ["张量内存", "TMEM"]
    assert by_english["thread-block cluster"].chinese == ["簇"] and by_english["thread-block cluster"].first == ["线程块簇"]
    for english, chinese in [("multicast", "组播"), ("shared memory", "共享内存"), ("barrier", "屏障"),
                             ("phase", "相位"), ("pipeline", "流水线"), ("relaxed", "宽松")]:
        assert by_english[english].chinese == [chinese]
    assert "张量内存加速器" in by_english["TMA"].avoid and "集群" in by_english["thread-block cluster"].avoid


def test_glossary_follows_the_terms():
    assert i18n.term_problems(glossary_entries(), TERMS) == []


@pytest.mark.parametrize("old, new, expected", [
    ("组播", "广播", "'multicast' must read 组播"),                                  # the seed's mistake
    ("线程块簇", "集群", "'集群'"),
    ("线程块簇", "簇", "first mention of 'thread-block cluster' on the page must say 线程块簇"),
    ("DSMEM（分布式共享内存）", "DSMEM", "first mention of 'DSMEM'"),
    ("张量内存（TMEM）", "张量内存", "first mention of 'TMEM' on the page must say 张量内存 and TMEM"),
    ("四个 warp", "四个线程束", "'warp' must read warp"),
    ("主 CTA 执行等待", "引导 CTA 执行等待", "'引导 CTA'"),
    ("TMA（tensor memory accelerator）：", "张量内存加速器：", "'张量内存加速器'"),
])
def test_term_checker_catches(old, new, expected):
    entries = glossary_entries()
    hit = [i for i, (_, zh) in enumerate(entries) if old in zh]
    assert hit, old
    i = hit[0]
    entries[i] = (entries[i][0], entries[i][1].replace(old, new, 1))
    found = i18n.term_problems(entries, TERMS)
    assert any(expected in p for p in found), found


def test_translate_markdown_finds_every_message():
    """The slides' route (translated copies of markdown): every translated message of the glossary is found in
    its source, whitespace and indentation as they are; one whose English changed stays English."""
    table = i18n.translations("book/glossary", LANG)
    src = (ROOT / "book" / "glossary.md").read_text(encoding="utf8")
    out = i18n.translate_markdown(src, table)
    assert all(zh in out for zh in table.values())
    assert "Cooperative thread array" not in out and "```{glossary}" in out
    changed = src.replace("Cooperative thread array: a thread block.", "Cooperative thread array: a block.")
    out = i18n.translate_markdown(changed, table)
    assert "Cooperative thread array: a block." in out and "也就是 CUDA 里的线程块" not in out


# ------------------------------------------------------------------------ the route on a tiny book

NB_TEXT = "The answer is {glue:text}`answer` and it uses `mapa` to translate.\n\n- a list item with `x`\n"
# an exercise (sphinx-exercise, as in the book) whose title is a message of its own; its solution is code only
NB_EXERCISE = ("````{exercise} Who holds it?\n:label: ex-tiny\n\nCount them.\n````\n\n"
               "````{solution} ex-tiny\n:class: dropdown\n\n`4`\n````\n")


def _tiny_book(root: Path):
    (root / "_config.yml").write_text(
        "title: tiny\nonly_build_toc_files: true\nexclude_patterns: [_build, locale]\n"
        "execute:\n  execute_notebooks: cache\n"
        "sphinx:\n  extra_extensions: [sphinx_exercise]\n  local_extensions:\n    i18n_sphinx: " + str(TOOLS) + "\n"
        "  config:\n    nb_kernel_rgx_aliases: {'.*': python3}\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: page\nchapters:\n  - file: nb\n")
    (root / "page.md").write_text("# A page\n\nA paragraph with `inline code` and a [link](nb.ipynb).\n")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# The notebook\n\n" + NB_TEXT),
                nbformat.v4.new_code_cell("from myst_nb import glue\nglue('answer', 6 * 7, display=False)\n"
                                          "print('output stays English')"),
                nbformat.v4.new_markdown_cell("```text\nmapa.u64 %rd2, %rd1, %r3;\n```\n\nLast words.\n\n" + NB_EXERCISE)]
    nbformat.write(nb, str(root / "nb.ipynb"))
    (root / "locale" / LANG).mkdir(parents=True)
    (root / "locale" / LANG / "translated.txt").write_text("page\nnb\n")
    (root / "locale" / LANG / "edition.yml").write_text("landing_note: 图中标签仍为英文。\n")


ZH = {"A page": "一页", "A paragraph with `inline code` and a [link](nb.ipynb).": "一段文字，含 `inline code` 和[链接](nb.ipynb)。",
      "The notebook": "笔记本",
      "The answer is {glue:text}`answer` and it uses `mapa` to translate.": "答案是 {glue:text}`answer`，地址由 `mapa` 转换。",
      "a list item with `x`": "含 `x` 的列表项", "Last words.": "结语。",
      "Who holds it?": "谁持有它？", "Count them.": "数一数。"}


def _translate(root: Path, changes: dict):
    from babel.messages.pofile import read_po as rp
    for doc in ("page", "nb"):
        path = i18n.po_path(doc, LANG, root / "locale")
        with path.open("rb") as f:
            cat = rp(f, locale=LANG)
        for m in cat:
            if m.id in changes:
                m.string = changes[m.id]
                m.flags.discard("fuzzy")
        i18n.write_catalog(cat, path)


def _english_build(root: Path):
    import subprocess
    done = subprocess.run(i18n.jupyter_book() + ["build", str(root), "-W"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _text(path: Path) -> str:
    page = path.read_text(encoding="utf8")
    body = re.search(r"<article.*?</article>", page, re.S).group(0)
    return " ".join(re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", body, flags=re.S)).split())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tinybook")
    _tiny_book(root)
    log = _english_build(root)
    assert "Executing notebook" in log
    pot = i18n.extract(root)
    i18n.update(LANG, pot, root / "locale", log=None)
    _translate(root, ZH)
    site = i18n.build(LANG, root, log=None)
    return root, pot, site


def test_route_extracts_markdown_cells_not_code(tiny):
    root, pot, _ = tiny
    ids = [m.id for m in i18n.templates(pot, root)["nb"] if m.id]
    assert ids == ["The notebook", "The answer is {glue:text}`answer` and it uses `mapa` to translate.",
                   "a list item with `x`", "Last words.",              # no code, no output, no PTX block
                   "Who holds it?", "Count them.", "`4`"]             # the exercise's title is a message


def test_update_starts_only_the_pages_asked_for(tiny, tmp_path):
    root, pot, _ = tiny
    assert i18n.update(LANG, pot, tmp_path, log=None) == []                 # no catalog yet, none in a manifest
    written = i18n.update(LANG, pot, tmp_path, log=None, docs=["nb"])
    assert [Path(w).name for w in written] == ["nb.po"] and not i18n.po_path("page", LANG, tmp_path).exists()
    with pytest.raises(ValueError, match="pages of the book"):
        i18n.update(LANG, pot, tmp_path, log=None, docs=["nope"])


def test_edition_shows_translation_with_the_same_execution(tiny):
    root, pot, site = tiny
    zh, en = _text(site / "nb.html"), _text(root / "_build" / "html" / "nb.html")
    assert "答案是 42 ，地址由 mapa 转换。" in zh                # the glued number, pasted in the translation
    assert "The answer is 42 and it uses mapa to translate." in en
    for shared in ("output stays English", "mapa.u64 %rd2, %rd1, %r3;", "glue ( 'answer' , 6 * 7"):
        assert shared in zh and shared in en
    assert "The answer is" not in zh and "笔记本" in zh
    page = (site / "nb.html").read_text(encoding="utf8")
    assert '<html lang="zh-CN"' in page
    # the exercise's title, in the exercise and in its solution's title (sphinx-exercise's own words: its catalog)
    titles = re.findall(r'<p class="admonition-title">(.*?)</p>', page)
    assert [" ".join(re.sub(r"<[^>]+>", " ", t).split()) for t in titles] == ["练习 1 (谁持有它？)", "解答 练习 1 (谁持有它？)"]
    assert "Who holds it?" not in page and "数一数。" in zh
    english = (root / "_build" / "html" / "nb.html").read_text(encoding="utf8")
    assert [" ".join(re.sub(r"<[^>]+>", " ", t).split())
            for t in re.findall(r'<p class="admonition-title">(.*?)</p>', english)] == \
        ["Exercise 1 (Who holds it?)", "Solution to Exercise 1 (Who holds it?)"]
    assert "<span>Who holds it?</span>" not in english          # the placeholder leaves nothing in the page
    assert "图中标签仍为英文。" in _text(site / "page.html")         # the landing note, on the root page only
    assert "图中标签仍为英文。" not in zh
    assert i18n.verify_editions(root / "_build" / "html", [LANG]) == []
    rows = {r.doc: r for r in i18n.stats(LANG, pot, root / "locale")}
    assert (rows["nb"].translated, rows["nb"].fuzzy, rows["nb"].untranslated, rows["nb"].code_only) == (6, 0, 0, 1)
    assert i18n.problems(LANG, list(rows.values()), root / "locale") == []


def test_switch_verification_fails_without_the_link(tiny, tmp_path):
    import shutil
    root, _, _ = tiny
    html = tmp_path / "html"
    shutil.copytree(root / "_build" / "html", html)
    page = html / LANG / "nb.html"
    page.write_text(page.read_text(encoding="utf8").replace("i18n-switch", "no-switch"), encoding="utf8")
    (html / "page.html").write_text((html / "page.html").read_text(encoding="utf8")
                                    .replace('href="zh_CN/page.html"', 'href="zh_CN/nb.html"'), encoding="utf8")
    found = i18n.verify_editions(html, [LANG])
    assert any(p.startswith(f"{LANG}/nb.html: language switch to nothing") for p in found), found
    assert any(p.startswith("en/page.html: the switch to zh_CN points to zh_CN/nb.html") for p in found), found


def test_slides_in_chinese(tiny, tmp_path, monkeypatch):
    """`make slides EDITION=zh_CN`: the deck's markdown from the catalogs, the outputs the same."""
    import slides
    root, _, _ = tiny
    monkeypatch.setattr(i18n, "LOCALE", root / "locale")
    monkeypatch.setattr(slides, "EXECUTED", root / "_build" / "jupyter_execute")
    monkeypatch.setattr(slides, "ROOT", root)
    deck = slides.build(root / "nb.ipynb", tmp_path, lang=LANG).read_text(encoding="utf8")
    assert "答案是 42，地址由 <code>mapa</code> 转换。" in deck and "output stays English" in deck
    assert "The answer is" not in deck
    assert "Exercise: 谁持有它？" in deck and "Who holds it?" not in deck


def test_changed_english_falls_back_and_is_counted(tiny):
    root, _, _ = tiny
    path = root / "nb.ipynb"
    original = path.read_text(encoding="utf8")
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("to translate.", "to translate an address.")
    nbformat.write(nb, str(path))
    try:
        log = _english_build(root)
        assert "Executing notebook" not in log                    # a prose edit re-executes nothing
        pot = i18n.extract(root)
        rows = {r.doc: r for r in i18n.stats(LANG, pot, root / "locale")}
        assert (rows["nb"].translated, rows["nb"].fuzzy, rows["nb"].untranslated) == (5, 1, 0)
        assert rows["nb"].stale_catalog
        found = i18n.problems(LANG, list(rows.values()), root / "locale")
        assert found == ["nb: 5/6 prose messages translated, 1 fuzzy, 0 untranslated (it is in the manifest: "
                         "translate them, after `make i18n-update`)"]
        i18n.update(LANG, pot, root / "locale", log=None)
        po = i18n.po_path("nb", LANG, root / "locale").read_text(encoding="utf8")
        assert re.search(r"#: nb.ipynb\n#, fuzzy\n#\| msgid \"The answer is \{glue:text\}`answer` and it uses `mapa` to "
                         r"translate\.\"\nmsgid \"The answer is \{glue:text\}`answer` and it uses `mapa` to "
                         r"translate an address\.\"\nmsgstr \"答案是", po), po
        site = i18n.build(LANG, root, log=None)
        zh = _text(site / "nb.html")
        assert "The answer is 42 and it uses mapa to translate an address." in zh     # English, not stale
        assert "答案是" not in zh and "笔记本" in zh
        # and a translation that drops the glued number is reported in any document
        _translate(root, {"The answer is {glue:text}`answer` and it uses `mapa` to translate an address.":
                          "答案是 42，地址由 `mapa` 转换。"})
        rows = i18n.stats(LANG, pot, root / "locale")
        assert any("the translation lost {glue:text}`answer`" in p for p in i18n.problems(LANG, rows, root / "locale"))
    finally:
        path.write_text(original, encoding="utf8")


def test_edition_refuses_to_execute(tiny):
    root, _, _ = tiny
    path = root / "nb.ipynb"
    original = path.read_text(encoding="utf8")
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[1].source += "\nprint('new code')"
    nbformat.write(nb, str(path))
    try:
        assert i18n.uncached_notebooks(root) == ["nb.ipynb"]
        with pytest.raises(RuntimeError, match="run the English build first"):
            i18n.build(LANG, root, log=None)
    finally:
        path.write_text(original, encoding="utf8")
    assert i18n.uncached_notebooks(root) == []


# -------------------------------------------------------------------------------- the real catalogs

@pytest.fixture(scope="module")
def book_pot():
    return i18n.extract()


def test_catalogs_in_step(book_pot):
    """`make test` fails here when a manifest page (locale/zh_CN/translated.txt) has a fuzzy or untranslated
    paragraph, or any translation lost a glue role or code span, or the manifest breaks TERMS.md."""
    rows = i18n.stats(LANG, book_pot)
    listed = i18n.manifest(LANG)
    report = i18n.format_stats(LANG, rows, listed)
    print(report)
    assert "book/glossary" in listed
    found = i18n.problems(LANG, rows)
    assert found == [], report + "\n" + "\n".join(found)
    glossary = {r.doc: r for r in rows}["book/glossary"]
    assert glossary.prose >= 40 and glossary.percent == 100.0 and glossary.fuzzy == 0


_EXERCISE = re.compile(r"^[ \t>]*(?:`{3,}|:{3,})\{exercise(?:-start)?\}[ \t]+(\S.*?)[ \t]*$", re.M)


def exercise_titles(path: Path) -> list[tuple[int, str]]:
    """(cell index, title) of every ``{exercise}`` with a title in the notebook's markdown cells."""
    nb = nbformat.read(str(path), as_version=4)
    return [(i, m.group(1)) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
            for m in _EXERCISE.finditer(cell.source)]


def test_exercise_titles_are_messages(book_pot):
    """The title of every exercise (the argument of ```` ````{exercise} Masks ````) is a message of its page, so the
    catalogs have it and the Chinese edition can show it translated; solution arguments (labels) are not."""
    found = i18n.templates(book_pot)
    titles = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        ids = {m.id for m in found["notebooks/" + path.stem] if m.id}
        for _, title in exercise_titles(path):
            titles += 1
            assert title in ids, f"{path.name}: the exercise title {title!r} is not a message"
        assert not any(m.startswith("ex-") for m in ids), path.name
    assert titles >= 31


def test_translated_notebooks_translate_exercise_titles():
    """The slides' route: in a notebook of the manifest, translate_notebook replaces every exercise title
    (the directive and its options stay)."""
    done = 0
    for doc in i18n.manifest(LANG):
        path = ROOT / (doc + ".ipynb")
        if not path.exists():
            continue
        nb = nbformat.read(str(path), as_version=4)
        zh = i18n.translate_notebook(nb, doc, LANG)
        table = i18n.translations(doc, LANG)
        for i, title in exercise_titles(path):
            done += 1
            assert title in table, f"{doc}: the exercise title {title!r} has no translation"
            lines = [line for line in zh.cells[i].source.splitlines() if "{exercise}" in line]
            assert any(line.endswith("{exercise} " + table[title]) for line in lines), (doc, title, lines)
            assert not any(line.endswith(" " + title) for line in lines), (doc, title, lines)
    assert done >= 6        # chapter 0 has two, the primer four


def test_code_outputs_and_ptx_are_not_messages(book_pot):
    ids = [m.id for t in i18n.templates(book_pot).values() for m in t if m.id]
    text = "\n".join(i18n.prose(m) for m in ids)        # code named inline in a sentence is fine
    checked = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            blocks = []
            if cell.cell_type == "code":
                blocks = [cell.source]
            elif cell.cell_type == "markdown":           # fenced code and PTX excerpts inside prose
                blocks = re.findall(r"^```[a-z]*\n(.*?)^```", cell.source, re.S | re.M)
            for block in blocks:
                for line in block.splitlines():
                    line = line.strip()
                    if len(line) > 30 and not line.startswith("#") and "`" not in line:
                        checked += 1
                        assert line not in text, f"{path.name}: code became a message: {line!r}"
    assert checked > 200


# -------------------------------------------------------------------------------- the built book

HTML = ROOT / "_build" / "html"


@pytest.mark.skipif(not (HTML / LANG / "index.html").exists(), reason="no Chinese edition built: run `make book`")
def test_built_editions():
    assert i18n.verify_editions(HTML, [LANG]) == []
    zh = _text(HTML / LANG / "book" / "glossary.html")
    assert "术语表" in zh and "Cooperative thread array" not in zh
    assert "图中的标签" in _text(HTML / LANG / "book" / "intro.html")
    en, cn = ((d / "notebooks" / "01-cga-layouts.html").read_text(encoding="utf8") for d in (HTML, HTML / LANG))
    out = re.compile(r'<div class="cell_output docutils container">.*?</div>\s*</div>', re.S)
    assert out.findall(en) == out.findall(cn) and len(out.findall(en)) > 10      # one execution, shared


def test_browser_check_wants_the_switch(tmp_path):
    """With an edition built, tools/browser_check.py fails a page without the language switch (either edition)."""
    import browser_check as bc
    chromium = bc.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run installs it)")
    (tmp_path / LANG).mkdir()
    switch = '<a class="btn btn-sm i18n-switch" href="{}" data-i18n-lang="{}">{}</a>'
    page = "<!DOCTYPE html><html><head><title>p</title></head><body>{}</body></html>"
    (tmp_path / "index.html").write_text(page.format(switch.format("zh_CN/index.html", "zh_CN", "中文")))
    (tmp_path / "plain.html").write_text(page.format("<p>no switch</p>"))
    (tmp_path / LANG / "index.html").write_text(page.format(switch.format("../index.html", "en", "English")),
                                                encoding="utf8")
    (tmp_path / LANG / "plain.html").write_text(page.format("<p>没有切换链接</p>"), encoding="utf8")
    report = bc.check_site(tmp_path, chromium, log=None)
    assert report.pages == 4
    assert sorted((p[0], p[1]) for p in report.problems) == [("plain.html", "no language switch"),
                                                             (f"{LANG}/plain.html", "no language switch")]


def test_a_term_in_another_sense_is_waived_by_a_comment_only():
    """A translator comment ``# terms: other sense: phase`` lets one entry render 'phase' as 阶段 (the doctor's
    compile phase); without it the check demands 相位, and avoided forms are checked either way."""
    entry = ("the compile phase's limit", "编译阶段的时限")
    assert any("'phase' must read 相位" in p for p in i18n.term_problems([entry], TERMS))
    assert i18n.term_problems([(*entry, {"phase"})], TERMS) == []
    assert i18n.term_problems([("a cluster", "一个集群", {"thread-block cluster"})], TERMS)
    setup = i18n.po_path("book/setup", LANG)
    with setup.open("rb") as f:
        waived = [i18n.waived_terms(m) for m in read_po(f) if m.id]
    assert sum("phase" in w for w in waived) == 3, "the doctor's phases in the setup page"


def test_a_longer_term_is_not_a_first_mention_of_the_shorter():
    """簇 inside 簇启动控制 (CLC) is not the page's first mention of a cluster: that is still due where a cluster is
    first named."""
    entries = [("cluster launch control (CLC)", "簇启动控制（CLC）"), ("a cluster of CTAs", "由多个 CTA 组成的簇")]
    found = i18n.term_problems(entries, TERMS)
    assert not any(p.startswith("'cluster launch control") for p in found), found
    assert any(p.startswith("'a cluster of CTAs'") and "线程块簇" in p for p in found), found
    entries[1] = ("a cluster of CTAs", "由多个 CTA 组成的线程块簇")
    assert i18n.term_problems(entries, TERMS) == []
