"""Subscriptions kept in a topic on a Kafka cluster, shared by every gateway.

One record per change: the key is the resource name, the value a small JSON
document ``{"configs": {...}}``, a null value deletes. Every gateway consumes the
topic from the beginning and keeps consuming, so the latest record per name wins
(with or without log compaction). Following is one long-polling fetch: the
broker holds it for up to ``fetch_wait_ms`` and answers as soon as a record
arrives, so a change made through one gateway reaches the others at once and an
idle gateway sends the cluster about one request per ``fetch_wait_ms``. ``put``
returns once the record is applied here (at once when nothing unread precedes it
in the log, else when this gateway's consumer has read up to it), so a describe
right after an alter through the same gateway sees the new value.

Alters are a compare-and-set on the log. A record written by ``update`` carries
``base``, the offset of the record for that name it was computed from (-1: none).
Every reader applies a record only if ``base`` is the offset of the last record
it applied for that name, so all gateways accept and reject the same records in
log order. A writer whose record was rejected (another alter of the same name
landed first) computes the change again on the newer state and retries. A
record without ``base`` (older versions, other tools) is applied as it stands,
and a name's first record seen is accepted whatever its base: the ones before
it may have been compacted away.

The Kafka client is librdkafka (confluent-kafka): its producer and consumer are
thread-based, so the consumer is polled on one thread of ours, the producer is
flushed on a worker thread, and results cross into the event loop with
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import structlog
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from clientmetrics.store.base import Change, ChangeListener, ConfigMap, StoreError
from clientmetrics.store.follow import FetchWatch

__all__ = ["DEFAULT_TOPIC", "TopicSubscriptionStore"]

log = structlog.get_logger("clientmetrics.store")

DEFAULT_TOPIC = "__client_metrics_subscriptions"
#: How long the broker may hold a fetch when nothing is new (librdkafka's
#: ``fetch.wait.max.ms``): the idle gateway's request rate to the cluster.
DEFAULT_FETCH_WAIT_MS = 30_000
CLIENT_ID = "clientmetrics-subscriptions"
_POLL_S = 0.5  # how soon the following thread notices close()
_CAS_ATTEMPTS = 50  # an alter losing this many compare-and-sets in a row gives up


def encode_value(configs: ConfigMap, base: int | None = None) -> bytes | None:
    """The record value for ``configs`` computed from the record at ``base``.

    Without a base, empty configs are a tombstone (``None``); with one, a deletion
    is an empty map so that it is compared-and-set like any other change.
    """
    if not configs and base is None:
        return None
    doc: dict[str, Any] = {"configs": dict(sorted(configs.items()))}
    if base is not None:
        doc["base"] = base
    return json.dumps(doc).encode()


def decode_base(value: bytes | None) -> int | None:
    """The ``base`` offset a record value carries, or ``None`` (apply unconditionally)."""
    if not value:
        return None
    try:
        base = json.loads(value).get("base")
    except (ValueError, AttributeError):
        return None
    return base if isinstance(base, int) else None


def decode_value(value: bytes | None) -> dict[str, str]:
    """The configs a record value carries (empty for a tombstone or garbage)."""
    if not value:
        return {}
    try:
        doc = json.loads(value)
        configs = doc["configs"]
        return {str(k): str(v) for k, v in configs.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("subscription_record_invalid", value=value[:200])
        return {}


class TopicSubscriptionStore:
    """A ``SubscriptionStore`` backed by a (compacted) Kafka topic."""

    def __init__(
        self,
        bootstrap: str,
        topic: str = DEFAULT_TOPIC,
        *,
        timeout_s: float = 10.0,
        client_config: Mapping[str, Any] | None = None,
        fetch_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._timeout = timeout_s
        self._fetch_wait_ms = fetch_wait_ms
        self._extra = dict(client_config or {})
        self._state: dict[str, dict[str, str]] = {}
        #: name -> offset of the last record applied for it (deletions included).
        self._versions: dict[str, int] = {}
        self._writing = asyncio.Lock()  # one alter at a time from this gateway
        self._consumed: dict[int, int] = {}  # partition -> next offset to read
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._on_change: ChangeListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._stop = threading.Event()
        self._watch = FetchWatch(topic)
        self._thread: threading.Thread | None = None

    def _client_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self._bootstrap,
            "client.id": CLIENT_ID,
            "log_level": 3,
            **self._extra,
        }

    async def start(self, on_change: ChangeListener) -> dict[str, dict[str, str]]:
        """Create the topic if missing, read it to its end, then follow it."""
        self._loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(self._ensure_topic)
            state = await asyncio.to_thread(self._catch_up)
        except KafkaException as exc:
            raise StoreError(f"subscription topic {self._topic}: {exc}") from exc
        self._on_change = on_change
        self._thread = threading.Thread(
            target=self._follow, name="clientmetrics-topic-store", daemon=True
        )
        self._thread.start()
        log.info("topic_store_started", topic=self._topic, resources=len(state))
        return {name: dict(configs) for name, configs in state.items()}

    def _ensure_topic(self) -> None:
        admin = AdminClient(self._client_config())
        metadata = admin.list_topics(timeout=self._timeout)
        if self._topic in metadata.topics and not metadata.topics[self._topic].error:
            return
        for config in ({"cleanup.policy": "compact"}, {}):
            futures = admin.create_topics(
                [NewTopic(self._topic, num_partitions=1, replication_factor=-1, config=config)],
                operation_timeout=self._timeout,
            )
            try:
                futures[self._topic].result(self._timeout)
                return
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                # A Kafka-compatible broker may not know cleanup.policy: retry without it.
                log.info("create_topic_retry", topic=self._topic, error=str(error))
        raise StoreError(f"cannot create subscription topic {self._topic}")

    def _catch_up(self) -> dict[str, dict[str, str]]:
        self._producer = Producer({**self._client_config(), "linger.ms": 0, "acks": "all"})
        # Connect and learn the partition leader now, not on the first alter.
        self._producer.list_topics(self._topic, timeout=self._timeout)
        consumer = Consumer(
            {
                **self._client_config(),
                "group.id": "clientmetrics-topic-store",  # required, never joined
                "enable.auto.commit": False,
                # One long poll: the broker answers when a record arrives, or after this.
                "fetch.wait.max.ms": self._fetch_wait_ms,
                # librdkafka wants its request timeout at least 1 s past the fetch wait.
                "socket.timeout.ms": max(60_000, self._fetch_wait_ms + 10_000),
                "fetch.error.backoff.ms": 50,
                # librdkafka's statistics (local, no request) show a follower gone quiet.
                "statistics.interval.ms": self._fetch_wait_ms,
                "stats_cb": self._watch.update,
                "enable.partition.eof": False,
            }
        )
        self._consumer = consumer
        partitions = self._partitions(consumer)
        ends: dict[int, int] = {}
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(self._topic, p), timeout=self._timeout
            )
            ends[p] = high
            self._consumed[p] = 0
        consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
        state: dict[str, dict[str, str]] = {}
        remaining = {p for p, end in ends.items() if end > 0}
        while remaining:
            message = consumer.poll(self._timeout)
            if message is None:
                raise StoreError(f"timed out reading subscription topic {self._topic}")
            if message.error():
                continue
            name, configs, base = self._record(message)
            partition, offset = int(message.partition() or 0), int(message.offset() or 0)
            self._consumed[partition] = offset + 1
            self._accept(state, name, configs, base, offset)
            if offset + 1 >= ends[partition]:
                remaining.discard(partition)
        self._state = state
        return state

    def _partitions(self, consumer: Consumer) -> list[int]:
        """The topic's partitions once each has a leader (a topic just created may be
        listed without partitions, or without leaders, for a moment)."""
        deadline = time.monotonic() + self._timeout
        while True:
            metadata = consumer.list_topics(self._topic, timeout=self._timeout)
            topic = metadata.topics.get(self._topic)
            if (
                topic is not None
                and topic.error is None
                and topic.partitions
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
            ):
                return sorted(topic.partitions)
            if time.monotonic() > deadline:
                raise StoreError(f"subscription topic {self._topic} has no partition leaders")
            time.sleep(0.1)

    @staticmethod
    def _record(message: Any) -> tuple[str, dict[str, str], int | None]:
        key = message.key()
        name = key.decode("utf-8", "replace") if key else ""
        value = message.value()
        return name, decode_value(value), decode_base(value)

    def _accept(
        self,
        state: dict[str, dict[str, str]],
        name: str,
        configs: dict[str, str],
        base: int | None,
        offset: int,
    ) -> bool:
        """Apply one record to ``state`` if its compare-and-set holds; True if applied."""
        if not name:
            return False
        last = self._versions.get(name)
        if base is not None and last is not None and base != last:
            return False  # computed from a state another record has replaced
        self._versions[name] = offset
        if configs:
            state[name] = configs
        else:
            state.pop(name, None)
        return True

    def _follow(self) -> None:
        """Hand every new record to the event loop, as the long-polling consumer reads it.

        librdkafka keeps one fetch outstanding, held by the broker until a record
        arrives or ``fetch.wait.max.ms`` passes; ``poll`` only waits for what it
        delivers, so it sends nothing to the cluster by itself.
        """
        consumer = self._consumer
        loop = self._loop
        assert consumer is not None
        assert loop is not None
        read_to = dict(self._consumed)  # this thread's view; _consumed belongs to the loop
        while not self._stop.is_set():
            if self._watch.stuck:
                # Sent no fetch for two fetch waits: start the partitions' fetchers again.
                log.warning("subscription_follower_restarted", topic=self._topic)
                self._watch.stuck = False
                partitions = [TopicPartition(self._topic, p, o) for p, o in read_to.items()]
                consumer.assign(partitions)
                consumer.resume(partitions)
            try:
                message = consumer.poll(_POLL_S)
            except RuntimeError:  # closed under us: close() is under way
                return
            if message is None:
                continue
            if message.error():
                log.warning("subscription_topic_error", error=str(message.error()))
                continue
            name, configs, base = self._record(message)
            partition, offset = int(message.partition() or 0), int(message.offset() or 0)
            read_to[partition] = offset + 1
            loop.call_soon_threadsafe(self._apply, name, configs, base, partition, offset)

    def _apply(
        self, name: str, configs: dict[str, str], base: int | None, partition: int, offset: int
    ) -> None:
        """Apply the record at ``offset`` unless it was applied already (our own write)."""
        if offset < self._consumed.get(partition, 0):
            return
        self._consumed[partition] = offset + 1
        before = self._state.get(name, {})
        applied = self._accept(self._state, name, configs, base, offset)
        if applied and before != configs and self._on_change is not None:
            self._on_change(name, dict(configs))
        still = []
        for p, o, future in self._waiters:
            if self._consumed.get(p, 0) > o:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((p, o, future))
        self._waiters = still

    async def put(self, name: str, configs: ConfigMap) -> None:
        """Replace ``name``'s configs (an update that ignores the stored ones)."""
        fixed = dict(configs)
        await self.update(name, lambda _stored: fixed)

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Compare-and-set ``change(stored)`` on the log, retrying when another alter won.

        Each attempt reads the state as of the last record this gateway has read;
        after a lost attempt that includes the winner's record, so every round
        some writer succeeds.
        """
        async with self._writing:
            for _ in range(_CAS_ATTEMPTS):
                base = self._versions.get(name, -1)
                new = dict(change(dict(self._state.get(name, {}))))
                offset = await self._append(name, encode_value(new, base))
                if self._versions.get(name) == offset:
                    return new
        raise StoreError(f"subscription {name} kept changing; gave up after {_CAS_ATTEMPTS} tries")

    async def _append(self, name: str, value: bytes | None) -> int:
        """Append a record for ``name``; return its offset once it is applied here.

        When every record before it has been read, it is applied at once (the
        consumer's copy is skipped later); otherwise once the consumer reaches it.
        """
        producer = self._producer
        if producer is None or self._loop is None:
            raise StoreError("topic store is not started")
        outcome: list[tuple[Any, int, int]] = []  # set by the callback, in flush()

        def on_delivery(error: Any, message: Any) -> None:
            outcome.append((error, int(message.partition() or 0), int(message.offset() or 0)))

        try:
            producer.produce(self._topic, key=name.encode(), value=value, on_delivery=on_delivery)
        except (KafkaException, BufferError) as exc:
            raise StoreError(f"cannot write subscription {name}: {exc}") from exc
        await asyncio.to_thread(producer.flush, self._timeout)
        if not outcome:
            raise StoreError(f"timed out writing subscription {name}")
        error, partition, offset = outcome[0]
        if error is not None:
            raise StoreError(f"cannot write subscription {name}: {error}")
        if self._consumed.get(partition) == offset:
            self._apply(name, decode_value(value), decode_base(value), partition, offset)
        if self._consumed.get(partition, 0) > offset:
            return offset
        seen: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((partition, offset, seen))
        try:
            await asyncio.wait_for(seen, self._timeout)
        except TimeoutError as exc:
            raise StoreError(f"timed out reading back subscription {name}") from exc
        return offset

    async def close(self) -> None:
        """Stop following the topic and release the clients."""
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5.0)
        if self._consumer is not None:
            await asyncio.to_thread(self._consumer.close)
