"""KIP-714's standard producer and consumer metrics ("Standard producer/consumer metrics").

A standard metric is one every client supporting the KIP "should support" where it makes
sense for it; the Java client has them all by definition. The KIP also marks some as
*required* (in bold in its tables), but the text as published here carries no bold and
Kafka's sources name no such set, so only the standard sets are kept: no rule here
claims to know which are required.
"""

from __future__ import annotations

__all__ = ["STANDARD_BY_ROLE", "STANDARD_METRICS", "role_of"]

_P = "org.apache.kafka."

#: The standard metrics of each kind of client, full telemetry names.
STANDARD_BY_ROLE: dict[str, frozenset[str]] = {
    "producer": frozenset(
        _P + "producer." + name
        for name in (
            "connection.creation.rate",
            "connection.creation.total",
            "node.request.latency.avg",
            "node.request.latency.max",
            "produce.throttle.time.avg",
            "produce.throttle.time.max",
            "record.queue.time.avg",
            "record.queue.time.max",
        )
    ),
    "consumer": frozenset(
        _P + "consumer." + name
        for name in (
            "connection.creation.rate",
            "connection.creation.total",
            "node.request.latency.avg",
            "node.request.latency.max",
            "poll.idle.ratio.avg",
            "coordinator.commit.latency.avg",
            "coordinator.commit.latency.max",
            "coordinator.assigned.partitions",
            "coordinator.rebalance.latency.avg",
            "coordinator.rebalance.latency.max",
            "coordinator.rebalance.latency.total",
            "fetch.manager.fetch.latency.avg",
            "fetch.manager.fetch.latency.max",
        )
    ),
}

#: Every standard metric, producer's and consumer's.
STANDARD_METRICS: frozenset[str] = frozenset().union(*STANDARD_BY_ROLE.values())


def role_of(metric_name: str) -> str | None:
    """``producer`` or ``consumer`` for a metric under that prefix, else None."""
    for role in STANDARD_BY_ROLE:
        if metric_name.startswith(f"{_P}{role}."):
            return role
    return None
