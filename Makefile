# The two commands of the README. Each sets up its own virtual environment (.venv).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# PyPI's Linux wheel of torch is the CUDA build (gigabytes). On a machine without a GPU, install the
# CPU build first:   make book TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (left empty, pip takes torch from the index it is configured with, and keeps a torch already there).
TORCH_INDEX ?=

.PHONY: book test unit notebooks build-check browser-check slides clean

$(STAMP): requirements.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/pip install -q torch --index-url $(TORCH_INDEX))
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

## make book: build the rendered book (HTML in _build/html); fails on a notebook error or a Sphinx warning
book: $(STAMP)
	PYTHONUNBUFFERED=1 $(BIN)/jupyter-book build . --warningiserror --keep-going
	@echo "open _build/html/index.html"

## make test: unit tests, every notebook under nbval, the book build, and the rendered book in a browser
test: unit notebooks build-check

unit: $(STAMP)
	$(BIN)/python -m pytest -q -m "not book" tests

notebooks: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env notebooks/

build-check: book browser-check

## make browser-check: open every page of _build/html in headless Chromium; fail on a missing image,
## a broken internal link or a visible traceback (says SKIPPED if no Chromium is installed)
browser-check: book
	$(BIN)/python tools/browser_check.py _build/html

## make slides: reveal.js slides of every chapter into _build/slides (with outputs after `make book`)
slides: $(STAMP)
	$(BIN)/python tools/slides.py --out _build/slides
	@echo "open _build/slides/index.html"

clean:
	rm -rf _build
