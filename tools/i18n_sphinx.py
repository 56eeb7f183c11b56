"""Sphinx extension for the book's editions (English and 中文), loaded by _config.yml (``local_extensions``).

The Chinese edition is Sphinx's gettext route: the same notebooks and pages, built with ``language: zh_CN``
and the catalogs under ``locale/`` (tools/i18n.py writes its configuration and builds it). This extension
adds the four things that route lacks for this book:

- **glue in translated paragraphs.** Sphinx re-parses a translated paragraph (the ``msgstr``) as a document
  of its own, and MyST-NB parses that document as plain MyST (``<translated>`` in its source name), without
  the notebook's glue data, so a ``{glue:text}`key``` role in a translated paragraph would paste nothing
  (``No key ... found in glue data``). Here that document gets the glue data MyST-NB has just written for the
  notebook (``jupyter_execute/<doc>.glue.json``, from the same execution): the translated paragraph pastes the
  same number as the English one. Only ``{glue:text}`` reads it (the book's prose pastes nothing else inline);
  any other glue role in a translated paragraph stops the build with a message that says so.
- **a language switch** on every page of every edition (search and index pages included): a link in the
  article header to the same page of the other edition (``i18n_editions``: language -> path under the site
  root and link text).
- **the landing note**: in an edition whose ``i18n_landing_note`` is set, a note under the first title of the
  root page (e.g. that figure labels stay in English).
- **exercise titles.** The title of an exercise (the argument of ```` ````{exercise} Masks ````, from
  sphinx-exercise) is no message of Sphinx's: sphinx-exercise builds its title nodes without a source, and its
  post-transforms rebuild them. Here the argument becomes a message of its own (its MyST source, e.g.
  ``Masks``): its parsed text is wrapped in an inline node marked ``translatable``, Sphinx's own placeholder
  for a message inside a node that is not one (the gettext builder keeps it and extracts it; every other
  builder translates it and then unwraps it). The solution's title, which sphinx-exercise copies from the
  exercise as it was parsed, is refreshed from the translated exercise, so "Solution to Exercise 1 (...)"
  reads the translated title too. (Solution arguments are labels, not text.)
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from docutils import nodes

TEMPLATES = Path(__file__).resolve().parent / "i18n_templates"
SWITCH_TEMPLATE = "i18n-switch.html"
# language -> (folder under the site root, the link's text, its tooltip, its hreflang)
DEFAULT_EDITIONS = {
    "en": {"path": "", "label": "English", "title": "Read this page in English", "hreflang": "en"},
    "zh_CN": {"path": "zh_CN", "label": "中文", "title": "阅读本页的中文版", "hreflang": "zh-CN"},
}


def _edition(config) -> str:
    return config.language or "en"


# ---------------------------------------------------------------------------------------------- glue

class _NoRenderer:
    """Stands in for MyST-NB's notebook renderer in a translated paragraph: it carries the glue data and
    refuses everything else with a message (only ``{glue:text}`` needs nothing but the data)."""

    def __init__(self, glue_data: dict, where: str):
        self.renderer = SimpleNamespace(nb_client=SimpleNamespace(glue_data=glue_data))
        self._where = where

    def __getattr__(self, name):
        raise RuntimeError(f"{self._where}: a translated paragraph can paste glue only with {{glue:text}} "
                           f"(tools/i18n_sphinx.py); keep other glue roles and directives outside translated "
                           f"text, or translate the paragraph around them")


def _glue_data(env) -> dict:
    folder = Path(env.mystnb_config.output_folder)
    path = folder.joinpath(*env.docname.split("/")[:-1], env.docname.split("/")[-1] + ".glue.json")
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf8"))


def _patch_mystnb_parser():
    from myst_nb import sphinx_ as mystnb_sphinx

    parser = mystnb_sphinx.Parser
    if getattr(parser.parse, "_i18n_glue", False):
        return
    original = parser.parse

    def parse(self, inputstring, document):
        source = document.current_source or ""
        env = getattr(document.settings, "env", None)
        if not source.endswith("<translated>") or env is None or "nb_renderer" in document:
            return original(self, inputstring, document)
        document.attributes["nb_renderer"] = _NoRenderer(_glue_data(env), source)
        try:
            return original(self, inputstring, document)
        finally:
            document.attributes.pop("nb_renderer", None)

    parse._i18n_glue = True
    parser.parse = parse


# ----------------------------------------------------------------------------------- exercise titles

def mark_exercise_title(node, raw: str, source: str, line: int | None) -> bool:
    """Make the title (the subtitle of sphinx-exercise's title node) of the exercise ``node`` a message whose
    ``msgid`` is ``raw``, the directive's argument as written. Return whether the node had one."""
    from sphinx_exercise.nodes import exercise_subtitle

    title = node.children[0] if node.children else None
    subtitle = next((c for c in getattr(title, "children", []) if isinstance(c, exercise_subtitle)), None)
    if subtitle is None or not raw.strip():
        return False
    inline = nodes.inline(raw, "", translatable=True)
    inline.source, inline.line = source, line
    children = list(subtitle.children)
    subtitle.clear()
    inline.extend(children)
    subtitle += inline
    return True


def _patch_exercise_directive():
    try:
        from sphinx_exercise import directive as exercise
    except ImportError:                                # the book without exercises (the tests' tiny books)
        return
    cls = exercise.ExerciseDirective                   # exercise-start is a subclass: it calls this run
    if getattr(cls.run, "_i18n_title", False):
        return
    original = cls.run

    def run(self):
        out = original(self)
        if self.arguments:
            source, line = self.get_source_info()
            for node in out:
                mark_exercise_title(node, self.arguments[0], source, line)
        return out

    run._i18n_title = True
    cls.run = run


def _refresh_exercise_registry(app, doctree):
    """sphinx-exercise keeps a copy of each exercise as its directive made it, and builds the solution's title
    from that copy: after the translation it is a copy of this page's (translated) exercise."""
    registry = getattr(app.env, "sphinx_exercise_registry", None)
    if not registry:
        return
    from sphinx_exercise.nodes import is_exercise_node

    for node in doctree.findall(is_exercise_node):
        entry = registry.get(node.get("label"))
        if entry is None or entry.get("docname") != app.env.docname:
            continue
        copy = node.deepcopy()
        # doctree-read comes before Sphinx unwraps the placeholders: the solution's title gets the bare text
        for inline in list(copy.findall(lambda n: isinstance(n, nodes.inline) and "translatable" in n)):
            inline.replace_self(inline.children)
        entry["node"] = copy


# ----------------------------------------------------------------------------------- language switch

def _add_templates(app, config):
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.append(str(TEMPLATES))
    static = str(TEMPLATES / "static")
    if static not in config.html_static_path:
        config.html_static_path.append(static)


def switch_links(editions: dict, current: str, pagename: str, target_uri: str) -> list[dict]:
    """The links from ``pagename`` (``target_uri``: its file, relative to its edition's root) of edition
    ``current`` to the same page of every other edition: relative URLs, so the site works from disk."""
    here = editions[current]["path"]
    depth = pagename.count("/") + (len([p for p in here.split("/") if p]) if here else 0)
    up = "../" * depth
    links = []
    for lang, ed in editions.items():
        if lang == current:
            continue
        prefix = (ed["path"].strip("/") + "/") if ed["path"] else ""
        links.append({"href": up + prefix + target_uri, "label": ed["label"], "title": ed.get("title", ""),
                      "hreflang": ed.get("hreflang", lang.replace("_", "-")), "lang": lang})
    return links


def _switch_context(app, pagename, templatename, context, doctree):
    editions = app.config.i18n_editions
    current = _edition(app.config)
    if current not in editions or not hasattr(app.builder, "get_target_uri"):
        return
    context["i18n_switch"] = switch_links(editions, current, pagename, app.builder.get_target_uri(pagename))
    items = context.get("theme_article_header_end")
    if isinstance(items, str):
        items = [s.strip() for s in items.split(",") if s.strip()]
    items = list(items or [])
    if SWITCH_TEMPLATE not in items:
        items.append(SWITCH_TEMPLATE)
    context["theme_article_header_end"] = items


# -------------------------------------------------------------------------------------- landing note

def _landing_note(app, doctree):
    note = app.config.i18n_landing_note
    if not note or app.env.docname != app.config.root_doc:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    box = nodes.note("", *[nodes.paragraph(p, p) for p in note.strip().split("\n\n")], classes=["i18n-landing-note"])
    title = next((i for i, c in enumerate(section.children) if isinstance(c, nodes.title)), -1)
    section.insert(title + 1, box)


def setup(app):
    app.add_config_value("i18n_editions", DEFAULT_EDITIONS, "html")
    app.add_config_value("i18n_landing_note", "", "env")
    app.connect("config-inited", _add_templates)
    app.add_css_file("i18n.css")
    # after the themes' own handlers (pydata turns its template lists into lists at the default priority)
    app.connect("html-page-context", _switch_context, priority=900)
    app.connect("doctree-read", _landing_note)
    app.connect("doctree-read", _refresh_exercise_registry)
    _patch_mystnb_parser()
    _patch_exercise_directive()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
