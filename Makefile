# The two commands of the README. Each sets up its own virtual environment (.venv).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# PyPI's Linux wheel of torch is the CUDA build (gigabytes). On a machine without a GPU, install the
# CPU build first:   make book TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (left empty, pip takes torch from the index it is configured with, and keeps a torch already there).
TORCH_INDEX ?=
# The test and book targets' output without ipykernel's TCP warning and nanobind's exit-time leak report
# (tools/quiet.py says how many lines it left out); QUIET= shows everything.
QUIET   ?= $(PY) tools/quiet.py

.PHONY: book test unit blackwell-dry-run notebooks build-check browser-check slides i18n-update i18n-check clean

$(STAMP): requirements.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/pip install -q torch --index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

## make book: build the rendered book (HTML in _build/html) and its Chinese edition (_build/html/zh_CN, from
## locale/zh_CN: the English build's execution reused, nothing executed twice), and print how much of each page is
## translated; fails on a notebook error, a Sphinx warning, or a page without a working language switch
book: $(STAMP)
	PYTHONUNBUFFERED=1 $(QUIET) $(BIN)/jupyter-book build . --warningiserror --keep-going
	$(BIN)/python tools/i18n.py build --lang zh_CN
	@echo "open _build/html/index.html (中文版: _build/html/zh_CN/index.html)"

## make i18n-update: bring locale/zh_CN/LC_MESSAGES/*.po up to the English text (new paragraphs untranslated,
## changed ones fuzzy with the previous English beside them); what a translator runs before translating.
## make i18n-update DOC=notebooks/02-mbarriers: also start that page's catalog
DOC ?=
i18n-update: $(STAMP)
	$(BIN)/python tools/i18n.py update --lang zh_CN $(foreach d,$(DOC),--doc $(d))

## make i18n-check: fail if a page listed in locale/zh_CN/translated.txt has a fuzzy or untranslated paragraph,
## a translation lost a glue role or code span, or breaks locale/zh_CN/TERMS.md (`make unit` runs it too)
i18n-check: $(STAMP)
	$(BIN)/python tools/i18n.py check --lang zh_CN

## make test: unit tests, the Blackwell dry run, every notebook under nbval, the book build, and the rendered
## book in a browser
test: unit blackwell-dry-run notebooks build-check

unit: $(STAMP)
	$(QUIET) $(BIN)/python -m pytest -q -m "not book" tests

## make blackwell-dry-run: no GPU needed. Every tcgen05 test and every tcgen05 doctor check, with a B200
## pretended, up to its launches: arguments validated, plans and descriptors built, each kernel compiled for
## sm_100a with its launch's arguments and checked as the driver would check it, grids sized; nothing runs and
## nothing is compared. One line per check and per test says what it compiled and launched.
blackwell-dry-run: $(STAMP)
	$(QUIET) $(BIN)/python -m multicta_kernels.cli.doctor --dry-run
	$(QUIET) $(BIN)/python -m pytest -q -p no:cacheprovider --blackwell-dry-run tests

notebooks: $(STAMP)
	$(QUIET) $(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env notebooks/

build-check: book slides
	$(BIN)/python tools/browser_check.py _build/html --slides _build/slides --strict

## make browser-check: open every page of _build/html and every deck of _build/slides in headless Chromium;
## fail on a missing image, a broken internal link, a visible traceback, a blank or unreachable slide, or a
## deck that requests anything from a network; report wide code, overflowing tables and small fonts
## (STRICT=1 fails on those too; `make test` sets it). Says SKIPPED if no Chromium is installed
browser-check: book slides
	$(BIN)/python tools/browser_check.py _build/html --slides _build/slides $(if $(STRICT),--strict)

## make slides: reveal.js slides of every chapter into _build/slides (with outputs after `make book`), for
## presenting offline: reveal.js is fetched once (npm pack, SHA-256 checked) and copied beside the decks.
## make slides EDITION=zh_CN: the decks in Chinese (markdown from locale/zh_CN) into _build/slides/zh_CN
EDITION ?=
slides: $(STAMP)
	$(BIN)/python tools/slides.py --out _build/slides$(if $(EDITION),/$(EDITION) --lang $(EDITION))
	@echo "open _build/slides/$(if $(EDITION),$(EDITION)/)index.html"

clean:
	rm -rf _build
