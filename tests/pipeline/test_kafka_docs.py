"""The docs' Kafka-source commands, run as written, and every way the source can be wrong.

One PLAINTEXT Apache Kafka 4.4 broker for the module, with the docs' topic
(``otlp_metrics``) holding the golden run's first landed file, produced as the
topic exporter writes it. Each ``clientmetrics pipeline … --source kafka``
command of docs/*.md (a fenced block or an inline one) runs in a scratch
directory of its own, relative paths and all; only the broker's address is
replaced. A wrong source ends in one line on stderr and exit 1, within the
budget (``reach.CONNECT_TIMEOUT_S``, 10 s, after the command's start-up).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from peers.kafka import KafkaBroker

from tests.kafka import kafka_broker
from tests.pipeline.golden import golden_batches
from tests.pipeline.topic_records import produce
from tests.procs import MIN_DEADLINE_S, free_port
from tests.spark import KAFKA_SOURCE_MISSING
from tests.synthetic import landing_table

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOPIC = "otlp_metrics"
#: A command of the docs: inline (`…`) or a fenced block's line, continuations joined.
COMMAND = re.compile(r"clientmetrics pipeline (?:run|stream) [^`\n]*--source kafka[^`\n]*")
#: The product's budget and the slack a busy machine gets on top (Python and its imports).
BUDGET_S, SLACK_S = 10.0, 50.0


def docs_commands() -> list[tuple[str, str]]:
    """(doc, command) for every Kafka-source command of docs/*.md, comments dropped."""
    found = []
    for doc in sorted((REPO / "docs").glob("*.md")):
        text = doc.read_text(encoding="utf-8").replace("\\\n", " ")
        for match in COMMAND.finditer(text):
            command = " ".join(match[0].split(" #")[0].split())
            found.append((doc.name, command))
    return found


def test_the_docs_have_kafka_source_commands() -> None:
    docs = {doc for doc, _ in docs_commands()}
    assert {"pipeline.md", "kafka-plugin.md"} <= docs


@pytest.fixture(scope="module")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    if KAFKA_SOURCE_MISSING:
        pytest.skip(KAFKA_SOURCE_MISSING[0])
    yield from kafka_broker(request, tmp_path_factory)


@pytest.fixture(scope="module")
def instances(broker: KafkaBroker) -> set[str]:
    """The docs' topic, holding the golden run's first landed file; its instance ids."""
    admin = AdminClient(broker.client_config())  # kept: the future needs its handle
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(MIN_DEADLINE_S)
    pushes = golden_batches()[0]
    produce(Producer(broker.client_config()), TOPIC, landing_table(pushes))
    return {str(p.client_instance_id) for p in pushes}


def _as_written(command: str, broker: KafkaBroker, scratch: Path) -> str:
    """The command with this broker's address; the files it names, in the scratch dir."""
    words = shlex.split(command)
    if "--command-config" in words:
        config = words[words.index("--command-config") + 1]
        (scratch / config).write_text("security.protocol=PLAINTEXT\n")
    return re.sub(r"(--bootstrap-servers) \S+", rf"\1 {broker.bootstrap}", command)


def _clients(scratch: Path) -> set[str]:
    """The instance ids of the clients table under the docs' default ./cm-data."""
    tables = scratch / "cm-data" / "tables"
    ids: set[str] = set()
    for path in tables.glob("clients/**/*.parquet"):
        ids.update(
            str(v) for v in pq.read_table(path, columns=["client_instance_id"])[0].to_pylist()
        )
    return ids


def _environment() -> dict[str, str]:
    # The reader's installed command on PATH, as after `pip install`.
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("doc", "command"), docs_commands(), ids=[f"{d}-{c.split()[2]}" for d, c in docs_commands()]
)
def test_a_docs_kafka_source_command_runs_as_written(
    broker: KafkaBroker, instances: set[str], tmp_path: Path, doc: str, command: str
) -> None:
    # The relative --data-dir (and the default ./cm-data) reached pyarrow relative:
    # a 226-line traceback, "URI has empty scheme: 'cm-data/checkpoints/...'".
    scratch = tmp_path / "clone"
    scratch.mkdir()
    line = _as_written(command, broker, scratch)
    log = scratch / "pipeline.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", "exec " + line],
            cwd=scratch,
            env=_environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        if " stream " in line:
            deadline = time.monotonic() + 300
            while _clients(scratch) != instances:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: stops between batches
        assert proc.wait(300) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _clients(scratch) == instances, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text()


