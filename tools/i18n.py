#!/usr/bin/env python3
"""The book's translated editions: one source (the notebooks and pages), translation catalogs beside it.

    python tools/i18n.py extract            # the English messages of every document -> _build/i18n/gettext/*.pot
    python tools/i18n.py update [--doc P]   # merge them into locale/zh_CN/LC_MESSAGES/<doc>.po: the catalogs that
                                            # exist, the manifest's, and page P's (what a translator runs)
    python tools/i18n.py stats              # translated / fuzzy / untranslated per document
    python tools/i18n.py check              # fail on an incomplete document of the manifest, a lost glue role or
                                            # code span, or a translation against locale/zh_CN/TERMS.md
    python tools/i18n.py build              # the Chinese edition into _build/html/zh_CN (after the English build)

The route is Sphinx's gettext route through Jupyter Book 1.x: the gettext builder extracts every paragraph,
heading, list item, table cell and exercise title (tools/i18n_sphinx.py) of the pages *and of the notebooks'
markdown cells* as a message (its MyST source: ``msgid``); code cells, their outputs and literal blocks (PTX
excerpts) are not messages. A build with ``language: zh_CN`` and ``locale_dirs: [locale]`` replaces each
message that has a translation (``msgstr``) and is not fuzzy, and leaves every other one in English. So:

- a changed English paragraph has a new ``msgid``: the Chinese edition shows the new English text (never the
  stale translation), ``update`` marks the old translation fuzzy beside it (``#| msgid`` keeps the old English),
  and ``stats`` counts it until a translator has re-translated it and removed the ``fuzzy`` flag;
- the Chinese edition reuses the English build's execution: both builds read the one jupyter-cache
  (``_build/.jupyter_cache``), and ``build`` refuses to start (rather than execute) when a notebook is not in it;
- glued numbers in translated paragraphs are pasted from the same execution (tools/i18n_sphinx.py).

Counts are over *prose* messages: a message with no words outside code spans, roles, math and link targets (a
table cell ``1``, a cell that is only ```scale_kernel```) needs no translation and is counted apart. Documents
listed in ``locale/<lang>/translated.txt`` (the manifest) must be complete: 100 % translated, 0 fuzzy. The
catalogs are written with babel (Sphinx's own dependency), so no gettext tools are needed; ``update`` merges
as ``msgmerge`` does (exact matches kept, near matches fuzzy with the previous English, vanished ones obsolete).
"""
from __future__ import annotations

import argparse
import copy
import io
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale"
LANGS = ("zh_CN",)
DEFAULT_LANG = "zh_CN"


def _paths(root: Path) -> dict:
    build = root / "_build"
    return {"build": build, "work": build / "i18n", "jcache": build / ".jupyter_cache", "html": build / "html"}


# ------------------------------------------------------------------------------------ configuration

def edition_settings(lang: str, locale: Path = LOCALE) -> dict:
    """``locale/<lang>/edition.yml``: the edition's title and landing note."""
    path = locale / lang / "edition.yml"
    return yaml.safe_load(path.read_text(encoding="utf8")) if path.exists() else {}


