"""A broker whose plugin's target cluster goes away keeps serving its clients.

Broker A (Kafka 4.4) sends its records to cluster T, which is Kafka 3.9.2 running the
plugin's legacy entry class itself (so this module also shows the jar loading on a broker
that has only the pre-4.2 interface). T is stopped while a librdkafka client keeps producing
to A and pushing to it, then started again: the client's pushes keep being taken (an
INVALID_RECORD would have switched its telemetry off for good), what does not fit the queue
is dropped and counted, and the same client's records reach T again once it is back. The
client's produce latency in each phase is printed (bench/broker_plugin.py quotes it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import confluent_kafka
import pytest
from peers.kafka import KafkaBroker, PeerUnavailable, clientmetrics_plugin, minimal_plugin

from tests.kadmin import set_subscription
from tests.plugin.records import TopicReader, witnessed
from tests.procs import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

#: A release with only KIP-714's receiver interface (3.7 to 4.1) that resolves here.
OLD_KAFKA = "3.9.2"
COUNTERS = "kafka.server:type=client-metrics-plugin"


@pytest.fixture(scope="module")
def brokers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KafkaBroker, KafkaBroker]]:
    work = tmp_path_factory.mktemp("down")
    labels = {"labels": "client_id,client_instance_id,client_software_name,principal,node_id"}
    target = KafkaBroker(
        work / "target",
        version=OLD_KAFKA,
        plugins=[clientmetrics_plugin(labels, legacy=True)],
        port=free_port(),
    )
    plugin = clientmetrics_plugin(
        {
            "bootstrap.servers": target.bootstrap,
            "queue.size": "5",
            # Room for two batches only: with the target away, send() soon blocks and
            # the queue fills, so drops show within seconds.
            "producer.buffer.memory": str(2 * 256 * 1024),
        }
    )
    witness = minimal_plugin(work / "pushes.jsonl")
    broker = KafkaBroker(work / "broker", plugins=[plugin, witness], jmx=True)
    failed_before = request.session.testsfailed
    with ThreadPoolExecutor(2) as pool:  # both at once: half the wait
        started = [pool.submit(node.start) for node in (target, broker)]
    try:
        for future in started:
            future.result()
    except PeerUnavailable as exc:
        broker.stop()
        target.stop()
        pytest.skip(f"Apache Kafka is not available here: {exc}")
    except BaseException:
        broker.stop()
        target.stop()
        raise
    print(target.summary())
    print(broker.summary())
    try:
        yield broker, target
    finally:
        broker.stop()
        target.stop()
        if request.session.testsfailed > failed_before:
            for node in (broker, target):
                print(f"--- kafka {node.version} log, last lines ---\n{node.log_tail()}")


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
    brokers: tuple[KafkaBroker, KafkaBroker],
) -> None:
    broker, target = brokers
    witness = broker.workdir.parent / "pushes.jsonl"
    every_200ms = {"metrics": "org.apache.kafka.producer.", "interval.ms": "200"}
    set_subscription(broker.bootstrap, "producers", every_200ms)
    set_subscription(target.bootstrap, "producers", every_200ms)
    client = Client({"bootstrap.servers": broker.bootstrap}, "via-broker")
    legacy = confluent_kafka.Producer(
        {"bootstrap.servers": target.bootstrap, "client.id": "legacy"}
    )
    reader = TopicReader({"bootstrap.servers": target.bootstrap}, "otlp_metrics")
    try:
        client.run(1)  # warm up: the topic is created, connections are made
        before = client.run(2)
        records = reader.wait(
            lambda rs: {r.headers.get("client_id") for r in rs} >= {"via-broker", "legacy"},
            60,
            "records of both clients on the target",
        )
        legacy.flush(1)
        legacy = None  # before the target goes away
        (instance,) = {r.key for r in records if r.headers.get("client_id") == "via-broker"}
        old = next(r for r in records if r.headers.get("client_id") == "legacy")
        # The 3.9 broker's legacy plugin: its labels, and no push interval (3.9 does not say).
        assert old.header_names == (
            "client_id",
            "client_instance_id",
            "client_software_name",
            "principal",
            "node_id",
            "terminating",
        )
        assert (old.headers["principal"], old.headers["node_id"]) == ("User:ANONYMOUS", "1")
        assert old.headers["client_software_name"] == "confluent-kafka-python"

        target.stop()
        stopped_at = time.time()
        pushes_before = len(witnessed(witness))
        counters_before = broker.jmx_values(COUNTERS)
        during = client.run(4)
        counters = broker.jmx_values(COUNTERS)
        pushes_during = len(witnessed(witness)) - pushes_before
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
    print(f"produce latency, target up:    {summary(before)}")
    print(f"produce latency, target down:  {summary(during)}")
    print(f"produce latency, target back:  {summary(after)}")
