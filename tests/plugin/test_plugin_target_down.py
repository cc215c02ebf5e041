"""A broker whose plugin's target cluster goes away keeps serving its clients.

The target (Kafka 3.9.2, which runs the plugin's legacy entry class itself) is stopped
while a librdkafka client keeps producing to the Kafka 4.4 broker and pushing to it, then
started again: the client's pushes keep being taken (an INVALID_RECORD would have switched
its telemetry off for good), what does not fit the queue is dropped and counted, and the
same client's records reach the target again once it is back. The client's produce
latency in each phase is printed (docs/kafka-plugin.md quotes it). The target's own
record of a client shows the legacy class at work (its labels, no push interval).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import confluent_kafka
import pytest

from tests.kadmin import set_subscription
from tests.plugin.conftest import TARGET_TOPIC, Cluster
from tests.procs import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

#: A queue of 5 and a producer buffer of one batch (512 KiB, the plugin's batch.size): with
#: the target away, the producer's send() soon blocks and the queue fills, so drops show
#: within seconds.
SMALL = {"clientmetrics.queue.size": "5", "clientmetrics.producer.buffer.memory": str(2 << 18)}


class Client:
    """A librdkafka producer that sends a record every 20 ms and times each delivery."""

    def __init__(self, config: dict[str, str], client_id: str) -> None:
        self.producer = confluent_kafka.Producer(
            {**config, "client.id": client_id, "linger.ms": 0, "log_level": 3}
        )
        self.latencies_ms: list[float] = []

    def run(self, seconds: float) -> list[float]:
        """Produce for ``seconds``; the delivery latencies (ms) of this stretch."""
        began = len(self.latencies_ms)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            sent = time.monotonic()

            def delivered(error: object, _message: object, sent: float = sent) -> None:
                if error is None:
                    self.latencies_ms.append((time.monotonic() - sent) * 1000)

            self.producer.produce("orders", b"v", on_delivery=delivered)
            self.producer.poll(0.02)
        self.producer.flush(10)
        return self.latencies_ms[began:]


def summary(latencies: list[float]) -> str:
    cuts = statistics.quantiles(latencies, n=100)
    return f"{len(latencies)} records, p50 {cuts[49]:.1f} ms, p99 {cuts[98]:.1f} ms"


def test_a_target_cluster_that_goes_away_costs_the_broker_nothing_but_counted_drops(
    cluster: Cluster,
) -> None:
    broker, target = cluster.broker, cluster.target
    assert broker.tls is not None
    every_200ms = {"metrics": "org.apache.kafka.producer.", "interval.ms": "200"}
    set_subscription(
        broker.bootstrap,
        "down",
        {**every_200ms, "match": "client_id=via-broker"},
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="admin",
        sasl_plain_password=broker.admin_password,
        ssl_cafile=str(broker.tls.ca),
    )
    set_subscription(target.bootstrap, "producers", every_200ms)
    cluster.alter(SMALL)
    client = Client(broker.client_config("alice"), "via-broker")
    reader = cluster.reader()
    try:
        legacy = confluent_kafka.Producer(
            {"bootstrap.servers": target.bootstrap, "client.id": "legacy"}
        )
        client.run(1)  # warm up: connections are made
        before = client.run(2)
        wait_for(lambda: cluster.witnessed("via-broker"), 30, what="a push of via-broker")
        instance = str(cluster.witnessed("via-broker")[0].instance)
        reader.wait(lambda rs: any(r.key == instance for r in rs), 60, "its record on the target")
        old = legacy_record(cluster, legacy)
        del legacy  # closed before the target goes away

        target.stop()
        stopped_at = time.time()
        pushes_before = len(cluster.witnessed("via-broker"))
        counters_before = cluster.counters()
        during = client.run(4)
        counters = cluster.counters()
        pushes_during = len(cluster.witnessed("via-broker")) - pushes_before
        # The broker kept taking the client's pushes, into a queue of 5 that then dropped.
        assert pushes_during >= 10
        assert counters["received-total"] - counters_before["received-total"] >= 10
        assert counters["dropped-total"] > 0
        assert counters["queue-depth"] <= 5

        target.start()
        after = client.run(2)
        reader.wait(
            lambda rs: any(
                r.key == instance and r.timestamp_ms > stopped_at * 1000 + 4000 for r in rs
            ),
            90,
            "the same client's records on the target once it is back",
        )
    finally:
        reader.close()
        cluster.alter(dict.fromkeys(SMALL))
    # The 3.9 broker's legacy plugin: its labels, and no push interval (3.9 does not say).
    assert old.header_names == (
        "client_id",
        "client_instance_id",
        "client_software_name",
        "principal",
        "node_id",
        "terminating",
        "push_id",
    )
    assert (old.headers["principal"], old.headers["node_id"]) == ("User:ANONYMOUS", "1")
    assert old.headers["client_software_name"] == "confluent-kafka-python"
    print(f"produce latency, target up:    {summary(before)}")
    print(f"produce latency, target down:  {summary(during)}")
    print(f"produce latency, target back:  {summary(after)}")


def legacy_record(cluster: Cluster, legacy: Any) -> Any:
    """The first record the target's own (legacy) plugin wrote of the ``legacy`` client."""
    reader = cluster.reader(TARGET_TOPIC)
    try:

        def found(records: list[Any]) -> bool:
            legacy.produce("orders", b"v")
            legacy.poll(0.05)
            return any(r.headers.get("client_id") == "legacy" for r in records)

        records = reader.wait(found, 60, "the legacy plugin's record on the target")
    finally:
        reader.close()
    legacy.flush(1)
    return next(r for r in records if r.headers.get("client_id") == "legacy")
