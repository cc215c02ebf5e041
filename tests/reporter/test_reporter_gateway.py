"""Real kafka-python clients with the reporter against the standalone gateway process.

The standalone gateway serves no FindCoordinator, so the consumer is configured
with a group (group_id, client_rack) but does not join it; the proxy-mode test
in front of a real broker is not here yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from clientmetrics.reporter import STANDARD_METRICS, enable_telemetry
from clientmetrics.telemetry.otlp import DELTA
from tests.kadmin import set_subscription
from tests.landed import names_of, rows_of
from tests.procs import GatewayProcess, wait_for

pytestmark = pytest.mark.integration

FAST = """
[exporters.landing]
roll_seconds = 0.3
"""
P = "org.apache.kafka."
PRODUCER_EXPECTED = {
    P + "producer.connection.creation.rate",
    P + "producer.connection.creation.total",
    P + "producer.node.request.latency.avg",
    P + "producer.node.request.latency.max",
    P + "producer.produce.throttle.time.avg",
    P + "producer.produce.throttle.time.max",
    P + "producer.record.queue.time.avg",
}
CONSUMER_EXPECTED = {
    P + "consumer.connection.creation.rate",
    P + "consumer.connection.creation.total",
    P + "consumer.node.request.latency.avg",
    P + "consumer.node.request.latency.max",
    P + "consumer.coordinator.commit.latency.avg",
    P + "consumer.coordinator.assigned.partitions",
    P + "consumer.fetch.manager.fetch.latency.avg",
}


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", FAST).start()
    yield gw
    assert gw.stop() == 0, gw.log_lines[-10:]


def resource_of(row: dict[str, object]) -> dict[str, str]:
    data = MetricsData()
    data.ParseFromString(bytes(row["payload"]))  # type: ignore[arg-type]
    return {kv.key: kv.value.string_value for kv in data.resource_metrics[0].resource.attributes}


def test_producer_and_consumer_metrics_land_with_kip_names(gateway: GatewayProcess) -> None:
    set_subscription(gateway.bootstrap, "all", {"metrics": P, "interval.ms": "1000"})
    prod = KafkaProducer(
        bootstrap_servers=gateway.bootstrap, client_id="rep-prod", enable_idempotence=False
    )
    cons = KafkaConsumer(
        bootstrap_servers=gateway.bootstrap,
        client_id="rep-cons",
        group_id="rep-group",
        client_rack="rack-9",
    )
    # close() waits for the terminating push at most close_timeout_s (5 s by default, the
    # product's bound); this test asks that it lands, so it gives a busy machine 60 s.
    prod_reporter = enable_telemetry(prod, close_timeout_s=60)
    cons_reporter = enable_telemetry(cons, close_timeout_s=60)
    data = gateway.data_dir

    def landed() -> bool:
        return names_of(rows_of(data, "rep-prod")) >= PRODUCER_EXPECTED and (
            names_of(rows_of(data, "rep-cons")) >= CONSUMER_EXPECTED
        )

    try:
        wait_for(landed, 30, what="the KIP's standard metrics from both clients")
    finally:
        prod.close()
        cons.close()
    wait_for(
        lambda: all(
            any(r["terminating"] for r in rows_of(data, c)) for c in ("rep-prod", "rep-cons")
        ),
        10,
        what="both terminating pushes",
    )
    for client_id, reporter in (("rep-prod", prod_reporter), ("rep-cons", cons_reporter)):
        rows = rows_of(data, client_id)
        # KIP-1313: the header's id is the telemetry id; the gateway kept the client's own.
        assert {r["client_instance_id"] for r in rows} == {str(reporter.client_instance_id())}
        assert {r["client_software_name"] for r in rows} == {"kafka-python"}
        assert reporter.stats.versions == {1}
        assert [r["terminating"] for r in rows].count(True) == 1
        # Every name is either a KIP standard metric or follows the naming rule.
        assert all(n.startswith(P) for n in names_of(rows))
    consumer_rows = [r for r in rows_of(data, "rep-cons") if r["payload"]]
    assert resource_of(consumer_rows[0]) == {"group_id": "rep-group", "client_rack": "rack-9"}
    assert PRODUCER_EXPECTED | CONSUMER_EXPECTED <= STANDARD_METRICS


def test_gateway_asks_for_deltas_and_gets_them(gateway: GatewayProcess) -> None:
    set_subscription(
        gateway.bootstrap,
        "totals",
        {"metrics": P + "producer.connection.creation.total", "interval.ms": "500"},
    )
    prod = KafkaProducer(
        bootstrap_servers=gateway.bootstrap, client_id="rep-delta", enable_idempotence=False
    )
    enable_telemetry(prod)
    try:
        wait_for(
            lambda: len([r for r in rows_of(gateway.data_dir, "rep-delta") if r["payload"]]) >= 3,
            20,
            what="three pushes",
        )
    finally:
        prod.close()
    temporalities = set()
    for row in rows_of(gateway.data_dir, "rep-delta"):
        if not row["payload"]:
            continue
        data = MetricsData()
        data.ParseFromString(bytes(row["payload"]))  # type: ignore[arg-type]
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                assert [m.name for m in sm.metrics] == [P + "producer.connection.creation.total"]
                temporalities |= {m.sum.aggregation_temporality for m in sm.metrics}
    assert temporalities == {DELTA}


def test_admin_client_pushes_and_terminates(gateway: GatewayProcess) -> None:
    set_subscription(gateway.bootstrap, "fast", {"metrics": P, "interval.ms": "500"})
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, client_id="rep-admin")
    reporter = enable_telemetry(admin)
    try:
        wait_for(lambda: reporter.stats.pushes >= 1, 15, what="an admin push")
    finally:
        admin.close()
    wait_for(
        lambda: any(r["terminating"] for r in rows_of(gateway.data_dir, "rep-admin")),
        10,
        what="the admin client's terminating push",
    )
    names = names_of(rows_of(gateway.data_dir, "rep-admin"))
    # kafka-python names the group "admin-metrics" (Java: "admin-client-metrics").
    assert P + "admin.connection.creation.total" in names
