"""Following the telemetry topic: every push the topic exporter or the broker plugin wrote.

Deployments with no landing zone (Apache Kafka with the broker plugin, gateways
with only the topic exporter) write one record per accepted push to a topic
(docs/record-format.md). The tail reads each partition from where it ended when
the tail started, and turns the records into landing rows with the pipeline's
own reader (``pipeline.core.records.landing_rows``: the same checks, a hostile
record dropped), so the live view decodes them exactly as it does the WAL's.

Bounds: one ``read`` takes at most ``MAX_RECORDS`` records; librdkafka's own
pre-fetch queue is capped (``queued.max.messages.kbytes``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from clientmetrics.client.properties import CONNECT_TIMEOUT_S
from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.records import RECORDS_ARROW, landing_rows
from clientmetrics.telemetry.push_arrow import LANDING_ARROW

__all__ = ["MAX_RECORDS", "TopicTail"]

#: Records taken per ``read``: the rest wait for the next one (the view polls often).
MAX_RECORDS = 5000
#: Seconds to reach the cluster and learn the topic's partitions and their ends.
METADATA_TIMEOUT_S = CONNECT_TIMEOUT_S


class TopicTail:
    """New landing rows (``LANDING_ARROW``) of a telemetry topic, call by call.

    ``client_config``: librdkafka settings (``client.librdkafka_properties`` of
    the operator's client properties). The consumer is in no group and commits
    nothing: it only reads.
    """

    def __init__(self, bootstrap: str, topic: str, client_config: Mapping[str, str]) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        self.topic = topic
        self._consumer: Any = Consumer(
            {
                **client_config,
                "bootstrap.servers": bootstrap,
                "group.id": f"clientmetrics-investigate-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "queued.max.messages.kbytes": 16384,
                # librdkafka's own lines would flood the live view's terminal (a line
                # per reconnect); a failure to start is the command's one line.
                "log_level": 0,
            }
        )
        try:
            metadata = self._consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                error = found.error if found is not None else None
                why = error.str() if error is not None else "no such topic"
                raise ConfigurationError(f"topic {topic}: {why}")
            # From each partition's end now, resolved here: a push acknowledged after
            # the tail started is read, none before.
            assigned = []
            for partition in sorted(found.partitions):
                tp = TopicPartition(topic, partition)
                _low, high = self._consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
                assigned.append(TopicPartition(topic, partition, high))
            self._consumer.assign(assigned)
        except KafkaException as exc:
            self.close()
            error = exc.args[0]
            text = error.str() if hasattr(error, "str") else str(error)
            raise ConfigurationError(f"topic {topic} on {bootstrap}: {text}") from None
        except BaseException:
            self.close()
            raise

    def read(self) -> pa.Table:
        """Rows of the records that arrived since the last call (at most ``MAX_RECORDS``)."""
        messages = [m for m in self._consumer.consume(MAX_RECORDS, 0) if m.error() is None]
        if not messages:
            return LANDING_ARROW.empty_table()
        return landing_rows(records_table(messages))

    def close(self) -> None:
        self._consumer.close()


def records_table(messages: list[Any]) -> pa.Table:
    """confluent-kafka messages as the pipeline reads topic records (``RECORDS_ARROW``)."""
    columns: dict[str, list[Any]] = {name: [] for name in RECORDS_ARROW.names}
    for message in messages:
        columns["key"].append(message.key())
        columns["value"].append(message.value())
        columns["topic"].append(message.topic())
        columns["partition"].append(message.partition())
        columns["offset"].append(message.offset())
        _kind, stamp = message.timestamp()
        columns["timestamp"].append(stamp * 1000 if stamp is not None and stamp >= 0 else None)
        columns["headers"].append([{"key": k, "value": v} for k, v in (message.headers() or [])])
    arrays = [
        pa.array(columns[f.name], pa.int64()).cast(f.type)
        if f.name == "timestamp"
        else pa.array(columns[f.name], f.type)
        for f in RECORDS_ARROW
    ]
    return pa.Table.from_arrays(arrays, schema=RECORDS_ARROW)


def topic_tail(bootstrap: str, topic: str, properties: Mapping[str, str]) -> TopicTail:
    """The topic's tail, read with an operator's Kafka client properties (Java names)."""
    from clientmetrics.client import librdkafka_properties

    return TopicTail(bootstrap, topic, librdkafka_properties(dict(properties)))
