# The two commands of the README. Each sets up its own virtual environment (.venv).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: book test unit notebooks build-check clean

$(STAMP): requirements.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

## make book: build the rendered book (HTML in _build/html); fails on a notebook error or a Sphinx warning
book: $(STAMP)
	PYTHONUNBUFFERED=1 $(BIN)/jupyter-book build . --warningiserror --keep-going
	@echo "open _build/html/index.html"

## make test: unit tests, every notebook under nbval, and the book build
test: unit notebooks build-check

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests

notebooks: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env notebooks/

build-check: book

clean:
	rm -rf _build
