"""KIP-714 metric naming (reference §4.6 and checklist 54)."""

from __future__ import annotations

import pytest

from clientmetrics.telemetry.naming import (
    telemetry_attributes,
    telemetry_name,
    telemetry_tag_key,
)


@pytest.mark.parametrize(
    ("group", "name", "expected"),
    [
        (
            "producer-metrics",
            "record-queue-time-avg",
            "org.apache.kafka.producer.record.queue.time.avg",
        ),
        (
            "consumer-fetch-manager-metrics",
            "fetch-latency-max",
            "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
        ),
        (
            "producer-node-metrics",
            "request-latency-avg",
            "org.apache.kafka.producer.node.request.latency.avg",
        ),
        ("group-metrics-metrics", "x", "org.apache.kafka.group.x"),
        ("grouP-name-AB_&", "test-Name-1.$", "org.apache.kafka.group.name.ab_&.test.name.1.$"),
        ("producer-metrics", "", "org.apache.kafka.producer."),
        ("", "name", "org.apache.kafka..name"),
        (
            "consumer-coordinator-metrics",
            "assigned-partitions",
            "org.apache.kafka.consumer.coordinator.assigned.partitions",
        ),
    ],
)
def test_reference_examples(group: str, name: str, expected: str) -> None:
    assert telemetry_name(group, name) == expected


def test_metrics_is_removed_only_after_a_dot() -> None:
    # "producermetrics" has no ".metrics": Java's regex needs the dot.
    assert telemetry_name("producermetrics", "a") == "org.apache.kafka.producermetrics.a"
    assert telemetry_name("a-metricsx", "b") == "org.apache.kafka.ax.b"


def test_tag_keys_use_underscores_and_values_are_kept() -> None:
    assert telemetry_tag_key("Node-Id") == "node_id"
    assert telemetry_attributes({"node-id": "node-1", "topic": "My-Topic"}) == {
        "node_id": "node-1",
        "topic": "My-Topic",
    }


def test_client_id_tag_is_left_out() -> None:
    assert telemetry_attributes({"client-id": "p1", "partition": "3"}) == {"partition": "3"}
