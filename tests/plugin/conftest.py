"""Two Kafka nodes for every broker plugin test (one package-scoped pair, started at once).

``broker``: Apache Kafka 4.4 with a SASL_SSL listener (SCRAM users alice, bob and carol),
the clientmetrics plugin (every label; its records to ``target``, topic ``otlp_metrics``
with 4 partitions) and the launcher's recording plugin beside it (the witness: every push
Kafka hands its plugins, as a JSON line), JMX open for the plugin's counters.

``target``: Apache Kafka 3.9.2, PLAINTEXT, running the plugin's legacy entry class itself
(so the jar is seen loading on a broker that has only the pre-4.2 interface), its own
clients' records on its topic ``target_own``.

Tests that change the plugin's settings at run time put them back (``Cluster.alter``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, re-exported without `as`
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from peers.kafka import (
    LEGACY_VERSION,
    KafkaBroker,
    PeerUnavailable,
    clientmetrics_plugin,
    minimal_plugin,
)

from tests.kafka import broker_tls
from tests.plugin.records import Pushed, Record, TopicReader, witnessed
from tests.procs import MIN_DEADLINE_S, free_port, wait_for
from tests.tlsfiles import TestCA

EVERY_LABEL = (
    "client_id,client_instance_id,client_software_name,client_software_version,"
    "client_source_address,client_source_port,principal,node_id,listener,security_protocol"
)
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
PARTITIONS = 4
TOPIC = "otlp_metrics"
TARGET_TOPIC = "target_own"
COUNTERS = "kafka.server:type=client-metrics-plugin"


@dataclass(frozen=True)
class Cluster:
    broker: KafkaBroker
    target: KafkaBroker
    witness_file: Path

    def witnessed(self, client_id: str | None = None) -> list[Pushed]:
        """The pushes Kafka handed the broker's plugins so far (of one client id)."""
        pushes = witnessed(self.witness_file)
        return [p for p in pushes if client_id is None or p.client_id == client_id]

    def reader(self, topic: str = TOPIC) -> TopicReader:
        """A reader of the plugin's topic on the target, from its start."""
        return TopicReader({"bootstrap.servers": self.target.bootstrap}, topic)

    def records(self, topic: str, count: int, timeout: float = 60) -> list[Record]:
        """The first ``count`` records of a topic on the target, waiting for them."""
        reader = self.reader(topic)
        try:
            found = reader.wait(lambda rs: len(rs) >= count, timeout, f"{count} records on {topic}")
        finally:
            reader.close()
        assert len(found) == count, f"{len(found)} records on {topic}, not {count}"
        return found

    def counters(self) -> dict[str, float]:
        return self.broker.jmx_values(COUNTERS)

    def alter(self, settings: Mapping[str, str | None]) -> None:
        """Set (or, with None, delete) dynamic settings of the broker, as kafka-configs does.

        Raises ``KafkaException`` with the broker's message when it refuses them.
        """
        entries = [
            ConfigEntry(
                name,
                value,
                incremental_operation=AlterConfigOpType.DELETE
                if value is None
                else AlterConfigOpType.SET,
            )
            for name, value in settings.items()
        ]
        # This broker's own settings (librdkafka cannot name the cluster-wide default, "").
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)
        config: dict[str, str | int | float | bool] = {**self.broker.client_config()}
        admin = AdminClient(config)
        before = self._reconfigured()
        admin.incremental_alter_configs([resource])[resource].result(MIN_DEADLINE_S)
        # The controller has taken the change; the broker hands it to the plugin a
        # little later (0.9 s seen on a busy machine), and pushes meanwhile go by the
        # old settings.
        wait_for(lambda: self._reconfigured() > before, 30, what="the plugin's reconfigure")

    def _reconfigured(self) -> int:
        """How often the broker's plugin has logged that it took new settings."""
        log = self.broker.log_path.read_text(errors="replace")
        return log.count("clientmetrics: reconfigured:")


@pytest.fixture(scope="package")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("plugin")
    target = KafkaBroker(
        work / "target",
        version=LEGACY_VERSION,
        plugins=[
            clientmetrics_plugin(
                {
                    "topic": TARGET_TOPIC,
                    "labels": "client_id,client_instance_id,client_software_name,principal,node_id",
                },
                legacy=True,
            )
        ],
    )
    target.port = free_port()  # known before it starts: the plugin's target
    witness = work / "pushes.jsonl"
    plugin = clientmetrics_plugin(
        {
            "labels": EVERY_LABEL,
            "bootstrap.servers": target.bootstrap,
            "topic.partitions": str(PARTITIONS),
        }
    )
    broker = KafkaBroker(
        work / "broker",
        listener="SASL_SSL",
        tls=broker_tls(TestCA(work / "tls")),
        users=USERS,
        plugins=[plugin, minimal_plugin(witness)],
        jmx=True,
    )
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
        yield Cluster(broker, target, witness)
    finally:
        broker.stop()
        target.stop()
        if request.session.testsfailed > failed_before:
            for node in (broker, target):
                print(f"--- kafka {node.version} log, last lines ---\n{node.log_tail()}")
