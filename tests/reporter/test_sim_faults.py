"""The simulator's fault injection: a fault shows in its metrics from its onset, not before."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from clientmetrics.reporter.sim_payloads import SimFault, SimMetrics
from tests.landed import landed_rows
from tests.procs import BIN, GatewayProcess, wait_for

SECOND = 1_000_000_000
P = "org.apache.kafka."


def _values(metrics: SimMetrics, at_s: int, name: str) -> list[float]:
    points = metrics.points(random.Random(at_s), at_s * SECOND, delta=False)
    return [float(p.value) for p in points if p.name.endswith(name)]


@pytest.mark.parametrize(
    ("client", "fault", "metric", "healthy_below", "faulty_above"),
    [
        ("consumer", "slow-commits", "coordinator.commit.latency.avg", 100, 1000),
        ("producer", "throttled", "produce.throttle.time.avg", 1, 100),
        ("producer", "send-buffer", "record.queue.time.avg", 10, 1000),
        ("consumer", "reconnect-storm", "connection.creation.rate", 0.1, 1),
        ("producer", "producer-retries", "record.retry.rate", 0.1, 1),
        ("producer", "producer-errors", "record.error.rate", 0.1, 0.4),
        ("consumer", "failed-authentication", "failed.authentication.rate", 0.01, 0.1),
    ],
)
def test_a_fault_starts_at_its_onset(
    client: str, fault: str, metric: str, healthy_below: float, faulty_above: float
) -> None:
    metrics = SimMetrics(client, False, 0.0, 0, fault=fault, fault_onset_ns=120 * SECOND)
    assert all(v < healthy_below for t in (0, 60) for v in _values(metrics, t, metric))
    assert all(v > faulty_above for t in (120, 180) for v in _values(metrics, t, metric))


def test_slow_processing_lowers_poll_idle_ratio_and_slow_broker_only_node_0() -> None:
    slow = SimMetrics("consumer", False, 0.0, 0, fault="slow-processing", fault_onset_ns=0)
    assert max(_values(slow, 60, "poll.idle.ratio.avg")) < 0.2
    broker = SimMetrics("consumer", False, 0.0, 0, fault="slow-broker", fault_onset_ns=0)
    points = broker.points(random.Random(1), 60 * SECOND, delta=False)
    by_node = {
        p.attributes["node.id"]: p.value
        for p in points
        if p.name.endswith("node.request.latency.avg")
    }
    assert by_node[0] > 1000
    assert by_node[-1] < 100


@pytest.mark.parametrize("fault", ["latency-shift", "cohort-outlier"])
def test_out_of_profile_faults_multiply_the_request_latencies_by_8_from_their_onset(
    fault: str,
) -> None:
    healthy = SimMetrics("consumer", False, 0.0, 0)
    shifted = SimMetrics("consumer", False, 0.0, 0, fault=fault, fault_onset_ns=120 * SECOND)
    for at_s in (60, 180):
        usual = _values(healthy, at_s, "node.request.latency.avg")
        shown = _values(shifted, at_s, "node.request.latency.avg")
        expected = usual if at_s < 120 else [round(v * 8, 3) for v in usual]
        assert shown == expected
        # Far below the slow-broker-requests threshold: only a baseline sees it.
        assert max(shown) < 100


def test_one_record_per_request_and_only_such_faults_send_the_java_metrics() -> None:
    batching = SimMetrics("producer", False, 0.0, 0, fault="one-record-per-request",
                          fault_onset_ns=120 * SECOND)  # fmt: skip
    assert min(_values(batching, 60, "records.per.request.avg")) > 4
    assert max(_values(batching, 180, "records.per.request.avg")) < 1.5
    # A librdkafka-shaped client sends its 10 standard metrics only, unless asked.
    plain = SimMetrics("producer", False, 0.0, 0)
    assert len(plain.points(random.Random(1), 60 * SECOND, delta=False)) == 10
    java = SimMetrics("producer", False, 0.0, 0, nonstandard=True)
    assert len(java.points(random.Random(1), 60 * SECOND, delta=False)) == 14


def test_rebalance_churn_grows_the_rebalance_time_counter_from_its_onset() -> None:
    churn = SimMetrics(
        "consumer", False, 0.0, 0, fault="rebalance-churn", fault_onset_ns=120 * SECOND
    )
    totals = []
    for t in range(0, 301, 60):
        (total,) = _values(churn, t, "coordinator.rebalance.latency.total")
        totals.append(total)
    # Before the onset at most one healthy rebalance (<= 3 s) per push; from the push at
    # the onset on, 20-50 % of each 60 s push interval: 12-30 s (+ 3 s) per push.
    assert totals[1] - totals[0] <= 3000
    assert all(12_000 <= b - a <= 33_000 for a, b in pairwise(totals[1:]))


@pytest.mark.parametrize("text", ["slow@1s:0.1", "throttled@1s:0", "throttled@x:0.5", "throttled"])
def test_a_bad_fault_spec_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="bad fault"):
        SimFault.parse(text)


def test_a_fault_spec_parses_and_applies_to_its_client_kind() -> None:
    fault = SimFault.parse("slow-processing@120s:0.05")
    assert (fault.kind, fault.onset_seconds, fault.fraction) == ("slow-processing", 120.0, 0.05)
    assert fault.applies_to("consumer")
    assert not fault.applies_to("producer")
    assert SimFault.parse("slow-broker@0:1").applies_to("producer")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", "[exporters.landing]\nroll_seconds = 0.3\n").start()
    yield gw
    assert gw.stop() == 0


def _gauges(data_dir: Path, name: str) -> dict[str, list[float]]:
    """Per landed instance id, the values of one gauge it pushed."""
    found: dict[str, list[float]] = {}
    for row in landed_rows(data_dir):
        if not row["payload"]:
            continue
        data = MetricsData()
        data.ParseFromString(bytes(row["payload"]))  # type: ignore[arg-type]
        values = [
            p.as_double
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
            for p in m.gauge.data_points
        ]
        found.setdefault(str(row["client_instance_id"]), []).extend(values)
    return found


@pytest.mark.integration
def test_simulate_injects_faults_and_writes_the_ground_truth(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    truth_file = tmp_path / "truth.json"
    subprocess.run(
        [
            str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", gateway.bootstrap,
            "--clients", "6", "--interval-ms", "1000", "--duration", "4", "--json",
            "--fault", "slow-processing@0s:1", "--fault", "throttled@0s:1",
            "--fault-truth", str(truth_file),
        ],
        capture_output=True, check=True, timeout=60, text=True,
    )  # fmt: skip
    truth = json.loads(truth_file.read_text())
    # Indices 0, 2, 4 are producers, 1, 3, 5 consumers: each fault takes all it applies to.
    assert sorted(row["fault"] for row in truth) == ["slow-processing"] * 3 + ["throttled"] * 3
    slow = {row["client_instance_id"] for row in truth if row["fault"] == "slow-processing"}
    throttled = {row["client_instance_id"] for row in truth if row["fault"] == "throttled"}
    idle = f"{P}consumer.poll.idle.ratio.avg"
    throttle = f"{P}producer.produce.throttle.time.avg"
    wait_for(lambda: set(_gauges(gateway.data_dir, idle)) >= slow, 60, what="consumer pushes")
    wait_for(lambda: set(_gauges(gateway.data_dir, throttle)) >= throttled, 60, what="pushes")
    assert all(v < 0.2 for i in slow for v in _gauges(gateway.data_dir, idle)[i])
    assert all(v >= 200 for i in throttled for v in _gauges(gateway.data_dir, throttle)[i])
