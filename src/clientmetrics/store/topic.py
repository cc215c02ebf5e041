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

The topic is open to whoever may write to it, so its records are untrusted:
each is decoded with bounded size and depth, verified when the gateways share a
key (``signing.py``), and counted as refused when unusable (``records.py``,
``refusals.py``); the subscription cap holds on what is read as on what is
written (``log_state.py``). Nothing a record holds can stop the follower.

The Kafka client is librdkafka (confluent-kafka): its producer and consumer are
thread-based, so the consumer is polled on one thread of ours (``follow.py``,
which decodes there and restarts the thread if it dies), the producer is
flushed on a worker thread, and results cross into the event loop in batches
with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
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
from clientmetrics.store.follow import FetchWatch, Follower, Item, read_batch
from clientmetrics.store.log_state import LogState, Outcome
from clientmetrics.store.records import Decoded, Reason, Refused, encode_value
from clientmetrics.store.refusals import Refusals
from clientmetrics.store.signing import SIGNATURE_HEADER, RecordSigner
from clientmetrics.telemetry.configs import over_cap

__all__ = ["DEFAULT_TOPIC", "TopicSubscriptionStore"]

log = structlog.get_logger("clientmetrics.store")

DEFAULT_TOPIC = "__client_metrics_subscriptions"
#: How long the broker may hold a fetch when nothing is new (librdkafka's
#: ``fetch.wait.max.ms``): the idle gateway's request rate to the cluster.
DEFAULT_FETCH_WAIT_MS = 30_000
CLIENT_ID = "clientmetrics-subscriptions"
#: Errors that mean "the partition's leader is not settled yet": retried until the timeout.
_LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
    }
)
_CAS_ATTEMPTS = 50  # an alter losing this many compare-and-sets in a row gives up