def book_config(mode: str, lang: str | None = None, root: Path = ROOT, locale: Path | None = None) -> Path:
    """Write the Jupyter Book configuration of one build, derived from ``_config.yml`` (never a copy kept by
    hand): ``mode`` is ``"gettext"`` (extract messages: nothing executes) or ``"edition"`` (the ``lang``
    edition: its catalogs, the English build's jupyter-cache)."""
    locale = locale or root / "locale"
    paths = _paths(root)
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf8"))
    sphinx = config.setdefault("sphinx", {})
    conf = sphinx.setdefault("config", {}) or {}
    sphinx["config"] = conf
    # the generated file lives under _build/: local extension paths must not depend on where it is
    if sphinx.get("local_extensions"):
        sphinx["local_extensions"] = {name: str((root / p).resolve())
                                      for name, p in sphinx["local_extensions"].items()}
    conf["gettext_compact"] = False            # one catalog per document: locale/<lang>/LC_MESSAGES/<doc>.po
    conf.setdefault("project", config.get("title", "book"))
    execute = config.setdefault("execute", {})
    if mode == "gettext":
        execute["execute_notebooks"] = "off"   # prose only: outputs are not messages
        conf["suppress_warnings"] = list(conf.get("suppress_warnings", [])) + ["mystnb.glue"]
        conf["gettext_location"] = True
        name = "gettext.yml"
    elif mode == "edition":
        if not lang:
            raise ValueError("lang: an edition needs a language, one of " + ", ".join(LANGS))
        settings = edition_settings(lang, locale)
        conf["language"] = lang
        conf["locale_dirs"] = [str(locale.resolve())]
        conf["gettext_auto_build"] = True      # Sphinx compiles the .po files into .mo files itself
        if settings.get("landing_note"):
            conf["i18n_landing_note"] = settings["landing_note"].strip()
        if settings.get("title"):
            config["title"] = settings["title"]
        # the English build's execution, wherever this build writes its output
        execute["cache"] = str(Path(execute.get("cache") or paths["jcache"]).resolve())
        name = f"{lang}.yml"
    else:
        raise ValueError(f"mode: 'gettext' or 'edition', not {mode!r}")
    out = paths["work"] / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf8")
    return out


def jupyter_book() -> list[str]:
    exe = Path(sys.executable).with_name("jupyter-book")
    return [str(exe)] if exe.exists() else ["jupyter-book"]


# --------------------------------------------------------------------------------------- extraction

def extract(root: Path = ROOT, quiet: bool = True) -> Path:
    """Run the gettext builder over the book (nothing executes); return the folder of the ``.pot`` files. Every
    page is read again (``--all``: seconds, since nothing executes): a doctree cached by an earlier extraction
    would miss what a changed extension now marks as a message (the exercise titles of tools/i18n_sphinx.py)."""
    paths = _paths(root)
    config = book_config("gettext", root=root)
    out = paths["work"] / "gettext-build"
    cmd = jupyter_book() + ["build", str(root), "--config", str(config), "--path-output", str(out),
                            "--builder", "custom", "--custom-builder", "gettext", "--all"]
    done = subprocess.run(cmd, cwd=root, capture_output=quiet, text=True)
    if done.returncode:
        tail = (done.stdout or "")[-3000:] + (done.stderr or "")[-3000:] if quiet else ""
        raise RuntimeError(f"message extraction failed ({' '.join(cmd)}):\n{tail}")
    return out / "_build" / "gettext"


def templates(pot_dir: Path, root: Path | None = None) -> dict[str, Catalog]:
    """docname -> its template catalog (messages in page order; locations relative to the book's folder:
    ``root``, by default the nearest folder above ``pot_dir`` with a ``_config.yml``)."""
    found = {}
    pot_dir = Path(pot_dir).resolve()
    root = root or next((p for p in pot_dir.parents if (p / "_config.yml").exists()), ROOT)
    for pot in sorted(pot_dir.rglob("*.pot")):
        doc = pot.relative_to(pot_dir).with_suffix("").as_posix()
        with pot.open("rb") as f:
            catalog = read_po(f)
        for msg in catalog:
            locs = []
            for path, line in msg.locations:
                full = (pot_dir / path).resolve()      # Sphinx writes them relative to its output folder
                try:
                    path = full.relative_to(root.resolve()).as_posix()
                except ValueError:
                    pass
                if (path, line) not in locs:
                    locs.append((path, line))
            msg.locations = locs
        found[doc] = catalog
    return found


def po_path(doc: str, lang: str, locale: Path = LOCALE) -> Path:
    return locale / lang / "LC_MESSAGES" / (doc + ".po")


