"""The topic exporter against a real Tansu broker, read back with confluent-kafka."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import structlog
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.child import ChildExporters, with_exporter_process
from clientmetrics.exporters.path import ExportPath
from clientmetrics.exporters.queued import QueuedExporter
from clientmetrics.exporters.registry import load_exporters
from clientmetrics.exporters.topic import create
from clientmetrics.exporters.topic_acked import AckedTopicExporter
from clientmetrics.gateway.config_load import load_config
from clientmetrics.telemetry import otlp
from clientmetrics.telemetry.model import AcceptedPush
from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.procs import MIN_DEADLINE_S, GatewayProcess, TansuProcess, free_port, wait_for
from tests.rdkafka_goodbye import Goodbye

PRODUCER_METRIC = "org.apache.kafka.producer.node.request.latency.avg"


def attributes(resource: object) -> dict[str, object]:
    return {
        kv.key: getattr(kv.value, kv.value.WhichOneof("value"))
        for kv in resource.attributes  # type: ignore[attr-defined]
    }


def consume(bootstrap: str, topic: str, want: int, timeout: float = 30) -> list[object]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    records: list[object] = []
    try:
        wait_for(
            lambda: (
                records.extend(m for m in consumer.consume(100, 0.5) if m.error() is None)
                or len(records) >= want
            ),
            timeout,
            interval=0,
            what=f"{want} records on {topic}",
        )
    finally:
        consumer.close()
    return records


@pytest.mark.integration
def test_librdkafka_pushes_become_records_keyed_by_instance(tmp_path: Path) -> None:
    tansu = TansuProcess(log_path=tmp_path / "tansu.log").start()
    config = (
        "[exporters.landing]\nroll_seconds = 0.3\n"
        f"[exporters.topic]\nbootstrap_servers = '{tansu.bootstrap}'\n"
        "labels = ['client_id', 'client_instance_id', 'client_software_name', 'principal']\n"
    )
    gw = GatewayProcess(tmp_path / "data", config).start()
    try:
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
        )
        goodbye = Goodbye("topic-1")
        prod = Producer(goodbye.config({"bootstrap.servers": gw.bootstrap, "client.id": "topic-1"}))
        wait_for(
            lambda: (
                prod.poll(0.1) is not None
                and len([r for r in landed_rows(gw.data_dir) if r["client_id"] == "topic-1"]) >= 3
            ),
            60,
            what="three landed pushes",
        )
        goodbye.close_after_push(prod)  # its terminating push is a record too
        records = consume(tansu.bootstrap, "otlp_metrics", 4)
    finally:
        assert gw.stop() == 0
        tansu.stop()
    landed = [r for r in landed_rows(gw.data_dir) if r["client_id"] == "topic-1"]
    landed.sort(key=lambda r: r["received_at"])  # type: ignore[arg-type,return-value]
    (instance_id,) = {r["client_instance_id"] for r in landed}
    ours = [m for m in records if m.key() == str(instance_id).encode()]  # type: ignore[attr-defined]
    assert len(ours) >= 3
    names: set[str] = set()
    push_ids: set[uuid.UUID] = set()
    # Every record the gateway landed for this client is on the topic, in order.
    for message, row in zip(ours, landed, strict=True):
        headers = dict(message.headers())  # type: ignore[attr-defined]
        push_ids.add(uuid.UUID(headers.pop("push_id").decode()))
        assert headers == {
            "client_id": b"topic-1",
            "client_instance_id": str(instance_id).encode(),
            "client_software_name": b"confluent-kafka-python",
            "principal": b"User:ANONYMOUS",
            "terminating": b"true" if row["terminating"] else b"false",
            "push_interval_ms": b"1000",
        }
        # The record's time is when the gateway received the push, as landed.
        received_ms = round(row["received_at"].timestamp() * 1000)  # type: ignore[attr-defined]
        assert message.timestamp()[1] == received_ms  # type: ignore[attr-defined]
        request = ExportMetricsServiceRequest.FromString(message.value())  # type: ignore[attr-defined]
        for rm in request.resource_metrics:
            attrs = attributes(rm.resource)
            assert attrs["client_instance_id"] == str(instance_id)
            assert attrs["client_id"] == "topic-1"
            names |= {m.name for sm in rm.scope_metrics for m in sm.metrics}
    assert PRODUCER_METRIC in names
    assert len(push_ids) == len(ours), "one push id per push"


def push(n: int) -> AcceptedPush:
    payload = otlp.build_metrics_data([otlp.gauge("m", n, time_unix_nano=1)]).SerializeToString()
    return AcceptedPush(
        n,
        uuid.UUID(int=n + 1),
        7,
        False,
        "c",
        "sw",
        "1",
        "a",
        1,
        "User:x",
        0,
        "PLAINTEXT",
        "PLAINTEXT",
        0,
        1000,
        payload,
    )


async def test_failed_deliveries_are_retried_by_the_producer_then_counted() -> None:
    exporter = create(
        {
            "bootstrap_servers": f"127.0.0.1:{free_port()}",  # nothing listens
            "create_topic": False,
            "producer": {"message.timeout.ms": 1500, "retry.backoff.ms": 100},
        },
        Path("."),
    )
    assert isinstance(exporter, QueuedExporter)
    await exporter.start()
    for n in range(3):
        exporter.offer(push(n))
    await exporter.flush(10)
    await exporter.close(5)
    assert (exporter.stats.received, exporter.stats.failed, exporter.stats.exported) == (3, 3, 0)


def test_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="bootstrap_servers"):
        create({}, Path("."))
    with pytest.raises(ConfigurationError, match="unknown topic exporter options: nope"):
        create({"bootstrap_servers": "x:1", "nope": 1}, Path("."))
    assert create({"bootstrap_servers": "x:1"}, Path(".")).sink.config["partitioner"] == (  # type: ignore[attr-defined]
        "murmur2_random"
    )
    with pytest.raises(ConfigurationError, match="partitioner must stay murmur2_random"):
        create({"bootstrap_servers": "x:1", "producer": {"partitioner": "random"}}, Path("."))


def test_required_options_are_checked() -> None:
    required = {"bootstrap_servers": "x:1", "required": True}
    exporter = create(required, Path("."))
    assert isinstance(exporter, AckedTopicExporter)
    assert exporter.timeout_s == 10
    config = exporter.sink.config
    assert (config["enable.idempotence"], config["acks"], config["message.timeout.ms"]) == (
        True,
        "all",
        10_000,
    )
    assert create({**required, "delivery_timeout_ms": 2500}, Path(".")).timeout_s == 2.5  # type: ignore[attr-defined]
    for producer, weakened in (
        ({"acks": "1"}, "acks=all"),
        ({"enable.idempotence": False}, "enable.idempotence=true"),
    ):
        with pytest.raises(ConfigurationError, match=f"required = true needs {weakened}"):
            create({**required, "producer": producer}, Path("."))
    with pytest.raises(ConfigurationError, match="delivery_timeout_ms must be a positive"):
        create({**required, "delivery_timeout_ms": 0}, Path("."))
    with pytest.raises(ConfigurationError, match="not producer"):
        create({**required, "producer": {"message.timeout.ms": 5}}, Path("."))


@pytest.mark.parametrize("landing", [True, False])
def test_a_required_topic_exporter_gates_answers_in_the_gateway(
    tmp_path: Path, landing: bool
) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text(
        f"[exporters.landing]\nenabled = {str(landing).lower()}\n"
        "[exporters.topic]\nbootstrap_servers = 'x:1'\nrequired = true\n"
        "[exporters.prometheus]\nlisten = '127.0.0.1:0'\n"
    )
    cfg = load_config(toml, data_dir=tmp_path, environ={})
    specs = [(spec.name, spec.options) for spec in cfg.exporters]
    exporters = with_exporter_process(load_exporters(specs, tmp_path), specs, tmp_path)
    path = ExportPath(exporters)
    # Every gating exporter is awaited before the answer; Prometheus stays fail-open in
    # the exporter process.
    assert path.gating == (["landing", "topic"] if landing else ["topic"])
    assert [e.name for e in exporters if isinstance(e, ChildExporters)] == ["exporter-process"]


@pytest.mark.integration
async def test_an_existing_topic_with_another_partition_count_is_named_once(
    tmp_path: Path,
) -> None:
    """``partitions = 12`` meeting a 1-partition topic: one warning naming both counts,
    the topic left as it is (adding partitions would move instances' records midway)."""
    tansu = TansuProcess(log_path=tmp_path / "tansu.log").start()
    try:
        admin = AdminClient({"bootstrap.servers": tansu.bootstrap, "log_level": 3})
        admin.create_topics([NewTopic("existing", 1, 1)])["existing"].result(MIN_DEADLINE_S)
        for topic, configured, want in (
            ("existing", 12, [("existing", 1, 12)]),
            ("existing", 1, []),
            ("fresh", 12, []),
        ):
            exporter = create(
                {"bootstrap_servers": tansu.bootstrap, "topic": topic, "partitions": configured},
                tmp_path,
            )
            assert isinstance(exporter, QueuedExporter)
            with structlog.testing.capture_logs() as logs:
                await exporter.start()
                await exporter.close(5)
            differ = [e for e in logs if e["event"] == "topic_exporter_partitions_differ"]
            assert [(e["topic"], e["partitions"], e["configured"]) for e in differ] == want
            assert not [e for e in logs if e["event"] == "topic_exporter_topic_not_created"]
        topics = admin.list_topics(timeout=MIN_DEADLINE_S).topics
        assert (len(topics["existing"].partitions), len(topics["fresh"].partitions)) == (1, 12)
    finally:
        tansu.stop()
