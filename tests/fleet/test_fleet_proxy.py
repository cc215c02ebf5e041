"""The whole fleet through the proxy in front of Kafka 4.4, with real clients.

Kafka runs with no telemetry plugin: every push is answered by the proxy, and every
connection is recorded by it. Pushing: the Java client, librdkafka (confluent-kafka)
and franz-go. Not pushing: kafka-python without the reporter (cannot) and a Java
client with ``enable.metrics.push=false`` (could, does not). Each must appear once
in the fleet with its software, version, principal and coverage, in the core's
table and on the dashboard's page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import kafka as kafka_python
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from peers.kafka import KafkaBroker
from peers.sarama_go import sarama_go

from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.dashboard.inventory import with_landed_clients
from clientmetrics.pipeline.core.fleet import fleet_table
from clientmetrics.pipeline.core.schemas import CLIENTS_ARROW
from clientmetrics.telemetry.connections import landed_connections
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS
from tests.kadmin import set_subscription
from tests.kafka import kafka_broker, proxy_gateway
from tests.landed import landed_table
from tests.peers.clients import franz, java, names, rows_by_client, running
from tests.procs import GatewayProcess, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

JAVA = ("apache-kafka-java", "4.4.0")
PUSHING = ("fl-java-producer", "fl-java-consumer", "fl-rdkafka", "fl-franz-producer")


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory, plugins=())


@pytest.fixture(scope="module")
def proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from proxy_gateway(
        kafka,
        tmp_path_factory.mktemp("fleet") / "data",
        "[gateway]\nconnection_records_interval_ms = 500\n",
    )


def _connections(data_dir: Path) -> Any:
    import pyarrow as pa

    files = sorted(landed_connections(data_dir).glob("date=*/hour=*/*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else None


def _fleet(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    connections = _connections(data_dir)
    if connections is None:
        return {}
    landed = landed_table(data_dir)
    clients = with_landed_clients(None, landed) if landed.num_rows else None
    out: dict[str, list[dict[str, Any]]] = {}
    pushing = CLIENTS_ARROW.empty_table() if clients is None else clients
    for row in fleet_table(connections, pushing).to_pylist():
        out.setdefault(row["client_id"], []).append(row)
    return out


def test_every_client_appears_once_with_its_coverage(proxy: GatewayProcess, tmp_path: Path) -> None:
    set_subscription(proxy.bootstrap, "everything", {"metrics": "*", "interval.ms": "1000"})
    rdkafka = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "fl-rdkafka"})
    common = ("--messages", "40", "--rate", "40", "--close")
    with ExitStack() as stack:
        jv = stack.enter_context(
            java(proxy.bootstrap, tmp_path, "--client-id", "fl-java", "--group", "fl",
                 "--topic", "fl-java", *common)
        )  # fmt: skip
        off = stack.enter_context(
            java(proxy.bootstrap, tmp_path, "--client-id", "fl-off", "--role", "producer",
                 "--topic", "fl-off", "--property", "enable.metrics.push=false",
                 "--instance-timeout", "1", *common)
        )  # fmt: skip
        fg = stack.enter_context(
            franz(proxy.bootstrap, tmp_path, "-client-id", "fl-franz", "-topic", "fl-franz",
                  "-messages", "40", "-rate", "40", "-close")
        )  # fmt: skip
        sarama = stack.enter_context(
            running(lambda: sarama_go(proxy.bootstrap, "-client-id", "fl-sarama",
                                      "-topic", "fl-sarama", "-messages", "10"))
        )  # fmt: skip
        kp = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="fl-kpy", acks="all")
        for i in range(10):
            kp.send("fl-kpy", f"v{i}".encode())
        kp.flush(60)
        kp.close()

        def all_seen() -> bool:
            rdkafka.produce("fl-rdkafka", b"x")
            rdkafka.poll(0.05)
            pushed = rows_by_client(proxy.data_dir)
            fleet = _fleet(proxy.data_dir)
            return all(names(pushed.get(c, [])) for c in PUSHING) and {
                *PUSHING,
                "fl-off-producer",
                "fl-kpy",
                "fl-sarama",
            } <= set(fleet)

        wait_for(all_seen, 240, what="every client's connections and pushes")
        rdkafka.flush(30)
        assert sarama.wait_event("done", 60)["sent"] == 10
        assert off.stop(timeout=180) == 0, off.log_tail()
        assert jv.stop(timeout=180) == 0, jv.log_tail()
        fg.stop()
    fleet = _fleet(proxy.data_dir)

    def one(client_id: str) -> dict[str, Any]:
        rows = fleet[client_id]
        assert len(rows) == 1, rows
        assert rows[0]["principal"] == "User:ANONYMOUS"
        return rows[0]

    for client_id in ("fl-java-producer", "fl-java-consumer"):
        row = one(client_id)
        assert (row["client_software_name"], row["client_software_version"]) == JAVA
        assert (row["coverage"], row["reason"]) == ("pushes", "")
        assert len(row["instances"]) == 1
        assert row["pushes"] > 0
    franz_row = one("fl-franz-producer")
    assert (franz_row["client_software_name"], franz_row["coverage"]) == ("kgo", "pushes")
    rd = one("fl-rdkafka")
    assert rd["client_software_name"] == "confluent-kafka-python"
    assert rd["coverage"] == "pushes"
    off_row = one("fl-off-producer")
    assert (off_row["client_software_name"], off_row["client_software_version"]) == JAVA
    assert (off_row["coverage"], off_row["reason"]) == ("does_not", "telemetry_off")
    assert off_row["pushes"] == 0
    kpy = one("fl-kpy")
    assert (kpy["client_software_name"], kpy["client_software_version"]) == (
        "kafka-python",
        kafka_python.__version__,
    )
    assert kpy["coverage"] == "cannot"
    go = one("fl-sarama")
    assert (go["client_software_name"], go["client_software_version"]) == ("sarama", "v1.61.1")
    assert (go["coverage"], go["pushes"]) == ("cannot", 0)
    assert kpy["connections"] >= 1
    # Usage counted by the proxy off the Produce requests' batch headers: exactly the
    # records each producer had acknowledged (42: 40 and the two its close sends).
    expected = {"fl-kpy": 10, "fl-sarama": 10, "fl-java-producer": 42, "fl-off-producer": 42}

    def counted() -> bool:  # the last connections' counts land with the next interval
        produced = _produced_records(proxy.data_dir)
        return all(produced.get(c) == n for c, n in expected.items())

    wait_for(counted, 60, what=f"produced records {expected}")
    produced = _produced_records(proxy.data_dir)
    assert produced["fl-kpy"] == 10
    assert produced["fl-sarama"] == 10
    assert produced["fl-java-producer"] == jv.wait_event("delivered", 5)["acked"] == 42
    assert produced["fl-off-producer"] == off.wait_event("delivered", 5)["acked"] == 42
    assert produced.get("fl-java-consumer", 0) == 0
    # The dashboard's page shows the same, in a real browser: one row per client.
    shown = _rows_in_browser(proxy.data_dir)
    for client_id, coverage in [
        *((c, "pushes") for c in PUSHING),
        ("fl-off-producer", "does_not"),
        ("fl-kpy", "cannot"),
        ("fl-sarama", "cannot"),
    ]:
        assert shown.count((coverage, client_id)) == 1, (client_id, shown)
    assert all(c != "fl-kpy" or cov == "cannot" for cov, c in shown)
    assert proxy.metric("connection_records_dropped_total") == 0


def _rows_in_browser(data_dir: Path) -> list[tuple[str, str]]:
    """(coverage, client.id) of every row of the fleet page, as Chromium renders it."""
    server = DashboardServer(Dashboard(DashboardConfig(data_dir)))
    server.start()
    try:
        if not CHROMIUM.exists():  # the page's HTML, where there is no browser
            page = Dashboard(DashboardConfig(data_dir)).handle("/fleet").body.decode()
            return re.findall(r"<tr class=(\w+) data-client-id='([^']*)'>", page)
        sync_api = pytest.importorskip("playwright.sync_api")
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(f"{server.url}fleet")
                page.wait_for_selector("table.fleet tbody tr")
                rows = page.evaluate(
                    "() => [...document.querySelectorAll('table.fleet tbody tr')]"
                    ".map(r => [r.className, r.dataset.clientId, r.offsetHeight])"
                )
            finally:
                browser.close()
    finally:
        server.stop()
    assert all(height > 0 for _, _, height in rows), rows  # every row is laid out
    return [(cls, client) for cls, client, _ in rows]


def _produced_records(data_dir: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in _connections(data_dir).to_pylist():
        out[row["client_id"]] = out.get(row["client_id"], 0) + row["produced_records"]
    return out
