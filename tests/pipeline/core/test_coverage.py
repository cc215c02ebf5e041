"""Standard-metrics coverage per client software, from pushes the real clients sent."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.coverage import SOFTWARE_ARROW, software_coverage
from clientmetrics.telemetry.otlp_arrow import decode_points
from clientmetrics.telemetry.standard import STANDARD_BY_ROLE
from tests.golden import FRANZ_GO, JAVA, LIBRDKAFKA

P = "org.apache.kafka."
#: librdkafka's fixture was captured from confluent-kafka 2.16.1 (tests/data/README.md).
RDKAFKA = ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")


def _labels(folder: Path, role: str) -> tuple[str, str, str]:
    if folder == LIBRDKAFKA:
        return (f"rdkafka-{role}", *RDKAFKA)
    labels = json.loads((folder / f"{role}-labels.json").read_text())
    return (
        labels["client_instance_id"],
        labels["client_software_name"],
        labels["client_software_version"],
    )


def points_of(*pushes: tuple[Path, str]) -> pa.Table:
    """Decoded points of golden pushes, each with its instance and software labels."""
    payloads = [(folder / f"{role}-push.otlp.bin").read_bytes() for folder, role in pushes]
    points = decode_points(pa.array(payloads, pa.binary())).points
    labels = [_labels(folder, role) for folder, role in pushes]
    rows = points.column("row").to_pylist()
    columns = {
        name: pa.array([labels[r][i] for r in rows], pa.string())
        for i, name in enumerate(
            ("client_instance_id", "client_software_name", "client_software_version")
        )
    }
    return pa.table({**columns, "metric_name": points.column("metric_name")})


ALL = [
    (folder, role) for folder in (JAVA, FRANZ_GO, LIBRDKAFKA) for role in ("producer", "consumer")
]


def test_each_real_clients_coverage_as_read_off_its_pushes() -> None:
    table = software_coverage(points_of(*ALL))
    assert table.schema == SOFTWARE_ARROW
    rows = {(r["client_software_name"], r["client_software_version"]): r for r in table.to_pylist()}
    assert list(rows) == [("apache-kafka-java", "4.4.0"), RDKAFKA, ("kgo", "v1.22.3")]
    every = sorted(STANDARD_BY_ROLE["producer"] | STANDARD_BY_ROLE["consumer"])
    # The Java client sends every standard metric, as the KIP says it does by definition.
    java = rows["apache-kafka-java", "4.4.0"]
    assert (java["instances"], java["roles"]) == (2, ["consumer", "producer"])
    assert (java["standard_sent"], java["standard_missing"], java["coverage"]) == (every, [], 1.0)
    # librdkafka 2.16 too (its producer's 10 metrics and its consumer's 13 include all 21).
    rdkafka = rows[RDKAFKA]
    assert (rdkafka["standard_sent"], rdkafka["standard_missing"]) == (every, [])
    # franz-go: per-broker latency, and for its consumer connection creation and commit
    # latency; none of the queue-time, throttle, rebalance, fetch-manager or poll metrics.
    franz = rows["kgo", "v1.22.3"]
    assert franz["instances"] == 2
    assert franz["standard_sent"] == [
        P + "consumer.connection.creation.rate",
        P + "consumer.connection.creation.total",
        P + "consumer.coordinator.commit.latency.avg",
        P + "consumer.coordinator.commit.latency.max",
        P + "consumer.node.request.latency.avg",
        P + "consumer.node.request.latency.max",
        P + "producer.node.request.latency.avg",
        P + "producer.node.request.latency.max",
    ]
    assert franz["standard_missing"] == [
        P + "consumer.coordinator.assigned.partitions",
        P + "consumer.coordinator.rebalance.latency.avg",
        P + "consumer.coordinator.rebalance.latency.max",
        P + "consumer.coordinator.rebalance.latency.total",
        P + "consumer.fetch.manager.fetch.latency.avg",
        P + "consumer.fetch.manager.fetch.latency.max",
        P + "consumer.poll.idle.ratio.avg",
        P + "producer.connection.creation.rate",
        P + "producer.connection.creation.total",
        P + "producer.produce.throttle.time.avg",
        P + "producer.produce.throttle.time.max",
        P + "producer.record.queue.time.avg",
        P + "producer.record.queue.time.max",
    ]
    assert franz["coverage"] == 8 / 21


def test_only_the_roles_played_count() -> None:
    """A producer-only software is not held to the consumer's standard metrics."""
    row = software_coverage(points_of((FRANZ_GO, "producer"))).to_pylist()[0]
    assert row["roles"] == ["producer"]
    assert len(row["standard_sent"]) + len(row["standard_missing"]) == 8
    assert row["coverage"] == 2 / 8
    # Metrics outside both prefixes (Java's org.apache.kafka.app.info...) give no role.
    points = points_of((JAVA, "producer"))
    apps = points.filter(pc.starts_with(points.column("metric_name"), P + "app."))
    assert apps.num_rows > 0
    row = software_coverage(apps).to_pylist()[0]
    assert (row["roles"], row["standard_sent"], row["coverage"]) == ([], [], None)


def test_no_points_no_software() -> None:
    empty = points_of(*ALL).slice(0, 0)
    assert software_coverage(empty).num_rows == 0


def test_the_inventory_keeps_each_instances_standard_metrics_across_batches() -> None:
    from clientmetrics.pipeline.core.clients import client_views, merge_inventory
    from clientmetrics.pipeline.core.decode import decode_pushes
    from tests.synthetic import Push, landing_table

    def pushes(*which: tuple[Path, str, int]) -> pa.Table:
        return landing_table(
            [
                Push(at, _labels(folder, role)[0], (folder / f"{role}-push.otlp.bin").read_bytes())
                for folder, role, at in which
            ]
        )

    first = pushes((JAVA, "producer", 1_000_000), (FRANZ_GO, "consumer", 1_000_000))
    view = client_views(first, decode_pushes(first))
    sent = dict(zip(view.column("client_instance_id").to_pylist(),
                    view.column("standard_metrics").to_pylist(), strict=True))  # fmt: skip
    java_id, franz_id = _labels(JAVA, "producer")[0], _labels(FRANZ_GO, "consumer")[0]
    assert sent[java_id] == sorted(STANDARD_BY_ROLE["producer"])
    assert sent[franz_id] == [
        P + "consumer.connection.creation.rate",
        P + "consumer.connection.creation.total",
        P + "consumer.coordinator.commit.latency.avg",
        P + "consumer.coordinator.commit.latency.max",
        P + "consumer.node.request.latency.avg",
        P + "consumer.node.request.latency.max",
    ]
    # A later batch in which franz-go pushed only its producer-side copy: the union stays.
    carried = view
    later = pushes((FRANZ_GO, "producer", 2_000_000))
    later = later.set_column(
        later.schema.get_field_index("client_instance_id"),
        "client_instance_id",
        pa.array([franz_id], pa.string()),
    )
    merged = merge_inventory(carried, client_views(later, decode_pushes(later)))
    rows = {r["client_instance_id"]: r["standard_metrics"] for r in merged.to_pylist()}
    assert rows[java_id] == sorted(STANDARD_BY_ROLE["producer"])
    assert rows[franz_id] == sorted(
        [*sent[franz_id], P + "producer.node.request.latency.avg",
         P + "producer.node.request.latency.max"]
    )  # fmt: skip
