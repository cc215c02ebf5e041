# One command each: `make run`, `make test`, `make lint`, `make bench`.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

.PHONY: install run test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,spark]'
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/clientmetrics serve --listen 127.0.0.1:9092 --data-dir ./cm-data

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/python bench/ingest.py
