"""Following the telemetry topic: every push the topic exporter or the broker plugin wrote.

Deployments with no landing zone (Apache Kafka with the broker plugin, gateways
with only the topic exporter) write one record per accepted push to a topic
(docs/record-format.md). The tail reads each partition from where it ended when
the tail started, and turns the records into landing rows with the pipeline's
own reader (``pipeline.core.records.landing_rows``: the same checks, a hostile
record dropped), so the live view decodes them exactly as it does the WAL's.

``recent_rows`` is ``find``'s source on such deployments: the records of the
last minutes, from the offsets their timestamps give up to the ends when it
started.

Bounds: one ``read`` takes at most ``MAX_RECORDS`` records; librdkafka's own
pre-fetch queue is capped (``queued.max.messages.kbytes``); ``recent_rows``
reads at most ``MAX_RECENT_RECORDS`` (the newest) in at most ``RECENT_TIMEOUT_S``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.client.properties import CONNECT_TIMEOUT_S
from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.records import RECORDS_ARROW, landing_rows
from clientmetrics.telemetry.push_arrow import LANDING_ARROW

__all__ = ["MAX_RECENT_RECORDS", "MAX_RECORDS", "TopicTail", "recent_rows", "topic_tail"]

#: Records taken per ``read``: the rest wait for the next one (the view polls often).
MAX_RECORDS = 5000
#: Seconds to reach the cluster and learn the topic's partitions and their ends.
METADATA_TIMEOUT_S = CONNECT_TIMEOUT_S
#: Records ``recent_rows`` reads at most (the newest, shared by the partitions): a bound
#: on what ``find`` holds (a Java push of every consumer metric is ~10 KB).
MAX_RECENT_RECORDS = 20_000
#: How long ``recent_rows`` reads before it answers with what it has.
RECENT_TIMEOUT_S = 30.0


class TopicTail:
    """New landing rows (``LANDING_ARROW``) of a telemetry topic, call by call.

    ``client_config``: librdkafka settings (``client.librdkafka_properties`` of
    the operator's client properties). The consumer is in no group and commits
    nothing: it only reads.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        client_config: Mapping[str, str],
        since_ms: int | None = None,
        max_back: int = MAX_RECENT_RECORDS,
    ) -> None:
        """From each partition's end now, or with ``since_ms`` from the first record at or
        after it (at most ``max_back`` records before the ends, shared by the partitions)."""
        from confluent_kafka import Consumer, KafkaException

        self.topic = topic
        #: Each partition's end when the tail started, and the next offset to read.
        self.ends: dict[int, int] = {}
        self._next: dict[int, int] = {}
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
            self._consumer.assign(self._starts(sorted(found.partitions), since_ms, max_back))
        except KafkaException as exc:
            self.close()
            error = exc.args[0]
            text = error.str() if hasattr(error, "str") else str(error)
            raise ConfigurationError(f"topic {topic} on {bootstrap}: {text}") from None
        except BaseException:
            self.close()
            raise

    def _starts(self, partitions: list[int], since_ms: int | None, max_back: int) -> list[Any]:
        """Where each partition is read from, resolved here: a push acknowledged after
        the tail started is read; before it, only those at or after ``since_ms``."""
        from confluent_kafka import TopicPartition

        share = max(1, max_back // len(partitions))
        starts = []
        for partition in partitions:
            tp = TopicPartition(self.topic, partition)
            low, high = self._consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
            self.ends[partition] = high
            start = high
            if since_ms is not None:
                (at,) = self._consumer.offsets_for_times(
                    [TopicPartition(self.topic, partition, since_ms)], timeout=METADATA_TIMEOUT_S
                )
                # -1: no record at or after since_ms.
                start = max(at.offset if at.offset >= 0 else high, low, high - share)
            self._next[partition] = start
            starts.append(TopicPartition(self.topic, partition, start))
        return starts

    def read_to_ends(self, timeout_s: float = RECENT_TIMEOUT_S) -> pa.Table:
        """Rows of every record up to the ends the tail started at (or of what came
        within ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        tables = []
        while time.monotonic() < deadline and any(
            self._next[p] < end for p, end in self.ends.items()
        ):
            good = [m for m in self._consumer.consume(MAX_RECORDS, 0.2) if m.error() is None]
            for message in good:
                self._next[message.partition()] = message.offset() + 1
            if good:
                tables.append(landing_rows(records_table(good)))
        return pa.concat_tables(tables) if tables else LANDING_ARROW.empty_table()

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


def recent_rows(
    bootstrap: str, topic: str, properties: Mapping[str, str], since_ms: int
) -> pa.Table:
    """Landing rows of the topic's records since ``since_ms`` (``find``'s source when the
    deployment writes only the topic), read with an operator's client properties."""
    from clientmetrics.client import librdkafka_properties

    tail = TopicTail(bootstrap, topic, librdkafka_properties(dict(properties)), since_ms)
    try:
        rows = tail.read_to_ends()
    finally:
        tail.close()
    # The record timestamps only placed the start (a broker may not look them up):
    # the pushes' own receive times decide, as in the landing zone.
    since = pa.scalar(since_ms * 1000, pa.timestamp("us", tz="UTC"))
    return rows.filter(pc.greater_equal(rows.column("received_at"), since))
