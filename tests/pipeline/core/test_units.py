"""``pipeline.core.units``: the unit a chart shows when the client sent none."""

from __future__ import annotations

import pytest

from clientmetrics.pipeline.core.units import display_unit


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        # KIP-714's standard metrics, as its tables describe them
        ("org.apache.kafka.producer.node.request.latency.avg", "ms"),
        ("org.apache.kafka.producer.record.queue.time.max", "ms"),
        ("org.apache.kafka.producer.produce.throttle.time.avg", "ms"),
        ("org.apache.kafka.consumer.coordinator.rebalance.latency.total", "ms"),
        ("org.apache.kafka.producer.connection.creation.rate", "/s"),
        ("org.apache.kafka.consumer.poll.idle.ratio.avg", ""),
        ("org.apache.kafka.consumer.coordinator.assigned.partitions", ""),
        ("org.apache.kafka.producer.connection.creation.total", ""),
        # the Java client's others
        ("org.apache.kafka.producer.io.wait.time.ns.total", "ns"),
        ("org.apache.kafka.producer.outgoing.byte.rate", "bytes/s"),
    ],
)
def test_the_name_implies_the_unit(name: str, unit: str) -> None:
    assert display_unit(name) == unit


def test_a_unit_the_client_sent_wins() -> None:
    assert display_unit("org.apache.kafka.producer.node.request.latency.avg", "s") == "s"
