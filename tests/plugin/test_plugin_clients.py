"""Real clients push to the broker with the plugin over SASL_SSL: one record per push.

librdkafka (confluent-kafka) as alice, the Java client 4.4 (peers/java_client.py) as bob and
franz-go (peers/franz_go.py) as carol produce to the Kafka 4.4 broker and push to it. Every
push Kafka hands its plugins is also recorded by the launcher's recording plugin (the
witness), so the plugin's topic can be checked push by push: one record each, in order,
with the broker's labels, the SASL principal among them. The labels change at run time
(a broker config change, as kafka-configs makes); the plugin's counters are read over JMX.
"""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka
import pytest

from clientmetrics.pipeline.core.records import landing_rows
from clientmetrics.telemetry.otlp import metric_names
from tests.kadmin import set_subscription
from tests.peers.clients import franz, java
from tests.plugin.conftest import EVERY_LABEL, USERS, Cluster
from tests.plugin.records import Pushed, Record, as_source_records
from tests.procs import wait_for
from tests.rdkafka_goodbye import Goodbye

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

#: What confluent-kafka tells a broker its software version is (KIP-511).
RDKAFKA_VERSION = f"{confluent_kafka.version()}-rdkafka-{confluent_kafka.libversion()[0]}"
RDKAFKA, JAVA, FRANZ = "rdkafka-orders", "java-orders-producer", "franz-orders-producer"
NOT_LABELS = ("terminating", "push_interval_ms", "push_id")


def labels_of(record: Record) -> dict[str, str]:
    return {k: v for k, v in record.headers.items() if k not in NOT_LABELS}


def test_each_push_of_three_clients_is_one_record_with_the_brokers_labels(
    cluster: Cluster, tmp_path: Path
) -> None:
    broker = cluster.broker
    assert broker.tls is not None
    set_subscription(
        broker.bootstrap,
        "orders",
        {"metrics": "org.apache.kafka.", "interval.ms": "1000", "match": "client_id=.*-orders.*"},
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="admin",
        sasl_plain_password=broker.admin_password,
        ssl_cafile=str(broker.tls.ca),
    )
    producing = ("-topic", "orders", "-messages", "100000", "-rate", "10", "-close")
    secure = ("-tls-ca", str(broker.tls.ca), "-sasl-user", "carol")
    bob = tmp_path / "bob.properties"
    bob.write_text("".join(f"{k}={v}\n" for k, v in broker.java_properties("bob").items()))
    with (
        java(broker.bootstrap, tmp_path, "--client-id", "java-orders", "--role", "producer",
             "--topic", "orders", "--messages", "100000", "--rate", "10", "--close",
             "--command-config", str(bob)) as jv,
        franz(broker.bootstrap, tmp_path, "-client-id", "franz-orders", "-role", "producer",
              *producing, *secure, "-sasl-password", USERS["carol"]) as fz,
    ):  # fmt: skip
        goodbye = Goodbye(RDKAFKA)
        rdkafka = confluent_kafka.Producer(
            goodbye.config({**broker.client_config("alice"), "client.id": RDKAFKA})
        )
        until_pushed(cluster, rdkafka, 2)
        refused = pytest.raises(confluent_kafka.KafkaException, match="unknown label hostname")
        with refused:
            cluster.alter({"clientmetrics.labels": "hostname"})
        cluster.alter({"clientmetrics.labels": "principal"})
        try:
            until_pushed(cluster, rdkafka, len(cluster.witnessed(RDKAFKA)) + 2)
            java_instance = jv.instance_ids()["producer"]
            franz_version = str(fz.wait_event("started", 5)["software_version"])
            rdkafka.flush(5)
            goodbye.close_after_push(rdkafka)  # closed: librdkafka's goodbye, a terminating push
            wait_for(
                lambda: any(p.terminating for p in cluster.witnessed(RDKAFKA)),
                30,
                what="librdkafka's goodbye",
            )
            # The Java client and franz-go close too; their goodbyes may be empty, which
            # Kafka does not hand a plugin, so they are not required.
            assert (jv.stop(), fz.stop()) == (0, 0)
            pushed = [p for p in cluster.witnessed() if p.client_id in (RDKAFKA, JAVA, FRANZ)]
            records = records_of(cluster, pushed)
        finally:
            cluster.alter({"clientmetrics.labels": None})  # once every record is written
    assert {p.client_id for p in pushed} == {RDKAFKA, JAVA, FRANZ}
    assert all(p.payload for p in pushed)  # Kafka hands plugins non-empty pushes only
    mine = {str(p.instance) for p in pushed}
    assert java_instance in mine

    # One record per push, each instance's in the order the broker took them.
    assert len(records) == len(pushed)
    software = {
        RDKAFKA: ("confluent-kafka-python", RDKAFKA_VERSION, "User:alice"),
        JAVA: ("apache-kafka-java", "4.4.0", "User:bob"),
        FRANZ: ("kgo", franz_version, "User:carol"),
    }
    for instance in mine:
        theirs = [p for p in pushed if str(p.instance) == instance]
        ours = [r for r in records if r.key == instance]
        assert [r.metric_names() for r in ours] == [metric_names(p.payload) for p in theirs]
        assert [r.headers["terminating"] for r in ours] == [
            str(p.terminating).lower() for p in theirs
        ]
        assert {r.headers["push_interval_ms"] for r in ours} == {"1000"}
        assert len({r.headers["push_id"] for r in ours}) == len(ours)
        client = theirs[0]
        if client.client_id == RDKAFKA:
            assert ours[-1].headers["terminating"] == "true"

        # Every label before the change, the principal alone after it; never back.
        full = [r for r in ours if list(labels_of(r)) == EVERY_LABEL.split(",")]
        short = [r for r in ours if list(labels_of(r)) == ["principal"]]
        assert ours == full + short
        assert len(full) >= 2
        assert len(short) >= 2
        name, version, principal = software[client.client_id]
        for record in full:
            expect_labels(record, instance, client, name, version)
        assert client.principal == principal
        assert {r.headers["principal"] for r in ours} == {principal}

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

    counters = cluster.counters()
    assert counters["received-total"] == counters["sent-total"] >= len(pushed)
    lost = ("dropped-total", "failed-total", "invalid-total")
    assert [counters[name] for name in lost] == [0, 0, 0]
    assert counters["queue-depth"] == 0


