"""The topic exporter: each push becomes one record on a Kafka topic.

``[exporters.topic] bootstrap_servers``, ``topic`` (default ``otlp_metrics``). The
record (``topic_record``, docs/record-format.md: the broker plugin writes the same) has
an OTLP ``ExportMetricsServiceRequest`` in protobuf as its value, with the broker's
labels merged into each resource (the OpenTelemetry Collector's ``kafkareceiver`` reads
it with ``encoding: otlp_proto``), the client instance id as its key (so one client's
pushes stay in order on one partition), the labels, ``terminating``,
``push_interval_ms`` and ``push_id`` as headers, and the time the push was received.
The producer (librdkafka, through confluent-kafka) retries failed deliveries itself;
what still fails is counted. In proxy mode the cluster defaults to the upstream one
(``gateway.config_load``).

Fail-open by default (a ``QueuedExporter`` in the exporter process). With
``required = true`` it gates the push's answer instead: see ``topic_acked``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.base import Exporter, ExportError
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter, QueueOptions
from clientmetrics.exporters.topic_acked import AckedTopicExporter
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.otlp import TELEMETRY_TOPIC, export_request

log = structlog.get_logger(__name__)

DEFAULT_TOPIC = TELEMETRY_TOPIC
#: The labels of a record by default (docs/record-format.md), the broker plugin's too: all
#: the inventory shows of a client. A record's labels multiply no series (readers key a
#: client by its instance id), unlike the other exporters', whose default stays short;
#: ``bench/record_labels.py`` measures what the five beyond Strimzi's two cost a record.
DEFAULT_LABELS = (
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
    "principal",
)
#: Settings that map straight onto librdkafka's producer properties.
SECURITY = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_ca_location": "ssl.ca.location",
    "ssl_certificate_location": "ssl.certificate.location",
    "ssl_key_location": "ssl.key.location",
    "ssl_key_password": "ssl.key.password",
}
_OWN = {
    "bootstrap_servers",
    "topic",
    "partitions",
    "create_topic",
    "producer",
    "delivery_timeout_ms",
    "connections_topic",  # the gateway's connection records (gateway/connection_topic.py)
    *SECURITY,
}
_POLL_S = 0.1
#: The header holding the push's id: a UUID drawn when the record is built, so
#: every copy of one push's record carries the same id and no two pushes share one.
PUSH_ID_HEADER = "push_id"
#: ``required = true``: how long a push's answer waits for the cluster by default.
DEFAULT_REQUIRED_TIMEOUT_MS = 10_000
#: librdkafka producer settings a required exporter needs (idempotent, all replicas).
_REQUIRED = {"enable.idempotence": True, "acks": "all"}
#: Where a record goes: the partition Kafka's Java producer (so the broker plugin) picks for
#: its key, murmur2 (librdkafka's default, ``consistent_random``, is a CRC32 and picks another
#: for some keys). Readers take a partition as a share of client instances: every writer
#: must put one instance's records on the same one (docs/record-format.md).
PARTITIONER = {"partitioner": "murmur2_random"}


#: What a delivery report settles: a push's future (gating) or nothing (counted only).
Settled = deque[tuple["asyncio.Future[None] | None", Any]]


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """One push as one Kafka record (its topic is the exporter's)."""

    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


def topic_record(push: AcceptedPush, labels: Sequence[str]) -> TopicRecord:
    """The record of ``push`` with the broker labels ``labels`` (docs/record-format.md).

    Key: the instance id as canonical UUID text. Value: the payload's ``ResourceMetrics``
    as an ``ExportMetricsServiceRequest``, the labels merged into each resource. Headers:
    the labels as text, then ``terminating``, ``push_interval_ms`` and ``push_id`` (a
    UUID drawn here: every copy of one push's record carries the same id, no two pushes
    share one). Timestamp: when the push was received. Raises ``InvalidPayload`` if the
    payload is not OTLP.
    """
    values = push.label_values(labels)
    headers = [(name, str(value).encode()) for name, value in values]
    headers.append(("terminating", b"true" if push.terminating else b"false"))
    headers.append(("push_interval_ms", str(push.push_interval_ms).encode()))
    headers.append((PUSH_ID_HEADER, str(uuid.uuid4()).encode()))
    return TopicRecord(
        key=str(push.client_instance_id).encode(),
        value=export_request([(push.payload, values)]),
        headers=tuple(headers),
        timestamp_ms=push.received_at_ms,
    )


def _confluent() -> Any:
    # Imported when a topic exporter is configured, not with the registry.
    import confluent_kafka
    import confluent_kafka.admin

    return confluent_kafka


class TopicSink:
    """Produces one record per push with a librdkafka producer polled on its own thread.

    Delivery reports are gathered on the poll thread and handed to the event loop
    in one call per poll: counted, and settling the push's future when it has one.
    """

    max_batch = 512
    max_delay_s = 0.0

    def __init__(
        self,
        producer_config: Mapping[str, object],
        topic: str,
        labels: Sequence[str],
        *,
        partitions: int = 1,
        create_topic: bool = True,
    ) -> None:
        self.config = dict(producer_config)
        self.topic = topic
        self.labels = tuple(labels)
        self.partitions = partitions
        self.create_topic = create_topic
        self._producer: Any = None
        self._stats: ExporterStats | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._settled: Settled = deque()
        #: A fatal producer error (librdkafka's idempotence state is lost): no more sends.
        self.fatal: str | None = None

    async def start(self, stats: ExporterStats) -> None:
        ck = _confluent()
        self._stats = stats
        self._loop = asyncio.get_running_loop()
        try:
            self._producer = ck.Producer({**self.config, "error_cb": self._error})
        except ck.KafkaException as exc:
            raise ConfigurationError(f"topic exporter: {exc}") from exc
        if self.create_topic:
            await asyncio.to_thread(self._ensure_topic, ck)
        self._thread = threading.Thread(target=self._poll, name="topic-exporter", daemon=True)
        self._thread.start()

    def _ensure_topic(self, ck: Any) -> None:
        """Create the topic if it is missing; a broker that refuses is logged, not fatal.

        A topic that exists is left as it is, whatever its partition count: adding
        partitions would move some instances' records to another partition midway
        (a reader takes a partition as a share of instances). When its count is not
        ``partitions``, one warning names both.
        """
        admin = ck.admin.AdminClient(
            {k: v for k, v in self.config.items() if k.startswith(_CLIENT)}
        )
        new_topic = ck.admin.NewTopic
        try:
            topics = admin.list_topics(timeout=10).topics
            found = topics.get(self.topic)
            if found is not None and not found.error:
                if len(found.partitions) != self.partitions:
                    log.warning(
                        "topic_exporter_partitions_differ",
                        topic=self.topic,
                        partitions=len(found.partitions),
                        configured=self.partitions,
                        note="the topic exists and is left as it is; see docs/exporters.md",
                    )
                return
            futures = admin.create_topics(
                [new_topic(self.topic, num_partitions=self.partitions, replication_factor=-1)],
                operation_timeout=10,
            )
            futures[self.topic].result(10)
            log.info("topic_exporter_created_topic", topic=self.topic, partitions=self.partitions)
        except ck.KafkaException as exc:
            log.warning("topic_exporter_topic_not_created", topic=self.topic, error=str(exc))

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(_POLL_S)
            self._hand_over()

    def _error(self, error: Any) -> None:
        # On a librdkafka thread: a fatal error ends this producer's sends.
        if error.fatal():
            self.fatal = str(error)
            log.error("topic_producer_fatal", topic=self.topic, error=str(error))

    def _hand_over(self) -> None:
        """Pass the delivery reports gathered so far to the event loop, in one call."""
        batch = []
        while self._settled:
            batch.append(self._settled.popleft())
        if batch and self._loop is not None:
            self._loop.call_soon_threadsafe(self._settle, batch)

    def _settle(self, batch: list[tuple[asyncio.Future[None] | None, Any]]) -> None:
        stats = self._stats
        for future, error in batch:
            if stats is not None:
                if error is None:
                    stats.exported += 1
                else:
                    stats.failed += 1
            if future is None:
                if error is not None:
                    log.warning("topic_delivery_failed", topic=self.topic, error=str(error))
            elif not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(ExportError(f"topic {self.topic}: {error}"))

    def produce(self, push: AcceptedPush, future: asyncio.Future[None] | None = None) -> None:
        """Build ``push``'s record and hand it to librdkafka (any thread).

        Raises ``BufferError`` when librdkafka's queue is full. Its delivery report
        is counted and settles ``future``.
        """
        record = topic_record(push, self.labels)
        settled = self._settled

        def delivered(error: Any, _message: Any) -> None:
            settled.append((future, error))

        self._producer.produce(
            self.topic,
            record.value,
            record.key,
            headers=list(record.headers),
            timestamp=record.timestamp_ms,
            on_delivery=delivered,
        )

    async def send(self, pushes: Sequence[AcceptedPush]) -> int:
        for index, push in enumerate(pushes):
            for attempt in range(50):
                try:
                    self.produce(push)
                    break
                except BufferError:  # librdkafka's own queue is full: let it drain
                    await asyncio.sleep(0.02 * (attempt + 1))
            else:
                raise ExportError(
                    f"topic exporter: producer queue full, {len(pushes) - index} pushes lost"
                )
        return 0  # counted as exported when delivered

    async def flush(self, timeout_s: float) -> None:
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, timeout_s)

    async def close(self, timeout_s: float) -> None:
        await self.flush(timeout_s)
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 1.0)
        with contextlib.suppress(Exception):
            self._producer.poll(0)  # deliver the last callbacks on this thread
        self._hand_over()


