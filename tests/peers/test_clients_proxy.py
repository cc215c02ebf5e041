"""Java, franz-go and librdkafka through the gateway as a proxy in front of Kafka 4.4.

Kafka runs with no telemetry plugin, so it does not advertise GetTelemetrySubscriptions
or PushTelemetry itself: every push that lands was answered by the proxy. The clients
produce and consume through it for real (topic, group, offsets), and close.

``CLIENTMETRICS_CAPTURE=DIR`` saves each client's last push with metrics (the decompressed
OTLP as it landed, and its labels) into ``DIR``: that is how ``tests/data/java-4.4.0`` and
``tests/data/franz-go-1.22.3`` were captured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from confluent_kafka import Producer
from peers.kafka import KafkaBroker

from clientmetrics.dashboard.inventory import with_landed_clients
from clientmetrics.pipeline.core.batch import PassPlan, pass_input, process_group
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.core.schemas import CARRIED, LANDING_ARROW
from tests.kadmin import set_subscription
from tests.kafka import KAFKA_NODE, kafka_broker, proxy_gateway
from tests.landed import landed_table
from tests.peers.clients import Row, franz, java, names, node_labels, rows_by_client
from tests.pipeline.core.test_java_bootstrap import readme_rules
from tests.procs import GatewayProcess, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory, plugins=())


@pytest.fixture(scope="module")
def proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from proxy_gateway(kafka, tmp_path_factory.mktemp("proxy") / "data")


def test_three_real_clients_through_the_proxy(proxy: GatewayProcess, tmp_path: Path) -> None:
    """All metrics from each client, the broker one label, and Java's close ending it."""
    set_subscription(proxy.bootstrap, "everything", {"metrics": "*", "interval.ms": "1000"})
    rdkafka = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "px-rdkafka"})
    common = ("--topic", "px-java", "--messages", "200", "--rate", "40", "--close")
    with ExitStack() as stack:
        jv = stack.enter_context(
            java(proxy.bootstrap, tmp_path, "--client-id", "px-java", "--group", "px", *common)
        )
        fg = stack.enter_context(
            franz(proxy.bootstrap, tmp_path, "-client-id", "px-franz", "-topic", "px-franz",
                  "-messages", "200", "-rate", "40", "-close")
        )  # fmt: skip
        instances = jv.instance_ids()
        clients = [f"px-{c}-{r}" for c in ("java", "franz") for r in ("producer", "consumer")]

        def all_pushed() -> bool:
            rdkafka.produce("px-rdkafka", b"x")
            rdkafka.poll(0.05)
            rows = rows_by_client(proxy.data_dir)
            return all(names(rows.get(c, [])) for c in [*clients, "px-rdkafka"])

        wait_for(all_pushed, 180, what="metrics from every client through the proxy")
        rdkafka.flush(30)
        # close() leaves the group and drains the producer: slow on a busy machine, and a
        # client killed for being slow never sends its goodbye. Wait for it to exit.
        assert jv.stop(timeout=180) == 0, jv.log_tail()
        fg.stop()
    assert {e["role"] for e in jv.events("closed")} == set(instances), jv.log_tail()

    def terminated(client: str) -> bool:
        return any(r["terminating"] for r in rows_by_client(proxy.data_dir).get(client, []))

    java_clients = [f"px-java-{role}" for role in instances]
    wait_for(lambda: all(map(terminated, java_clients)), 60, what="Java's terminating pushes")
    rows = rows_by_client(proxy.data_dir)
    # Java: its metric names, records through Kafka both ways, and no telemetry errors.
    assert names(rows["px-java-producer"]) >= {
        "org.apache.kafka.producer.record.send.rate",
        "org.apache.kafka.producer.node.request.latency.avg",
    }
    assert names(rows["px-java-consumer"]) >= {
        "org.apache.kafka.consumer.fetch.manager.records.consumed.total",
        "org.apache.kafka.consumer.coordinator.assigned.partitions",
    }
    delivered = jv.wait_event("delivered", 5)
    assert delivered["failed"] == 0
    assert delivered["acked"] > 0
    assert jv.wait_event("done", 5, role="consumer")["consumed"] > 0
    assert not jv.events("no_instance")
    assert fg.wait_event("done", 5, role="consumer")["consumed"] > 0
    # Each told the proxy its software (franz-go after its KIP-511 retry below v5).
    software = {c: {(r["client_software_name"], r["client_software_version"]) for r in rows[c]}
                for c in clients}  # fmt: skip
    assert software["px-java-producer"] == {("apache-kafka-java", "4.4.0")}
    assert software["px-franz-consumer"] == {("kgo", "v1.22.3")}
    # Kafka is node 1: Java says node-1, librdkafka node.id 1, franz-go node_id 1.
    for client in [*clients, "px-rdkafka"]:
        assert str(KAFKA_NODE) in node_labels(rows[client]), client
    # close() sent each Java client's terminating push: its instance's last, and ended.
    for role, instance in instances.items():
        mine = [r for r in rows[f"px-java-{role}"] if r["client_instance_id"] == instance]
        assert [r["terminating"] for r in mine].count(True) == 1, role
        assert max(mine, key=lambda r: r["received_at"])["terminating"], role  # type: ignore[arg-type,return-value]
    inventory = with_landed_clients(None, landed_table(proxy.data_dir))
    assert inventory is not None
    ended = {
        r["client_instance_id"]: r["terminated"] for r in inventory.to_pylist() if r["terminated"]
    }
    assert set(instances.values()) <= set(ended)
    assert no_alerts_under_the_readme_rule(proxy.data_dir, set(instances.values()))
    capture(rows)


def no_alerts_under_the_readme_rule(data_dir: Path, instances: set[str]) -> bool:
    """Whether these instances' landed pushes make no alert event under the README's rule.

    The Java client sends NaN for its bootstrap connection's latency (node.id -1) once
    it is idle: no measurement, so no episode (``core.alerts.measured``).
    """
    landed = landed_table(data_dir).cast(LANDING_ARROW)
    mine = landed.filter(pc.is_in(landed.column("client_instance_id"), pa.array(sorted(instances))))
    rules = parse_rules(readme_rules()).rules
    state = {tag: schema.empty_table() for tag, schema in CARRIED.items()}
    plan = PassPlan(staging="", window_seconds=60, rules=rules)
    sides = process_group(pass_input(mine, state), plan).sides
    return sides["alerts"].num_rows == sides["alert_state"].num_rows == 0


def capture(rows: dict[str, list[Row]]) -> None:
    """With ``CLIENTMETRICS_CAPTURE`` set, keep each client's last push with metrics."""
    target = os.environ.get("CLIENTMETRICS_CAPTURE")
    if not target:
        return
    for client, pushes in rows.items():
        full = [r for r in pushes if r["payload"]]
        if not full:
            continue
        last = max(full, key=lambda r: r["received_at"])  # type: ignore[arg-type,return-value]
        folder = Path(target) / str(client)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "push.otlp.bin").write_bytes(bytes(last["payload"]))  # type: ignore[arg-type]
        labels = {k: v for k, v in last.items() if k not in ("payload", "received_at")}
        (folder / "labels.json").write_text(json.dumps(labels, indent=1, default=str) + "\n")
