"""A real Prometheus scrapes the gateway's Prometheus exporter while librdkafka pushes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from tests.kadmin import set_subscription
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.prometheus_server import PrometheusServer, prometheus_binary
from tests.rdkafka_goodbye import Goodbye

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(prometheus_binary() is None, reason="needs Debian's prometheus package"),
]

CONFIG = """
[exporters.landing]
roll_seconds = 0.3

[exporters.prometheus]
enabled = true
listen = "127.0.0.1:0"
min_expiry_s = 1
"""
METRIC = "org_apache_kafka_producer_connection_creation_total"


def exporter_port(gw: GatewayProcess) -> int:
    (event,) = gw.events("prometheus_exporter_listening")
    return int(str(event["listen"]).rsplit(":", 1)[1])


def admin_counters(gw: GatewayProcess) -> dict[tuple[str, str], float]:
    url = f"http://127.0.0.1:{gw.metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=MIN_DEADLINE_S).read().decode()
    return {
        (s.name, s.labels.get("exporter", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_prometheus_sees_librdkafka_series_until_the_client_closes(tmp_path: Path) -> None:
    gw = GatewayProcess(tmp_path / "data", CONFIG).start()
    prom = None
    try:
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        prom = PrometheusServer(tmp_path / "prom", (f"127.0.0.1:{exporter_port(gw)}",)).start()
        goodbye = Goodbye("prom-1")
        prod = Producer(goodbye.config({"bootstrap.servers": gw.bootstrap, "client.id": "prom-1"}))
        found: list[dict[str, object]] = []

        def series() -> bool:
            prod.poll(0.1)
            found[:] = prom.query(f'{METRIC}{{client_id="prom-1"}}')
            return bool(found)

        wait_for(series, 60, interval=0.5, what="the producer's series in Prometheus")
        ((sample),) = found
        labels = sample["metric"]
        assert isinstance(labels, dict)
        assert labels["job"] == "clientmetrics"
        instance_id = labels["client_instance_id"]
        assert len(str(instance_id)) == 36  # canonical UUID text, KIP-714's label
        assert float(sample["value"][1]) >= 0  # type: ignore[index]
        # A monotonic sum: a counter family, its sample named with ``_total``.
        assert prom.metadata(METRIC.removesuffix("_total")) == "counter"
        latency = prom.query(
            f'org_apache_kafka_producer_node_request_latency_avg{{client_instance_id="{instance_id}"}}'
        )
        assert latency
        assert all("node_id" in s["metric"] for s in latency)  # type: ignore[operator]
        counters = admin_counters(gw)
        assert counters[("clientmetrics_exporter_received_total", "prometheus")] >= 1
        assert counters[("clientmetrics_exporter_exported_total", "prometheus")] >= 1
        assert counters[("clientmetrics_exporter_dropped_total", "prometheus")] == 0
        assert counters[("clientmetrics_exporter_exported_total", "landing")] >= 1

        goodbye.close_after_push(prod)  # the terminating push ends the instance, its series go
        wait_for(
            lambda: not prom.query(f'{{client_instance_id="{instance_id}"}}'),
            30,
            interval=0.5,
            what="the closed client's series to go",
        )
    finally:
        if prom is not None:
            prom.stop()
        assert gw.stop() == 0
    assert gw.tracebacks() == []


CHILD = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "client.id": "killed", "log_level": 3})
while True:
    p.poll(0.1)
"""


def test_a_killed_client_expires_from_the_scrape(tmp_path: Path) -> None:
    gw = GatewayProcess(tmp_path / "data", CONFIG).start()
    child = None
    try:
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        url = f"http://127.0.0.1:{exporter_port(gw)}/metrics"

        def listed() -> bool | None:
            """Whether the scrape lists the client; None: no answer in time (the exporter
            runs niced, and a loaded host may hold it back), so ask again."""
            try:
                text = urllib.request.urlopen(url, timeout=5).read().decode()
            except (TimeoutError, urllib.error.URLError):
                return None
            return 'client_id="killed"' in text

        child = subprocess.Popen([sys.executable, "-c", CHILD, gw.bootstrap])
        wait_for(lambda: listed() is True, 60, interval=0.3, what="its series")
        os.kill(child.pid, signal.SIGKILL)  # no terminating push: only expiry removes it
        child.wait()
        killed_at = time.monotonic()
        wait_for(lambda: listed() is False, 30, interval=0.2, what="expiry")
        # max(min_expiry_s = 1 s, 3 x the 1 s push interval), checked on each scrape.
        assert time.monotonic() - killed_at >= 1.5
    finally:
        if child is not None and child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        assert gw.stop() == 0
