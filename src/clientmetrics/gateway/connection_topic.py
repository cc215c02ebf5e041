"""Connection records on a topic: beside (or instead of) the landing zone's files.

When the topic exporter is configured, each interval's connection records are also
produced to ``[exporters.topic] connections_topic`` (``clientmetrics_connections``
by default) on its cluster, with its security settings: one record per client key
and interval (``telemetry.connections.record_json``: a JSON object of the landed
columns; key the instance id, else the ``client_id``; header
``record_kind: connection/1``; timestamp the interval's end). At most
``connection_records_max_keys`` records an interval, produced and flushed on a
worker thread, never on the event loop; what the cluster does not take within
the flush's bound is counted and logged, never retried past it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from clientmetrics.errors import ConfigurationError
from clientmetrics.telemetry.connections import (
    RECORD_KIND_HEADER,
    ConnectionRecord,
    record_json,
    record_key,
)

__all__ = ["DEFAULT_CONNECTIONS_TOPIC", "ConnectionTopic", "connection_topic"]

log = structlog.get_logger("clientmetrics.gateway")

DEFAULT_CONNECTIONS_TOPIC = "clientmetrics_connections"
#: How long one interval's records may wait for the cluster (a worker thread's wait).
_FLUSH_S = 30.0


class ConnectionTopic:
    """A librdkafka producer of connection records, used from worker threads only."""

    def __init__(self, config: Mapping[str, object], topic: str) -> None:
        import confluent_kafka

        self.topic = topic
        config = {**config, "client.id": "clientmetrics-connection-records"}
        try:
            self._producer: Any = confluent_kafka.Producer(config)
        except confluent_kafka.KafkaException as exc:
            raise ConfigurationError(f"connection records' topic: {exc}") from exc
        self.produced = 0
        self.failed = 0

    def send(self, records: list[ConnectionRecord]) -> int:
        """Produce ``records`` and wait for them (bounded); how many the cluster took.

        Blocking: a worker thread's.
        """
        outcome = {"ok": 0, "failed": 0}

        def delivered(error: Any, _message: Any) -> None:
            outcome["failed" if error is not None else "ok"] += 1

        for record in records:
            try:
                self._producer.produce(
                    self.topic,
                    value=record_json(record),
                    key=record_key(record),
                    headers=[RECORD_KIND_HEADER],
                    timestamp=record.interval_end_ms,
                    on_delivery=delivered,
                )
            except BufferError:  # librdkafka's queue is full: the rest of this interval
                break
            except Exception as exc:  # a bad setting or a closed producer: counted
                log.warning("connection_records_not_produced", error=str(exc))
                break
        left = self._producer.flush(_FLUSH_S)
        lost = len(records) - outcome["ok"]
        self.produced += outcome["ok"]
        self.failed += lost
        if lost:
            log.warning(
                "connection_records_not_produced",
                topic=self.topic,
                records=lost,
                still_queued=left,
            )
        return outcome["ok"]


def connection_topic(options: Mapping[str, object] | None) -> ConnectionTopic | None:
    """The topic of a gateway's connection records: the topic exporter's cluster (its
    ``options``), or None when no topic exporter is configured."""
    if options is None:
        return None
    from clientmetrics.exporters.topic import producer_config

    topic = options.get("connections_topic", DEFAULT_CONNECTIONS_TOPIC)
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError("topic.connections_topic must be a topic name")
    return ConnectionTopic(producer_config(options), topic)