def merged(template: Catalog, po: Path, lang: str) -> Catalog:
    """The catalog ``po`` brought up to ``template`` (in memory), as ``msgmerge`` would."""
    if po.exists():
        with po.open("rb") as f:
            catalog = read_po(f, locale=lang)
    else:
        catalog = Catalog(locale=lang, project=template.project, version=template.version,
                          creation_date=template.creation_date, fuzzy=False,
                          header_comment=f"# {lang} translation of a page of the book (tools/i18n.py writes this file:\n"
                                         f"# translate msgstr, remove the fuzzy flag; locale/{lang}/TERMS.md has the terms).")
    catalog.update(template, no_fuzzy_matching=False, update_creation_date=False)
    return catalog


def _po_bytes(catalog: Catalog) -> bytes:
    for msg in list(catalog) + list(catalog.obsolete.values()):
        # babel guesses python-(brace-)format from `{glue:text}` or `%`: these are MyST, not format strings
        msg.flags.discard("python-format")
        msg.flags.discard("python-brace-format")
    buf = io.BytesIO()
    write_po(buf, catalog, width=100, include_previous=True, include_lineno=False, ignore_obsolete=False)
    return buf.getvalue()


def write_catalog(catalog: Catalog, path: Path) -> bool:
    """Write ``catalog`` to ``path`` (no line numbers, so an edit above a paragraph does not touch its
    entry; the previous English of a fuzzy entry kept as ``#|``). Return whether the file changed."""
    text = _po_bytes(catalog)
    if path.exists() and path.read_bytes() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)
    return True


def update(lang: str, pot_dir: Path, locale: Path = LOCALE, log=print, docs: list[str] | None = None) -> list[str]:
    """Merge the templates into ``locale/<lang>/LC_MESSAGES``: the catalogs that exist, those of the manifest, and
    those of ``docs`` (a translator starting a page: its catalog is created). Return the catalogs written.
    A page nobody has started has no catalog: it counts as untranslated, and nothing of it goes stale."""
    written = []
    found = templates(pot_dir)
    unknown = sorted(set(docs or []) - set(found))
    if unknown:
        raise ValueError(f"doc: pages of the book (e.g. notebooks/02-mbarriers), not {', '.join(unknown)}")
    wanted = set(docs or []) | set(manifest(lang, locale))
    for doc, template in found.items():
        path = po_path(doc, lang, locale)
        if not path.exists() and doc not in wanted:
            continue
        if write_catalog(merged(template, path, lang), path):
            written.append(str(path.relative_to(locale.parent) if locale.parent in path.parents else path))
    if log:
        log(f"i18n {lang}: {len(written)} catalogs updated" + "".join(f"\n  {w}" for w in written))
    return written


# ----------------------------------------------------------------------- what a translation must keep

ROLE = re.compile(r"\{([A-Za-z][\w:.+-]*)\}(`+)(.+?)(?<!`)\2(?!`)", re.S)
CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
MATH = re.compile(r"(?<![\\$\w])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$(?![$\w])")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
URL = re.compile(r"<?https?://[^\s)>]+>?")


def tokens(text: str) -> Counter:
    """What a translated message must keep of its English one: every glue role (by key), every other role
    (by name and target), every inline code span, every inline math span and every link target."""
    found = Counter()

    def role(m):
        name, body = m.group(1), m.group(3)
        if name.startswith("glue"):
            found[("glue", name, body.strip())] += 1
        else:
            target = re.search(r"<([^<>]+)>\s*$", body)
            found[("role", name, (target.group(1) if target else body).strip())] += 1
        return " "

    rest = ROLE.sub(role, text)

    def code(m):
        body = m.group(2)
        if body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]
        found[("code", body)] += 1
        return " "

    rest = CODE.sub(code, rest)
    for m in MATH.finditer(rest):
        found[("math", m.group(1).strip())] += 1
    for m in LINK.finditer(rest):
        found[("link", m.group(1))] += 1
    return found


