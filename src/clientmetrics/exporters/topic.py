"""The topic exporter: each push becomes one record on a Kafka topic.

``[exporters.topic] bootstrap_servers``, ``topic`` (default ``otlp_metrics``). The
record value is an OTLP ``ExportMetricsServiceRequest`` in protobuf with the
broker's labels merged into each resource (the OpenTelemetry Collector's
``kafkareceiver`` reads it with ``encoding: otlp_proto``), the key is the client
instance id (so one client's pushes stay in order on one partition), the headers
are the labels. The producer (librdkafka, through confluent-kafka) retries failed
deliveries itself; what still fails is counted. In proxy mode the cluster defaults
to the upstream one (``gateway.config``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.base import Exporter, ExportError
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter, QueueOptions
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.otlp import TELEMETRY_TOPIC, export_request

log = structlog.get_logger(__name__)

DEFAULT_TOPIC = TELEMETRY_TOPIC
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
_OWN = {"bootstrap_servers", "topic", "partitions", "create_topic", "producer", *SECURITY}
_POLL_S = 0.1


def _confluent() -> Any:
    # Imported when a topic exporter is configured, not with the registry.
    import confluent_kafka
    import confluent_kafka.admin

    return confluent_kafka


class TopicSink:
    """Produces one record per push with a librdkafka producer polled on its own thread."""

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

    async def start(self, stats: ExporterStats) -> None:
        ck = _confluent()
        self._stats = stats
        self._loop = asyncio.get_running_loop()
        try:
            self._producer = ck.Producer(self.config)
        except ck.KafkaException as exc:
            raise ConfigurationError(f"topic exporter: {exc}") from exc
        if self.create_topic:
            await asyncio.to_thread(self._ensure_topic, ck)
        self._thread = threading.Thread(target=self._poll, name="topic-exporter", daemon=True)
        self._thread.start()

    def _ensure_topic(self, ck: Any) -> None:
        """Create the topic if it is missing; a broker that refuses is logged, not fatal."""
        admin = ck.admin.AdminClient(
            {k: v for k, v in self.config.items() if k.startswith(_CLIENT)}
        )
        new_topic = ck.admin.NewTopic
        try:
            topics = admin.list_topics(timeout=10).topics
            if self.topic in topics and not topics[self.topic].error:
                return
            futures = admin.create_topics(
                [new_topic(self.topic, num_partitions=self.partitions, replication_factor=-1)],
                operation_timeout=10,
            )
            futures[self.topic].result(10)
            log.info("topic_exporter_created_topic", topic=self.topic)
        except ck.KafkaException as exc:
            log.warning("topic_exporter_topic_not_created", topic=self.topic, error=str(exc))

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(_POLL_S)

    def _delivered(self, error: Any, message: Any) -> None:
        # On the poll thread: hand the count to the event loop's thread.
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._count, error)

    def _count(self, error: Any) -> None:
        if self._stats is None:
            return
        if error is None:
            self._stats.exported += 1
        else:
            self._stats.failed += 1
            log.warning("topic_delivery_failed", topic=self.topic, error=str(error))

    async def send(self, pushes: Sequence[AcceptedPush]) -> int:
        for index, push in enumerate(pushes):
            labels = push.label_values(self.labels)
            value = export_request([(push.payload, labels)])
            key = str(push.client_instance_id).encode()
            headers = [(name, str(v).encode()) for name, v in labels]
            for attempt in range(50):
                try:
                    self._producer.produce(
                        self.topic, value, key, headers=headers, on_delivery=self._delivered
                    )
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


#: Properties any client takes (the admin client that creates the topic gets only these).
_CLIENT = ("bootstrap.", "client.id", "security.", "sasl.", "ssl.", "log_level")


def producer_config(options: Mapping[str, object]) -> dict[str, object]:
    """librdkafka properties from the exporter's options (``producer`` table last)."""
    servers = options.get("bootstrap_servers")
    if not isinstance(servers, str) or not servers:
        raise ConfigurationError("the topic exporter needs bootstrap_servers (HOST:PORT,...)")
    config: dict[str, object] = {
        "bootstrap.servers": servers,
        "client.id": "clientmetrics-topic-exporter",
        "acks": "all",
        "linger.ms": 20,
        "log_level": 3,
    }
    for key, prop in SECURITY.items():
        if key in options:
            config[prop] = str(options[key])
    extra = options.get("producer", {})
    if not isinstance(extra, Mapping):
        raise ConfigurationError("topic.producer must be a table of librdkafka properties")
    config.update({str(k): v for k, v in extra.items()})
    return config


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory: ``bootstrap_servers``, ``topic``, security + the queue's options."""
    queue, rest = QueueOptions.take("topic", options)
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
    sink = TopicSink(
        producer_config(rest), topic, queue.labels, partitions=partitions, create_topic=create_topic
    )
    return QueuedExporter("topic", sink, queue)