def _run_kafka(tmp_path: Path, bootstrap: str, *extra: str) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [str(BIN / "clientmetrics"), "pipeline", "run", "--source", "kafka",
         "--bootstrap-servers", bootstrap, "--data-dir", str(tmp_path / "cm-data"), *extra],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.stdout == ""
    return done.returncode, done.stderr, time.monotonic() - started


def test_a_refused_bootstrap_server_is_one_line(tmp_path: Path) -> None:
    # Spark's consumer logged an AdminClient warning a second and never ended.
    port = free_port()
    code, err, elapsed = _run_kafka(tmp_path, f"127.0.0.1:{port}")
    assert (code, err.splitlines()) == (
        1,
        [
            f"clientmetrics pipeline: cannot reach the Kafka cluster at 127.0.0.1:{port}: Could "
            f"not connect to bootstrap server 127.0.0.1:{port} (Connection refused)"
        ],
    )
    assert elapsed < BUDGET_S + SLACK_S


def test_a_silent_bootstrap_server_is_one_line_within_the_budget(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (backlog), never answers
        port = silent.getsockname()[1]
        code, err, elapsed = _run_kafka(tmp_path, f"127.0.0.1:{port}")
    assert code == 1
    assert err.splitlines() == [
        f"clientmetrics pipeline: cannot reach the Kafka cluster at 127.0.0.1:{port}: Could "
        f"not connect to bootstrap server 127.0.0.1:{port} (timed out after 10000 ms waiting "
        "for the ApiVersions response)"
    ]
    assert BUDGET_S <= elapsed < BUDGET_S + SLACK_S


def test_a_topic_that_does_not_exist_is_one_line(broker: KafkaBroker, tmp_path: Path) -> None:
    code, err, elapsed = _run_kafka(tmp_path, broker.bootstrap, "--topic", "no_such_topic")
    assert (code, err.splitlines()) == (
        1,
        [
            f"clientmetrics pipeline: cannot read topic no_such_topic from {broker.bootstrap}: "
            "topic no_such_topic does not exist (check --topic; the exporter creates it)"
        ],
    )
    assert elapsed < BUDGET_S + SLACK_S


@pytest.mark.parametrize(
    ("properties", "line"),
    [
        ("security.protocol=SSL\n",
         "cannot reach the Kafka cluster at {0}: Could not connect to bootstrap server {0} "
         "(ConnectionResetError)"),  # a PLAINTEXT listener resets a TLS hello
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n"
         "sasl.password=p\n",
         "cannot log in to the Kafka cluster at {0}: Client SASL mechanism 'PLAIN' not enabled "
         "in the server, enabled mechanisms are []"),
    ],
    ids=["tls", "sasl"],
)  # fmt: skip
def test_a_security_mismatch_is_one_line(
    broker: KafkaBroker, tmp_path: Path, properties: str, line: str
) -> None:
    # The broker's listener is PLAINTEXT: a TLS client and a SASL client both fail at once.
    config = tmp_path / "client.properties"
    config.write_text(properties)
    code, err, elapsed = _run_kafka(tmp_path, broker.bootstrap, "--command-config", str(config))
    assert code == 1
    assert err.splitlines() == ["clientmetrics pipeline: " + line.format(broker.bootstrap)]
    assert elapsed < BUDGET_S + SLACK_S


def test_settings_only_java_speaks_still_get_the_reachability_check(tmp_path: Path) -> None:
    # GSSAPI is the consumer's to judge; whether a bootstrap server answers is checked here.
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n"
    )
    port = free_port()
    code, err, elapsed = _run_kafka(tmp_path, f"127.0.0.1:{port}", "--command-config", str(config))
    assert (code, err.splitlines()) == (
        1,
        [
            f"clientmetrics pipeline: cannot reach the Kafka cluster at 127.0.0.1:{port}: "
            f"127.0.0.1:{port} (Connection refused)"
        ],
    )
    assert elapsed < BUDGET_S + SLACK_S