def lost_tokens(msgid: str, msgstr: str) -> list[str]:
    """The roles, code spans, math and link targets of ``msgid`` that ``msgstr`` does not have."""
    missing = tokens(msgid) - tokens(msgstr)
    out = []
    for tok, n in missing.items():
        kind = tok[0]
        if kind == "glue":
            what = f"{{{tok[1]}}}`{tok[2]}`"
        elif kind == "role":
            what = f"{{{tok[1]}}}`…{tok[2]}…`"
        elif kind == "code":
            what = f"`{tok[1]}`"
        elif kind == "math":
            what = f"${tok[1]}$"
        else:
            what = f"link to {tok[1]}"
        out.append(what + (f" (x{n})" if n > 1 else ""))
    return out


def prose(text: str) -> str:
    """``text`` without roles, code spans, math, link targets, URLs: the words a translator translates."""
    rest = ROLE.sub(" ", text)
    rest = CODE.sub(" ", rest)
    rest = MATH.sub(" ", rest)
    rest = LINK.sub("]", rest)
    rest = URL.sub(" ", rest)
    return rest


def needs_translation(msgid: str) -> bool:
    """A prose message: it has words outside code, roles, math and link targets."""
    return bool(re.search(r"[A-Za-z]{2,}", prose(msgid)))


# -------------------------------------------------------------------------------------- terminology

@dataclass
class Term:
    english: list[str]            # the forms looked for in the English text
    chinese: list[str]            # one of them must be in the translation
    first: list[str]              # all of them in the first mention on a page
    avoid: list[str]              # never in the translation
    note: str = ""

    @property
    def kept(self) -> bool:
        return [c.lower() for c in self.chinese] == [e.lower() for e in self.english[:1]]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _alternatives(cell: str, sep: str = "/") -> list[str]:
    cell = cell.strip()
    if cell in ("", "—", "-"):
        return []
    return [a.strip() for a in cell.split(sep) if a.strip()]


def load_terms(path: Path) -> list[Term]:
    """The table of ``TERMS.md``: the rows of the first Markdown table whose header starts with English."""
    terms, in_table = [], False
    for line in Path(path).read_text(encoding="utf8").splitlines():
        if not line.strip().startswith("|"):
            if in_table and terms:
                break
            continue
        cells = _cells(line)
        if not in_table:
            in_table = cells[0].lower().startswith("english")
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        cells += [""] * (5 - len(cells))
        terms.append(Term(_alternatives(cells[0]), _alternatives(cells[1]), _alternatives(cells[2], "+"),
                          _alternatives(cells[3]), cells[4]))
    if not terms:
        raise ValueError(f"{path}: no terminology table (a Markdown table whose first column is 'English')")
    return terms


def _is_acronym(form: str) -> bool:
    return form.upper() == form and any(ch.isalpha() for ch in form)


def _english_pattern(form: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s-]+", form)]
    body = r"[\s-]+".join(words)
    flags = 0 if _is_acronym(form) or any(ch.isdigit() for ch in form) else re.I
    return re.compile(r"(?<![\w-])" + body + r"(?:s|es)?(?![\w-])", flags)


def _chinese_pattern(form: str) -> re.Pattern:
    if re.fullmatch(r"[\x00-\x7f]+", form):        # an English form kept in the translation
        words = [re.escape(w) for w in re.split(r"[\s-]+", form)]
        return re.compile(r"(?<![A-Za-z0-9_])" + r"[\s-]*".join(words) + r"(?![A-Za-z0-9_])",
                          0 if _is_acronym(form) else re.I)
    return re.compile(re.escape(form))


def terms_in_english(text: str, terms: list[Term]) -> set[int]:
    """Indices of the terms ``text`` mentions (longest match first: ``distributed shared memory`` is DSMEM,
    not also shared memory; ``tensor memory accelerator`` is TMA, not tensor memory)."""
    text = prose(text)
    spans = []
    for i, term in enumerate(terms):
        for form in term.english:
            for m in _english_pattern(form).finditer(text):
                spans.append((m.end() - m.start(), m.start(), m.end(), i))
    taken, found = [], set()
    for _, a, b, i in sorted(spans, key=lambda s: (-s[0], s[1])):
        if all(b <= x or a >= y for x, y in taken):
            taken.append((a, b))
            found.add(i)
    return found


