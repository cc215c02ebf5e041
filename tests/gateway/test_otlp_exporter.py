"""The OTLP/HTTP exporter against a receiver decoding with opentelemetry-proto."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.otlp import create, retry_after_s
from clientmetrics.exporters.queued import QueuedExporter
from clientmetrics.telemetry import otlp
from clientmetrics.telemetry.model import AcceptedPush
from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.otlp_receiver import BlackHole, OtlpReceiver
from tests.procs import BIN, MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.tlsfiles import server_context


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def push(n: int, *, client_id: str = "c") -> AcceptedPush:
    payload = otlp.build_metrics_data(
        [otlp.gauge(f"m.{n}", n, time_unix_nano=n + 1)], resource_attributes={"client_rack": "r1"}
    ).SerializeToString()
    return AcceptedPush(
        n, uuid.UUID(int=n + 1), 7, False, client_id, "sw", "1.0", "10.0.0.1", 4000 + n,
        "User:alice", 3, "SASL_SSL", "SASL_SSL", 0, 1000, payload,
    )  # fmt: skip


def exporter(options: dict[str, object]) -> QueuedExporter:
    built = create(options, Path("."))
    assert isinstance(built, QueuedExporter)
    return built


async def test_batches_carry_the_labels_as_resource_attributes(receiver: OtlpReceiver) -> None:
    exp = exporter(
        {
            "endpoint": receiver.url,
            "headers": {"Authorization": "Bearer t0ken"},
            "labels": ["client_id", "client_instance_id", "principal", "client_source_port"],
            "max_batch": 3,
            "max_delay_ms": 50,
        }
    )
    await exp.start()
    for n in range(5):
        exp.offer(push(n))
    await exp.close(10)
    assert [len(r.resource_metrics) for r in receiver.requests] == [3, 2]
    ((_, _, headers), *_) = receiver.attempts
    assert headers["authorization"] == "Bearer t0ken"
    assert headers["content-encoding"] == "gzip"
    assert headers["content-type"] == "application/x-protobuf"
    got = receiver.metrics()
    assert [name for _, name in got] == [f"m.{n}" for n in range(5)]
    assert got[4][0] == {
        "client_rack": "r1",
        "client_id": "c",
        "client_instance_id": str(uuid.UUID(int=5)),
        "principal": "User:alice",
        "client_source_port": 4004,
    }
    assert (exp.stats.exported, exp.stats.failed) == (5, 0)


async def test_503_with_retry_after_then_200_delivers_everything_once(
    receiver: OtlpReceiver,
) -> None:
    receiver.script = [(503, {"Retry-After": "1"}), (429, {"Retry-After": "0"})]
    exp = exporter({"endpoint": receiver.url, "max_delay_ms": 0, "compression": "none"})
    await exp.start()
    for n in range(4):
        exp.offer(push(n))
    await exp.close(15)
    statuses = [status for _, status, _ in receiver.attempts]
    assert statuses[:3] == [503, 429, 200]
    assert sorted(name for _, name in receiver.metrics()) == [f"m.{n}" for n in range(4)]
    first, second = receiver.attempts[0][0], receiver.attempts[1][0]
    assert second - first >= 0.95  # Retry-After: 1 was honoured
    assert exp.stats.extra["retries"] == 2
    assert (exp.stats.exported, exp.stats.failed, exp.stats.dropped) == (4, 0, 0)


async def test_a_non_retryable_status_fails_the_batch_and_is_counted(
    receiver: OtlpReceiver,
) -> None:
    receiver.script = [(400, {})]
    exp = exporter({"endpoint": receiver.url, "max_delay_ms": 0})
    await exp.start()
    exp.offer(push(1))
    await exp.flush(5)
    exp.offer(push(2))
    await exp.close(5)
    assert (exp.stats.failed, exp.stats.exported) == (1, 1)
    assert [name for _, name in receiver.metrics()] == ["m.2"]


async def test_tls_with_a_client_certificate(tmp_path: Path) -> None:
    authority = trustme.CA()
    server = server_context(authority, require_client=True)  # no client certificate, no request
    client = authority.issue_cert("gateway-1.example")
    ca, cert, key = tmp_path / "ca.pem", tmp_path / "client.pem", tmp_path / "client.key"
    authority.cert_pem.write_to_path(str(ca))
    client.cert_chain_pems[0].write_to_path(str(cert))
    client.private_key_pem.write_to_path(str(key))
    receiver = OtlpReceiver(tls=server).start()
    try:
        options: dict[str, object] = {"endpoint": receiver.url, "ca": str(ca), "max_delay_ms": 0}
        exp = exporter({**options, "client_cert": str(cert), "client_key": str(key)})
        await exp.start()
        exp.offer(push(1))
        await exp.close(10)
        without = exporter({**options, "retry_max_s": 0})
        await without.start()
        without.offer(push(2))
        await without.close(10)
    finally:
        receiver.stop()
    assert [name for _, name in receiver.metrics()] == ["m.1"]
    assert exp.stats.exported == 1
    assert (without.stats.exported, without.stats.failed) == (0, 1)


def test_retry_after_and_options() -> None:
    assert retry_after_s("7", 0.0) == 7.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == 10.0
    assert retry_after_s("soon", 0.0) is None
    with pytest.raises(ConfigurationError, match="endpoint"):
        create({}, Path("."))
    with pytest.raises(ConfigurationError, match="http"):
        create({"endpoint": "grpc://x:4317"}, Path("."))
    with pytest.raises(ConfigurationError, match="no such file"):
        create({"endpoint": "https://x/v1/metrics", "ca": "/nonexistent.pem"}, Path("."))


@pytest.mark.integration
def test_librdkafka_pushes_reach_the_receiver_with_the_labels(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    config = (
        "[exporters.landing]\nroll_seconds = 0.3\n"
        f"[exporters.otlp]\nendpoint = '{receiver.url}'\nmax_delay_ms = 100\n"
    )
    gw = GatewayProcess(tmp_path / "data", config).start()
    try:
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
        )
        prod = Producer({"bootstrap.servers": gw.bootstrap, "client.id": "otlp-1", "log_level": 3})

        def received() -> bool:
            prod.poll(0.1)
            return any(a.get("client_id") == "otlp-1" for a, _ in receiver.metrics())

        wait_for(received, 60, interval=0.3, what="an OTLP request from the gateway")
        prod.flush(1)
    finally:
        assert gw.stop() == 0
    landed = [r for r in landed_rows(gw.data_dir) if r["client_id"] == "otlp-1" and r["payload"]]
    (instance_id,) = {r["client_instance_id"] for r in landed}
    got = [(a, name) for a, name in receiver.metrics() if a.get("client_id") == "otlp-1"]
    assert {a["client_instance_id"] for a, _ in got} == {instance_id}
    assert "org.apache.kafka.producer.node.request.latency.avg" in {name for _, name in got}
    assert all(name.startswith("org.apache.kafka.producer.") for _, name in got)
    # Only the default labels: client id and instance id (Strimzi's default).
    assert not any("client_source_address" in a or "principal" in a for a, _ in got)


def simulate(bootstrap: str) -> dict[str, object]:
    args = [str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", bootstrap]
    args += ["--clients", "300", "--interval-ms", "1000", "--duration", "4", "--json"]
    out = subprocess.run(args, capture_output=True, check=True, timeout=90, text=True)
    report: dict[str, object] = json.loads(out.stdout)
    return report


def exporter_counters(metrics_port: int | None, exporter: str) -> dict[str, float]:
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=MIN_DEADLINE_S).read().decode()
    return {
        s.name.removeprefix("clientmetrics_exporter_"): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.labels.get("exporter") == exporter
    }


def settled(counters: dict[str, float], stuck: int) -> bool:
    """Every push the exporter received is dropped, queued or in the stuck batch."""
    dropped, depth = counters.get("dropped_total", 0), counters.get("queue_depth", 0)
    return counters.get("received_total", 0) <= dropped + depth + stuck


@pytest.mark.integration
def test_a_black_hole_endpoint_costs_the_push_answers_nothing(tmp_path: Path) -> None:
    hole = BlackHole()
    base = "[exporters.landing]\nroll_seconds = 0.3\n"
    with_hole = base + (
        f"[exporters.otlp]\nendpoint = '{hole.url}'\ntimeout_s = 60\nretry_max_s = 120\n"
        "queue_size = 100\nmax_batch = 10\nmax_delay_ms = 0\n"
    )
    p99 = {}
    counters: dict[str, float] = {}
    try:
        for name, config in (("landing alone", base), ("with a black hole", with_hole)):
            gw = GatewayProcess(tmp_path / name.replace(" ", "-"), config).start()
            try:
                set_subscription(gw.bootstrap, "all", {"metrics": "*", "interval.ms": "1000"})
                report = simulate(gw.bootstrap)
                assert report["errors"] == {}
                p99[name] = report["latency_ms"]["p99"]  # type: ignore[index]
                if name == "with a black hole":  # its process reports every half second
                    wait_for(
                        lambda gw=gw: settled(exporter_counters(gw.metrics_port, "otlp"), 10),
                        10,
                        what="the exporter counters",
                    )
                    counters = exporter_counters(gw.metrics_port, "otlp")
            finally:
                assert gw.stop() == 0
    finally:
        hole.close()
    print(f"push answer p99 (ms): {p99}")
    # One batch (1 to 10 pushes) is stuck in the black hole, 100 wait, the rest drop.
    assert counters["received_total"] > 300
    assert counters["queue_depth"] == 100
    assert settled(counters, 10)
    assert counters["dropped_total"] >= counters["received_total"] - 110
    assert counters["exported_total"] == 0
    # A push answer that waited for the endpoint would take its 60 s timeout; the
    # bound is loose because the two p99s (printed) move with the machine's load.
    assert p99["with a black hole"] < 10_000