#: Properties any client takes (the admin client that creates the topic gets only these).
_CLIENT = ("bootstrap.", "client.id", "security.", "sasl.", "ssl.", "log_level")


def producer_config(options: Mapping[str, object], *, required: bool = False) -> dict[str, object]:
    """librdkafka properties from the exporter's options (``producer`` table last).

    ``required``: an idempotent producer writing to all in-sync replicas, which
    gives up on a record after ``delivery_timeout_ms`` (the push is then answered
    with a retriable error); the ``producer`` table may not weaken that. The
    partitioner is always ``murmur2_random`` (``PARTITIONER``), never another.
    """
    servers = options.get("bootstrap_servers")
    if not isinstance(servers, str) or not servers:
        raise ConfigurationError("the topic exporter needs bootstrap_servers (HOST:PORT,...)")
    config: dict[str, object] = {
        "bootstrap.servers": servers,
        "client.id": "clientmetrics-topic-exporter",
        "acks": "all",
        "linger.ms": 5 if required else 20,
        # As the broker plugin's producer: a Java client's record repeats its labels in
        # each of its ~100 resources (~20 KB more per record with the default labels;
        # ~0.3-0.5 KB once compressed, bench/record_labels.py).
        "compression.type": "lz4",
        "log_level": 3,
        **PARTITIONER,
    }
    if required:
        config |= _REQUIRED
    timeout = options.get("delivery_timeout_ms", DEFAULT_REQUIRED_TIMEOUT_MS if required else None)
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise ConfigurationError("topic.delivery_timeout_ms must be a positive integer")
        config["message.timeout.ms"] = timeout
    for key, prop in SECURITY.items():
        if key in options:
            config[prop] = str(options[key])
    extra = options.get("producer", {})
    if not isinstance(extra, Mapping):
        raise ConfigurationError("topic.producer must be a table of librdkafka properties")
    if "message.timeout.ms" in extra and "message.timeout.ms" in config:
        raise ConfigurationError(
            "topic: give delivery_timeout_ms, not producer.message.timeout.ms, with it"
        )
    for key, value in PARTITIONER.items():
        if key in extra and str(extra[key]) != value:
            raise ConfigurationError(
                f"topic: producer.{key} must stay {value}: one client's records go to the "
                "partition Kafka's producer and the broker plugin pick for its key"
            )
    if required:
        weaker = [
            f"{k}={str(v).lower()}"
            for k, v in _REQUIRED.items()
            if k in extra and str(extra[k]).lower() not in (str(v).lower(), "-1")
        ]
        if weaker:
            raise ConfigurationError(
                f"topic: required = true needs {', '.join(weaker)} "
                "(an answered push must be on every in-sync replica, once)"
            )
    config.update({str(k): v for k, v in extra.items()})
    return config


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory: ``bootstrap_servers``, ``topic``, security + the queue's options.

    Fail-open (a ``QueuedExporter``) unless ``required = true``: then the gating
    ``AckedTopicExporter``, whose ``queue_size`` bounds the pushes awaiting the cluster.
    """
    queue, rest = QueueOptions.take("topic", {"labels": list(DEFAULT_LABELS), **options})
    unknown = set(rest) - _OWN
    if unknown:
        raise ConfigurationError(f"unknown topic exporter options: {', '.join(sorted(unknown))}")
    _confluent()
    topic = rest.get("topic", DEFAULT_TOPIC)
    partitions = rest.get("partitions", 1)
    create_topic = rest.get("create_topic", True)
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError("topic.topic must be a topic name")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigurationError("topic.partitions must be a positive integer")
    if not isinstance(create_topic, bool):
        raise ConfigurationError("topic.create_topic must be true or false")
    config = producer_config(rest, required=queue.required)
    sink = TopicSink(config, topic, queue.labels, partitions=partitions, create_topic=create_topic)
    if queue.required:
        timeout_ms = config["message.timeout.ms"]
        assert isinstance(timeout_ms, int)
        return AckedTopicExporter("topic", sink, queue.queue_size, timeout_ms / 1000)
    return QueuedExporter("topic", sink, queue)