def _mentions(text: str, forms: list[str]) -> bool:
    return any(_chinese_pattern(f).search(text) for f in forms)


def _without_longer(text: str, term: Term, terms: list[Term]) -> str:
    """``text`` with the renderings of other terms that contain this one blanked out: 簇 inside 簇启动控制 (CLC)
    is not a mention of a cluster, so it does not count as the page's first mention of 线程块簇."""
    mine = term.chinese + term.first
    longer = {f for t in terms if t is not term for f in t.chinese + t.first
              if any(m != f and m in f for m in mine)}
    for form in sorted(longer, key=len, reverse=True):
        text = text.replace(form, "\u3000" * len(form))
    return text


def waived_terms(message) -> set[str]:
    """The terms a translator comment says this entry uses in another sense, so that TERMS.md's rendering
    is not required there: a line ``# terms: other sense: phase, release`` above the entry in the catalog
    (the doctor's compile *phase* is 阶段, not an mbarrier's 相位). Avoided forms and first mentions are
    still checked."""
    out = set()
    for line in getattr(message, "user_comments", ()) or ():
        m = re.match(r"\s*terms:\s*other sense:\s*(.+)", line)
        if m:
            out |= {w.strip().lower() for w in m.group(1).split(",") if w.strip()}
    return out


def term_problems(entries: list[tuple[str, str]], terms: list[Term]) -> list[str]:
    """The terminology problems of one page's translated messages (``(msgid, msgstr)`` in page order)."""
    problems, first_seen = [], set()
    for msgid, msgstr, *waived in entries:
        waived = set(waived[0]) if waived else set()
        said = prose(msgstr)
        short = " ".join(msgid.split())[:60]
        for i in sorted(terms_in_english(msgid, terms)):
            term = terms[i]
            if term.chinese and not _mentions(said, term.chinese) and term.english[0].lower() not in waived:
                problems.append(f"{short!r}: '{term.english[0]}' must read {' or '.join(term.chinese)}")
        for i, term in enumerate(terms):
            for bad in term.avoid:
                if bad in said:
                    problems.append(f"{short!r}: {bad!r} (for '{term.english[0]}': use {' / '.join(term.chinese)})")
            own = _without_longer(said, term, terms)
            if term.first and i not in first_seen and _mentions(own, term.chinese + term.first):
                first_seen.add(i)
                missing = [f for f in term.first if not _mentions(own, [f])]
                if missing:
                    problems.append(f"{short!r}: first mention of '{term.english[0]}' on the page must say "
                                    f"{' and '.join(term.first)} (missing {', '.join(missing)})")
    return problems


# -------------------------------------------------------------------------------------------- counts

@dataclass
class DocStats:
    doc: str
    prose: int = 0
    translated: int = 0
    fuzzy: int = 0
    untranslated: int = 0
    code_only: int = 0
    stale_catalog: bool = False          # the .po on disk differs from the merge (run `update`)
    lost: list = field(default_factory=list)
    entries: list = field(default_factory=list)   # (msgid, msgstr) of the translated prose, in page order

    @property
    def percent(self) -> float:
        return 100.0 * self.translated / self.prose if self.prose else 100.0

    @property
    def complete(self) -> bool:
        return self.fuzzy == 0 and self.untranslated == 0


def doc_stats(doc: str, template: Catalog, lang: str, locale: Path = LOCALE) -> DocStats:
    path = po_path(doc, lang, locale)
    catalog = merged(template, path, lang)
    st = DocStats(doc)
    if path.exists():
        st.stale_catalog = _po_bytes(catalog) != path.read_bytes()
    for msg in template:
        if not msg.id:
            continue
        if not needs_translation(msg.id):
            st.code_only += 1
            continue
        st.prose += 1
        have = catalog.get(msg.id)
        if have is None or not have.string:
            st.untranslated += 1
        elif have.fuzzy:
            st.fuzzy += 1
        else:
            st.translated += 1
            st.entries.append((msg.id, have.string, waived_terms(have)))
            for what in lost_tokens(msg.id, have.string):
                st.lost.append(f"{' '.join(msg.id.split())[:60]!r}: the translation lost {what}")
    return st


