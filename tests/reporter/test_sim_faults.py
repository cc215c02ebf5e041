"""The simulator's fault injection: a fault shows in its metrics from its onset, not before."""

from __future__ import annotations

import random

import pytest

from clientmetrics.reporter.sim_payloads import SimFault, SimMetrics

SECOND = 1_000_000_000


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
