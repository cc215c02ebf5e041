"""``make kafka-plugin``: Apache Kafka 4.4 with the clientmetrics plugin, as docs/kafka-plugin.md
installs it, on one machine.

The command is the one ``make -n kafka-plugin`` prints (so the Makefile's recipe is what runs),
on a free port and a scratch folder. It must say it is ready only with the plugin's topic
created; a librdkafka client's push must then land on that topic as a record with the default
labels (a complete inventory row); Ctrl-C stops the broker.
"""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from tests.kadmin import set_subscription
from tests.plugin.records import Record, TopicReader
from tests.procs import MIN_DEADLINE_S, free_port, wait_for

REPO = Path(__file__).resolve().parent.parent.parent
#: The labels both writers add by default, as the record format's vectors pin them.
DEFAULT_LABELS = json.loads((REPO / "tests/data/record-format/vectors.json").read_text())[
    "default_labels"
]


def make_command(port: int, workdir: Path) -> list[str]:
    """What ``make kafka-plugin`` runs with these arguments (its recipe's last line)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    args = f"--port {port} --dir {workdir} --set topic.partitions=2"
    shown = subprocess.run(
        ["make", "-n", "-s", "kafka-plugin", f"VENV={sys.prefix}", f"KAFKA_ARGS={args}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    command = shlex.split(shown[-1])
    assert command[1:5] == ["-m", "peers.kafka", "--plugin", "clientmetrics"], shown
    return command


def first_record_of(client_id: str, bootstrap: str) -> Record:
    """Produce as ``client_id`` until a record of its pushes is on the plugin's topic."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "client.id": client_id, "log_level": 3}
    )
    topic = TopicReader({"bootstrap.servers": bootstrap}, "otlp_metrics")
    deadline = time.monotonic() + 90
    try:
        while not (
            found := [r for r in topic.read(0.2) if r.headers.get("client_id") == client_id]
        ):
            producer.produce("orders", b"v")
            producer.poll(0)
            assert time.monotonic() < deadline, "no record of the client's push in 90 s"
    finally:
        topic.close()
        producer.flush(5)
    return found[0]


@pytest.mark.kafka
def test_make_kafka_plugin_starts_kafka_whose_pushes_land_on_the_topic(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        make_command(port, tmp_path / "kafka"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # Ctrl-C below reaches it alone, as a terminal's would
    )
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        # A fresh machine builds the plugin first (Maven, its JUnit tests): a generous wait.
        wait_for(
            lambda: proc.poll() is not None or any("ready in" in line for line in lines),
            300,
            what="make kafka-plugin's ready line",
        )
        if proc.poll() == 2:  # PeerUnavailable: no JDK or Maven here
            pytest.skip("".join(lines))
        assert proc.poll() is None, "".join(lines)
        output = "".join(lines)
        assert "clientmetrics plugin on metric.reporters (clientmetrics-kafka-plugin-" in output
        assert "each push becomes a record on topic otlp_metrics (2 partitions)" in output
        bootstrap = f"127.0.0.1:{port}"
        # The topic is there before any push: the pipeline's Kafka source can start at once.
        topics = (
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=MIN_DEADLINE_S).topics
        )
        assert len(topics["otlp_metrics"].partitions) == 2

        set_subscription(
            bootstrap, "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}
        )
        record = first_record_of("make-kafka-plugin", bootstrap)
        labels = [name for name in record.header_names if name in DEFAULT_LABELS]
        assert labels == DEFAULT_LABELS
        assert record.headers["client_software_name"] == "confluent-kafka-python"
        assert record.headers["client_source_address"] == "127.0.0.1"
        assert record.headers["principal"] == "User:ANONYMOUS"
        assert record.metric_names()

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        reader.join(10)
        assert "kafka stopped" in "".join(lines)
    finally:
        if proc.poll() is None:  # as Ctrl-C: the launcher stops its broker by PID
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