def manifest(lang: str, locale: Path = LOCALE) -> list[str]:
    """The documents of ``locale/<lang>/translated.txt``: the ones that must be complete."""
    path = locale / lang / "translated.txt"
    if not path.exists():
        return []
    return [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf8").splitlines()
            if line.split("#", 1)[0].strip()]


def stats(lang: str, pot_dir: Path, locale: Path = LOCALE) -> list[DocStats]:
    return [doc_stats(doc, t, lang, locale) for doc, t in templates(pot_dir).items()]


def format_stats(lang: str, rows: list[DocStats], listed: list[str]) -> str:
    width = max([len(r.doc) for r in rows] + [8])
    lines = [f"i18n {lang}: prose messages per document (code-only messages need no translation)",
             f"  {'document':<{width}}  {'prose':>5}  {'translated':>15}  {'fuzzy':>5}  {'untranslated':>12}  "
             f"{'code-only':>9}"]
    tot = DocStats("total")
    for r in rows:
        mark = "  [manifest]" if r.doc in listed else ""
        lines.append(f"  {r.doc:<{width}}  {r.prose:>5}  {r.translated:>6} ({r.percent:5.1f} %)  {r.fuzzy:>5}  "
                     f"{r.untranslated:>12}  {r.code_only:>9}{mark}")
        for k in ("prose", "translated", "fuzzy", "untranslated", "code_only"):
            setattr(tot, k, getattr(tot, k) + getattr(r, k))
    lines.append(f"  {'total':<{width}}  {tot.prose:>5}  {tot.translated:>6} ({tot.percent:5.1f} %)  {tot.fuzzy:>5}  "
                 f"{tot.untranslated:>12}  {tot.code_only:>9}")
    stale = [r.doc for r in rows if r.stale_catalog]
    if stale:
        lines.append(f"  {len(stale)} catalogs behind the English text: `make i18n-update` refreshes them")
    return "\n".join(lines)


def problems(lang: str, rows: list[DocStats], locale: Path = LOCALE) -> list[str]:
    """What fails the check: a manifest document that is not complete (or does not exist), a translation that
    lost a glue role, code span, math or link (in any document), a manifest document against TERMS.md."""
    out = []
    by_doc = {r.doc: r for r in rows}
    terms_path = locale / lang / "TERMS.md"
    terms = load_terms(terms_path) if terms_path.exists() else []
    for doc in manifest(lang, locale):
        r = by_doc.get(doc)
        if r is None:
            out.append(f"{doc}: listed in locale/{lang}/translated.txt but not a document of the book")
            continue
        if not r.complete:
            out.append(f"{doc}: {r.translated}/{r.prose} prose messages translated, {r.fuzzy} fuzzy, "
                       f"{r.untranslated} untranslated (it is in the manifest: translate them, "
                       f"after `make i18n-update`)")
        for p in term_problems(r.entries, terms):
            out.append(f"{doc}: {p}")
    for r in rows:
        out += [f"{r.doc}: {p}" for p in r.lost]
    return out


# ------------------------------------------------------------------------- translated copies (slides)

def translations(doc: str, lang: str, locale: Path | None = None) -> dict[str, str]:
    """msgid -> msgstr of ``doc``'s catalog, as the Chinese build uses it: translated and not fuzzy."""
    path = po_path(doc, lang, locale or LOCALE)
    if not path.exists():
        return {}
    with path.open("rb") as f:
        catalog = read_po(f, locale=lang)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy and m.string != m.id}


# Where a message starts in MyST source: a line (after indentation, quote marks, a list marker or a heading's
# hashes), a table cell, or a directive's argument; it ends at the end of a line or of a table cell.
_START = r"(?:^[ \t>]*(?:(?:[-*+]|\d+[.)]|#{1,6})[ \t]+)?|\|[ \t]*|^[ \t]*(?:`{3,}|:{3,})\{[\w:.-]+\}[ \t]+)"
_END = r"(?=[ \t]*(?:\||$))"