def records_of(cluster: Cluster, pushed: list[Pushed]) -> list[Record]:
    """The plugin's records of these pushes' instances, once there is one for each push."""
    mine = {str(p.instance) for p in pushed}
    reader = cluster.reader()
    try:
        found = reader.wait(
            lambda rs: len([r for r in rs if r.key in mine]) >= len(pushed), 30, "the records"
        )
    finally:
        reader.close()
    return [r for r in found if r.key in mine]


def until_pushed(cluster: Cluster, rdkafka: confluent_kafka.Producer, n: int) -> None:
    """Keep librdkafka producing until every client pushed ``n`` times."""
    deadline = time.monotonic() + 90
    while min(len(cluster.witnessed(c)) for c in (RDKAFKA, JAVA, FRANZ)) < n:
        rdkafka.produce("orders", b"v")
        rdkafka.poll(0.1)
        assert time.monotonic() < deadline, {
            c: len(cluster.witnessed(c)) for c in (RDKAFKA, JAVA, FRANZ)
        }


def expect_labels(record: Record, instance: str, client: Pushed, name: str, version: str) -> None:
    labels = labels_of(record)
    port = labels.pop("client_source_port")
    assert 1 <= int(port) <= 65535
    assert labels == {
        "client_id": client.client_id,
        "client_instance_id": instance,
        "client_software_name": name,
        "client_software_version": version,
        "client_source_address": "127.0.0.1",
        "principal": client.principal,
        "node_id": "1",
        "listener": "SASL_SSL",
        "security_protocol": "SASL_SSL",
    }
    for attributes in record.resource_attributes():
        for key, value in labels.items():
            assert attributes[key] == (int(value) if key == "node_id" else value)
        assert attributes["client_source_port"] == int(port)
