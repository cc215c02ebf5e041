# One command each: `make run` (the demo), `make serve`, `make test`, `make lint`, `make bench`.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

.PHONY: install run serve test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,spark]'
	touch $@

install: $(VENV)/.installed

# Everything at once, offline: gateway, clients, Spark pipeline and dashboard (Ctrl-C stops).
run: install
	$(BIN)/clientmetrics demo

# The bare standalone gateway.
serve: install
	$(BIN)/clientmetrics serve --listen 127.0.0.1:9092 --data-dir ./cm-data --admin-listen 127.0.0.1:9464

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/python bench/ingest.py