def translate_markdown(text: str, table: dict[str, str]) -> str:
    """``text`` (MyST source: a markdown cell, a page) with every message of ``table`` replaced by its
    translation. Sphinx's message is the source of a paragraph, heading, list item or table cell with its line
    breaks turned into spaces: it is found again with any whitespace between its words. Longest first; a message
    not found (its English has changed since) stays English, as in the Chinese build."""
    for msgid in sorted(table, key=len, reverse=True):
        words = msgid.split()
        if not words:
            continue
        pattern = re.compile("(" + _START + ")" + r"\s+".join(re.escape(w) for w in words) + _END, re.M)
        text = pattern.sub(lambda m, s=table[msgid]: m.group(1) + s, text)
    return text


def translate_notebook(nb, doc: str, lang: str, locale: Path | None = None):
    """A copy of the notebook node ``nb`` (document ``doc``, e.g. ``notebooks/02-mbarriers``) whose markdown cells
    read in ``lang``; code cells and outputs untouched."""
    table = translations(doc, lang, locale)
    nb = copy.deepcopy(nb)
    if table:
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = translate_markdown(cell.source, table)
    return nb


# ------------------------------------------------------------------------------------- the built site

_SWITCH = re.compile(r'<a class="btn btn-sm i18n-switch" href="([^"]+)"[^>]*data-i18n-lang="([^"]+)"')
_REDIRECT = re.compile(r"<meta\s+http-equiv=[\"']?refresh", re.I)


def verify_editions(html: Path, langs=LANGS) -> list[str]:
    """Every page of every edition under ``html`` (English at the top, ``<lang>/`` for the others) links, in its
    language switch, to the same page of each other edition, and that page exists. Return the problems."""
    html = Path(html).resolve()
    sites = {"en": html, **{lang: html / lang for lang in langs}}
    problems = []
    for lang, site in sites.items():
        if not (site / "index.html").exists():
            problems.append(f"{lang}: no edition at {site}")
            continue
        others = set(sites) - {lang}
        pages = 0
        for page in sorted(site.rglob("*.html")):
            rel = page.relative_to(site)
            if {"_static", "_sources", "_images"} & set(rel.parts) or (lang == "en" and rel.parts[0] in langs):
                continue
            text = page.read_text(encoding="utf8", errors="replace")
            if _REDIRECT.search(text[:4000]):
                continue
            pages += 1
            links = {to: href for href, to in _SWITCH.findall(text)}
            if set(links) != others:
                problems.append(f"{lang}/{rel}: language switch to {sorted(links) or 'nothing'}, "
                                f"expected {sorted(others)}")
                continue
            for to, href in links.items():
                target = (page.parent / href).resolve()
                want = (sites[to] / rel).resolve()
                if target != want:
                    problems.append(f"{lang}/{rel}: the switch to {to} points to {href}, not the same page")
                elif not target.exists():
                    problems.append(f"{lang}/{rel}: the switch to {to} points to {href}, which does not exist")
        if not pages:
            problems.append(f"{lang}: no pages in {site}")
    return problems


# ------------------------------------------------------------------------------------------- building

def notebooks_of_toc(root: Path = ROOT) -> list[Path]:
    toc = (root / "_toc.yml").read_text(encoding="utf8")
    files = re.findall(r"(?:file|root):\s*(\S+)", toc)
    return [root / (f + ".ipynb") for f in files if (root / (f + ".ipynb")).exists()]


