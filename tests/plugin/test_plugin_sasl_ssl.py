"""The broker plugin in a real Apache Kafka 4.4 broker with a SASL_SSL listener.

Real clients push (librdkafka as ``alice``, the Java client 4.4 as ``bob``); every push Kafka
hands its plugins is also recorded by the launcher's minimal plugin (the witness), so the
topic can be checked push by push: one record each, in order, with the broker's labels.
The labels change at run time with ``kafka-configs``; the plugin's counters are read over JMX.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from peers.build import javac_jar
from peers.kafka import KafkaBroker, clientmetrics_plugin, kafka_jars, minimal_plugin

from clientmetrics.pipeline.core.records import landing_rows
from clientmetrics.telemetry.otlp import metric_names
from tests.kadmin import set_subscription
from tests.kafka import kafka_broker
from tests.plugin.records import (
    Pushed,
    Record,
    TopicReader,
    as_source_records,
    kafka_uuid,
    witnessed,
)
from tests.procs import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

EVERY_LABEL = (
    "client_id,client_instance_id,client_software_name,client_software_version,"
    "client_source_address,client_source_port,principal,node_id,listener,security_protocol"
)
COUNTERS = "kafka.server:type=client-metrics-plugin"
#: What confluent-kafka tells a broker its software version is (KIP-511).
RDKAFKA_VERSION = f"{confluent_kafka.version()}-rdkafka-{confluent_kafka.libversion()[0]}"


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    record_file = tmp_path_factory.mktemp("witness") / "pushes.jsonl"
    plugins = [clientmetrics_plugin({"labels": EVERY_LABEL}), minimal_plugin(record_file)]
    yield from kafka_broker(
        request,
        tmp_path_factory,
        listener="SASL_SSL",
        users={"alice": "alice-secret", "bob": "bob-secret"},
        plugins=plugins,
        jmx=True,
    )


def java_client(kafka: KafkaBroker, seconds: float) -> subprocess.Popen[str]:
    """The Java client as ``bob``: a record every 100 ms for ``seconds``, then close()."""
    jars = kafka_jars()
    jar = javac_jar([Path(__file__).with_name("JavaPush.java")], jars, "plugin-java-push")
    props = {
        **kafka.java_properties("bob"),
        "bootstrap.servers": kafka.bootstrap,
        "client.id": "java-orders",
    }
    config = kafka.workdir / "java-push.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return subprocess.Popen(
        ["java", "-cp", f"{jar}:{jars}/*", "JavaPush", str(config), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def labels_of(record: Record) -> dict[str, str]:
    return {k: v for k, v in record.headers.items() if k not in ("terminating", "push_interval_ms")}


def test_each_push_is_one_record_with_the_brokers_labels_and_they_change_at_run_time(
    kafka: KafkaBroker,
) -> None:
    witness_file = Path(kafka.plugins[1].properties["test.telemetry.record.file"])  # type: ignore[index]
    assert kafka.tls is not None
    set_subscription(
        kafka.bootstrap,
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="admin",
        sasl_plain_password=kafka.admin_password,
        ssl_cafile=str(kafka.tls.ca),
    )
    java = java_client(kafka, seconds=4)
    producer = confluent_kafka.Producer(
        {**kafka.client_config("alice"), "client.id": "rdkafka-orders"}
    )
    began = time.monotonic()

    def run(producer: confluent_kafka.Producer, until: object) -> None:
        while not until():  # type: ignore[operator]
            producer.produce("orders", b"v")
            producer.poll(0.1)
            assert time.monotonic() - began < 60, "librdkafka pushed too few times"

    def pushes(client_id: str) -> list[Pushed]:
        return [p for p in witnessed(witness_file) if p.client_id == client_id]

    run(producer, lambda: len(pushes("rdkafka-orders")) >= 2)

    def alter(setting: str) -> subprocess.CompletedProcess[str]:
        return kafka.tool(
            "configs",
            *("--bootstrap-server", kafka.bootstrap),
            *("--command-config", str(kafka.command_config())),
            *("--alter", "--entity-type", "brokers", "--entity-default"),
            *("--add-config", setting),
        )

    refused = alter("clientmetrics.labels=hostname")
    assert refused.returncode != 0
    assert "unknown label hostname" in refused.stdout + refused.stderr
    assert alter("clientmetrics.labels=principal").returncode == 0
    reader = TopicReader(kafka.client_config(), "otlp_metrics")
    try:
        count = len(pushes("rdkafka-orders"))
        run(producer, lambda: len(pushes("rdkafka-orders")) >= count + 2)
        producer.flush(5)
        producer = None  # close(): the terminating push
        java_out, _ = java.communicate(timeout=60)
        assert java.returncode == 0
        java_instance = kafka_uuid(java_out.strip().splitlines()[-1])

        def goodbyes() -> set[str]:
            return {p.client_id for p in witnessed(witness_file) if p.terminating}

        # librdkafka says goodbye on close; the Java client 4.4 only when its network
        # thread polls once more while closing (with nothing in flight it does not).
        wait_for(lambda: "rdkafka-orders" in goodbyes(), 30, what="librdkafka's goodbye")
        pushed = [p for p in witnessed(witness_file) if p.client_id.endswith("-orders")]
        assert {p.client_id for p in pushed} == {"rdkafka-orders", "java-orders"}
        assert len([p for p in pushed if p.client_id == "java-orders"]) >= 2
        assert all(p.payload for p in pushed)  # Kafka hands plugins non-empty pushes only
        mine = {str(p.instance) for p in pushed}
        records = reader.wait(
            lambda rs: len([r for r in rs if r.key in mine]) >= len(pushed), 30, "the records"
        )
        records = [r for r in records if r.key in mine]
    finally:
        reader.close()

    # One record per push, each instance's in the order the broker took them.
    assert len(records) == len(pushed)
    for instance in mine:
        theirs = [p for p in pushed if str(p.instance) == instance]
        ours = [r for r in records if r.key == instance]
        assert [r.metric_names() for r in ours] == [metric_names(p.payload) for p in theirs]
        assert [r.headers["terminating"] for r in ours] == [
            str(p.terminating).lower() for p in theirs
        ]
        assert {r.headers["push_interval_ms"] for r in ours} == {"1000"}
        if theirs[0].client_id == "rdkafka-orders":
            assert ours[-1].headers["terminating"] == "true"

        # Every label before the change, the principal alone after it; never back.
        full = [r for r in ours if len(labels_of(r)) == 10]
        short = [r for r in ours if list(labels_of(r)) == ["principal"]]
        assert ours == full + short
        client = theirs[0]
        for record in full:
            expect_labels(record, instance, client)
        for record in short:
            assert record.headers["principal"] == client.principal
        if client.client_id == "rdkafka-orders":
            assert len(full) >= 2
            assert len(short) >= 2
    assert str(java_instance) in mine

    # The pipeline's Kafka source makes landing rows of them: the push's own fields from
    # the key, the headers and the record time; what a broker never tells a plugin, null.
    rows = landing_rows(as_source_records(records)).to_pylist()
    for row, record in zip(rows, records, strict=True):
        assert str(row["client_instance_id"]) == record.key
        assert row["terminating"] == (record.headers["terminating"] == "true")
        assert row["push_interval_ms"] == 1000
        assert round(row["received_at"].timestamp() * 1000) == record.timestamp_ms
        assert row["principal"] == record.headers["principal"]
        assert (row["subscription_id"], row["compression_type"]) == (None, None)
        assert row["payload"] == record.value
        if "node_id" in record.headers:
            assert (row["node_id"], row["listener"]) == (1, "SASL_SSL")

    counters = kafka.jmx_values(COUNTERS)
    assert counters["received-total"] == counters["sent-total"] >= len(pushed)
    assert (counters["dropped-total"], counters["failed-total"], counters["invalid-total"]) == (
        0,
        0,
        0,
    )
    assert counters["queue-depth"] == 0


def expect_labels(record: Record, instance: str, client: Pushed) -> None:
    java = client.client_id == "java-orders"
    labels = labels_of(record)
    port = labels.pop("client_source_port")
    assert 1 <= int(port) <= 65535
    assert labels == {
        "client_id": client.client_id,
        "client_instance_id": instance,
        "client_software_name": "apache-kafka-java" if java else "confluent-kafka-python",
        "client_software_version": "4.4.0" if java else RDKAFKA_VERSION,
        "client_source_address": "127.0.0.1",
        "principal": "User:bob" if java else "User:alice",
        "node_id": "1",
        "listener": "SASL_SSL",
        "security_protocol": "SASL_SSL",
    }
    assert client.principal == labels["principal"]
    for attributes in record.resource_attributes():
        for name, value in labels.items():
            assert attributes[name] == (int(value) if name == "node_id" else value)
        assert attributes["client_source_port"] == int(port)