class TopicSubscriptionStore:
    """A ``SubscriptionStore`` backed by a (compacted) Kafka topic.

    ``signer``: records are signed and only signed ones are applied (None: any
    record is applied; the gateway warns). ``max_subscriptions``: the cap every
    reader enforces on the log, in log order.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str = DEFAULT_TOPIC,
        *,
        timeout_s: float = 10.0,
        client_config: Mapping[str, Any] | None = None,
        fetch_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
        signer: RecordSigner | None = None,
        max_subscriptions: int | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._timeout = timeout_s
        self._fetch_wait_ms = fetch_wait_ms
        self._extra = dict(client_config or {})
        self._signer = signer
        self._cap = max_subscriptions
        self._log = LogState(max_subscriptions)
        self.refusals = Refusals(topic)
        self._writing = asyncio.Lock()  # one alter at a time from this gateway
        self._consumed: dict[int, int] = {}  # partition -> next offset to read
        self._waiters: dict[tuple[int, int], asyncio.Future[Outcome | Reason]] = {}
        self._on_change: ChangeListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._watch = FetchWatch(topic)
        self._follower: Follower | None = None

    def _client_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self._bootstrap,
            "client.id": CLIENT_ID,
            "log_level": 3,
            **self._extra,
        }

    async def start(self, on_change: ChangeListener) -> dict[str, dict[str, str]]:
        """Create the topic if missing, read it to its end (off the event loop), then follow it."""
        self._loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(self._ensure_topic)
            await asyncio.to_thread(self._catch_up)
        except Exception as exc:
            await asyncio.to_thread(self._release_clients)
            if isinstance(exc, KafkaException):
                raise StoreError(f"subscription topic {self._topic}: {exc}") from exc
            raise
        self._on_change = on_change
        self._follower = Follower(
            self._loop, lambda: self._consumer, self._topic, self._signer, self._watch,
            deliver=self._apply_batch, resume_at=lambda: dict(self._consumed),
        )  # fmt: skip
        self._follower.start()
        state = self._log.configs
        log.info("topic_store_started", topic=self._topic, resources=len(state),
                 signed=self._signer is not None)  # fmt: skip
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

    def _catch_up(self) -> None:
        """Read the topic to the end it had at start (on a worker thread: the loop has
        not handed this store anything yet, so the state is this thread's until it ends)."""
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
            ends[p] = self._end_offset(consumer, p)
            self._consumed[p] = 0
        consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
        while any(self._consumed[p] < end for p, end in ends.items()):
            items = read_batch(consumer, self._topic, self._signer, self._timeout)
            if not items:
                raise StoreError(f"timed out reading subscription topic {self._topic}")
            self._apply_batch(items, notify=False)

    def _end_offset(self, consumer: Consumer, partition: int) -> int:
        """The partition's end, retried while its leader is still moving in: metadata can
        name a leader a moment before that broker answers as one (NOT_LEADER_FOR_PARTITION
        right after the topic was created, seen under load)."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(self._topic, partition), timeout=self._timeout
                )
                return int(high)
            except KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() and error.code() not in _LEADER_MOVING:
                    raise
                if time.monotonic() > deadline:
                    raise
                log.info("store_end_offset_retry", topic=self._topic, error=str(error))
                time.sleep(0.1)

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

    def _apply_batch(self, items: list[Item], notify: bool = True) -> None:
        """Apply records read from the log, skipping those applied already (our own writes).

        Runs on the event loop once following; each record costs a few dict
        operations (decoding and verifying happened on the follower's thread).
        """
        for partition, offset, record in items:
            if offset < self._consumed.get(partition, 0):
                continue
            self._consumed[partition] = offset + 1
            outcome = self._apply_one(partition, offset, record, notify)
            waiter = self._waiters.pop((partition, offset), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(outcome)
        for (partition, offset), waiter in list(self._waiters.items()):
            if self._consumed.get(partition, 0) > offset and not waiter.done():
                waiter.set_result(Outcome.STALE)  # never delivered: the writer retries

    def _apply_one(
        self, partition: int, offset: int, record: Decoded | Refused, notify: bool
    ) -> Outcome | Reason:
        if isinstance(record, Refused):
            self.refusals.refused(record.name, record.reason, record.detail, partition, offset)
            return record.reason
        before = self._log.configs.get(record.name, {})
        outcome = self._log.apply(record, offset)
        if outcome is Outcome.OVER_CAP:
            detail = f"over max_subscriptions ({self._cap})"
            self.refusals.refused(record.name, Reason.OVER_CAP, detail, partition, offset)
        elif outcome is Outcome.APPLIED and notify and before != record.configs and self._on_change:
            self._on_change(record.name, dict(record.configs))
        return outcome

    async def put(self, name: str, configs: ConfigMap) -> None:
        """Replace ``name``'s configs (an update that ignores the stored ones)."""
        fixed = dict(configs)
        await self.update(name, lambda _stored: fixed)

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Compare-and-set ``change(stored)`` on the log, retrying when another alter won.

        Each attempt reads the state as of the last record this gateway has read;
        after a lost attempt that includes the winner's record, so every round
        some writer succeeds. A record every reader refuses as over the cap is
        the cap's ``ConfigError``.
        """
        async with self._writing:
            for _ in range(_CAS_ATTEMPTS):
                base = self._log.versions.get(name, -1)
                new = dict(change(dict(self._log.configs.get(name, {}))))
                value = encode_value(new, base)
                outcome = await self._append(Decoded(name, new, base), value)
                if outcome is Outcome.APPLIED:
                    return new
                if outcome is Outcome.OVER_CAP and self._cap is not None:
                    raise over_cap(name, self._cap)
                if isinstance(outcome, Reason):
                    raise StoreError(f"subscription {name}: own record refused ({outcome.value})")
        raise StoreError(f"subscription {name} kept changing; gave up after {_CAS_ATTEMPTS} tries")

    async def _append(self, record: Decoded, value: bytes | None) -> Outcome | Reason:
        """Append ``record``; return what applying it did, once it is applied here.

        When every record before it has been read, it is applied at once (the
        consumer's copy is skipped later); otherwise once the consumer reaches it.
        """
        producer, loop, name = self._producer, self._loop, record.name
        if producer is None or loop is None:
            raise StoreError("topic store is not started")
        key = name.encode()
        headers: list[tuple[str, str | bytes | None]] = []
        if self._signer is not None:
            headers.append((SIGNATURE_HEADER, self._signer.sign(self._topic, key, value)))
        outcome: list[tuple[Any, int, int]] = []  # set by the callback, in flush()

        def on_delivery(error: Any, message: Any) -> None:
            outcome.append((error, int(message.partition() or 0), int(message.offset() or 0)))

        try:
            producer.produce(
                self._topic, key=key, value=value, headers=headers, on_delivery=on_delivery
            )
        except (KafkaException, BufferError) as exc:
            raise StoreError(f"cannot write subscription {name}: {exc}") from exc
        await asyncio.to_thread(producer.flush, self._timeout)
        if not outcome:
            raise StoreError(f"timed out writing subscription {name}")
        error, partition, offset = outcome[0]
        if error is not None:
            raise StoreError(f"cannot write subscription {name}: {error}")
        if self._consumed.get(partition, 0) > offset:
            # Read already (by the follower, racing the delivery report): as applied then.
            return self._outcome_of(record, offset)
        seen: asyncio.Future[Outcome | Reason] = loop.create_future()
        self._waiters[(partition, offset)] = seen
        if self._consumed.get(partition) == offset:
            self._apply_batch([(partition, offset, record)])
        try:
            return await asyncio.wait_for(seen, self._timeout)
        except TimeoutError as exc:
            raise StoreError(f"timed out reading back subscription {name}") from exc
        finally:
            self._waiters.pop((partition, offset), None)

    def _outcome_of(self, record: Decoded, offset: int) -> Outcome:
        """What applying ``record`` at ``offset`` did, read off the state afterwards."""
        if self._log.versions.get(record.name) == offset:
            return Outcome.APPLIED
        full = self._cap is not None and len(self._log.configs) >= self._cap
        if record.configs and record.name not in self._log.configs and full:
            return Outcome.OVER_CAP
        return Outcome.STALE

    def health(self) -> str | None:
        """None while the follower is alive; else why the store is not following."""
        if self._follower is None:
            return None
        return self._follower.health()

    def counters(self) -> dict[str, float]:
        """For ``/metrics``: refused records by reason, the follower's state and restarts."""
        follower = self._follower
        self.refusals.flush_due()
        refused = self.refusals.snapshot()
        values = {f"subscription_records_refused:{k}": v for k, v in refused.items()}
        values["subscription_records_signed"] = 1.0 if self._signer is not None else 0.0
        values["subscription_follower_up"] = 1.0 if follower and follower.alive else 0.0
        values["subscription_follower_restarts"] = float(follower.restarts if follower else 0)
        return values

    async def close(self) -> None:
        """Stop following the topic and release the clients."""
        if self._follower is not None:
            await self._follower.stop()
        await asyncio.to_thread(self._release_clients)

    def _release_clients(self) -> None:
        """Flush and destroy the producer, close the consumer: a client left to the
        garbage collector keeps reconnecting (and logging) after its cluster is gone."""
        producer, self._producer = self._producer, None
        consumer, self._consumer = self._consumer, None
        if producer is not None:
            producer.flush(5.0)
            producer.close()
        if consumer is not None:
            consumer.close()