def uncached_notebooks(root: Path = ROOT) -> list[str]:
    """The notebooks of the book that the English build's jupyter-cache does not hold as executed now (their
    code changed, or the English build has not run): the edition would have to execute them."""
    import nbformat
    from jupyter_cache import get_cache

    paths = _paths(root)
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf8"))
    jcache = Path((config.get("execute") or {}).get("cache") or paths["jcache"])
    if not jcache.is_absolute():
        jcache = root / jcache
    nbs = notebooks_of_toc(root)
    if not jcache.exists():
        return [str(p.relative_to(root)) for p in nbs]
    cache = get_cache(str(jcache))
    aliases = ((config.get("sphinx") or {}).get("config") or {}).get("nb_kernel_rgx_aliases") or {}
    missing = []
    for path in nbs:
        nb = nbformat.read(str(path), as_version=4)
        name = nb.metadata.get("kernelspec", {}).get("name")
        for rgx, alias in aliases.items():            # as MyST-NB does before it looks in the cache
            if name is not None and re.fullmatch(rgx, name):
                nb.metadata["kernelspec"]["name"] = alias
                break
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            missing.append(str(path.relative_to(root)))
    return missing


def build(lang: str, root: Path = ROOT, strict: bool = True, log=print) -> Path:
    """Build the ``lang`` edition from the English build's execution into ``_build/html/<lang>``."""
    if lang not in LANGS:
        raise ValueError(f"lang: one of {', '.join(LANGS)}, not {lang!r}")
    paths = _paths(root)
    missing = uncached_notebooks(root)
    if missing:
        raise RuntimeError("the English build's execution is missing for " + ", ".join(missing)
                           + ": run the English build first (make book); the edition does not execute notebooks")
    config = book_config("edition", lang, root=root)
    out = paths["work"] / lang
    cmd = jupyter_book() + ["build", str(root), "--config", str(config), "--path-output", str(out)]
    if strict:
        cmd += ["--warningiserror", "--keep-going"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    executed, cached = [], 0
    for line in proc.stdout:
        sys.stdout.write(line)
        if "Executing notebook" in line:
            executed.append(line.split(":")[0])
        if "Using cached notebook" in line:
            cached += 1
    if proc.wait():
        raise RuntimeError(f"the {lang} edition's build failed ({' '.join(cmd)})")
    if executed:
        raise RuntimeError(f"the {lang} edition executed {', '.join(executed)}: it must reuse the English "
                           f"build's execution")
    site = paths["html"] / lang
    if site.exists():
        shutil.rmtree(site)
    shutil.copytree(out / "_build" / "html", site)
    wrong = verify_editions(paths["html"], [lang])
    if wrong:
        raise RuntimeError(f"{len(wrong)} pages without a working language switch:\n  " + "\n  ".join(wrong[:20]))
    if log:
        read = (f"{cached} notebooks read from the English build's execution" if cached
                else "no notebook changed since its last build")
        log(f"i18n {lang}: the edition is in {site.relative_to(root)} ({read}; nothing executed)")
    return site


# ------------------------------------------------------------------------------------------------ CLI

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["extract", "update", "stats", "check", "build", "config"])
    ap.add_argument("--lang", default=DEFAULT_LANG, choices=LANGS)
    ap.add_argument("--pot", type=Path, help="use these .pot files instead of extracting them again")
    ap.add_argument("--doc", action="append", default=[], metavar="PAGE",
                    help="update: also create this page's catalog (e.g. notebooks/02-mbarriers); repeatable")
    args = ap.parse_args(argv)

    if args.command == "config":
        print(book_config("edition", args.lang))
        return 0
    if args.command == "build":
        build(args.lang)
        args.command = "stats"
    pot = args.pot or extract()
    if args.command == "extract":
        print(f"i18n: {len(templates(pot))} templates in {pot}")
        return 0
    if args.command == "update":
        update(args.lang, pot, docs=args.doc)
    rows = stats(args.lang, pot)
    listed = manifest(args.lang)
    print(format_stats(args.lang, rows, listed))
    found = problems(args.lang, rows)
    if found:
        print(f"i18n {args.lang}: {len(found)} problems" + "".join(f"\n  {p}" for p in found))
    if args.command == "check":
        if found:
            return 1
        print(f"i18n {args.lang}: check passed: {', '.join(listed) or 'no document'} complete "
              f"(locale/{args.lang}/translated.txt), every translation keeps its glue roles and code")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, RuntimeError) as e:
        print(f"i18n: {e}", file=sys.stderr)
        sys.exit(1)
