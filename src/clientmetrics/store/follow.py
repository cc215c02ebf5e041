"""The thread following the topic store's topic, and whether its consumer still fetches.

A consumer following a topic sends one fetch per ``fetch.wait.max.ms`` at least
(the broker answers it when a record arrives or the wait ends). librdkafka's
statistics, emitted every ``statistics.interval.ms`` (set to the fetch wait) by
the thread that polls, count the fetches sent; two intervals in a row without a
new fetch, or a partition not in the ``active`` fetch state, mean the follower
stopped (as a partition assigned before librdkafka knew its leader can: it then
waits for the next metadata refresh, minutes away). The follower then assigns its
partitions again. This costs the cluster no request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import Consumer, TopicPartition

from clientmetrics.store.records import Decoded, Reason, Refused, decode_record
from clientmetrics.store.signing import RecordSigner

log = structlog.get_logger("clientmetrics.store")

#: Intervals in a row without a new fetch before the follower is called stuck.
QUIET_INTERVALS = 2


class FetchWatch:
    """``update`` is librdkafka's ``stats_cb``; ``stuck`` says the follower stopped."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.stuck = False
        self._fetches = -1
        self._quiet = 0

    def update(self, text: str) -> None:
        """Read one statistics document (on the polling thread)."""
        try:
            stats = json.loads(text)
            fetches = sum(int(b["req"].get("Fetch", 0)) for b in stats["brokers"].values())
            partitions = stats["topics"].get(self.topic, {}).get("partitions", {})
            states = [p["fetch_state"] for key, p in partitions.items() if key != "-1"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        fetching = fetches > self._fetches and bool(states) and set(states) == {"active"}
        self._fetches = fetches
        self._quiet = 0 if fetching else self._quiet + 1
        if self._quiet >= QUIET_INTERVALS:
            self.stuck = True
            self._quiet = 0


#: Records read per call and handed to the event loop at once.
BATCH = 200
POLL_S = 0.5  # how soon the following thread notices stop()
#: A follower that died is started again after this, doubling per death in a
#: row up to the maximum; one that had run for ``HEALTHY_S`` starts the count over.
BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
HEALTHY_S = 60.0

#: (partition, offset, what the record says or why it is refused)
Item = tuple[int, int, Decoded | Refused]


def decode_message(message: Any, topic: str, signer: RecordSigner | None) -> Decoded | Refused:
    """One consumed message, decoded (``decode_record`` is total; this is a last guard)."""
    key = message.key()
    try:
        headers: dict[str, bytes] = {}
        for name, value in message.headers() or ():
            headers.setdefault(name, value or b"")
        return decode_record(key, message.value(), headers, signer, topic)
    except Exception as exc:  # a record must never stop the follower
        name = key.decode("utf-8", "replace")[:200] if isinstance(key, bytes) else ""
        return Refused(name, Reason.BAD_SHAPE, f"undecodable: {type(exc).__name__}")


def read_batch(
    consumer: Consumer, topic: str, signer: RecordSigner | None, timeout_s: float
) -> list[Item]:
    """Up to ``BATCH`` records, decoded and verified here (on the calling thread)."""
    # consume() would wait for a whole batch (or the timeout): wait for one record,
    # then take what else has arrived already.
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    items: list[Item] = []
    for message in [first, *consumer.consume(BATCH - 1, 0)]:
        if message.error():
            log.warning("subscription_topic_error", error=str(message.error()))
            continue
        partition, offset = int(message.partition() or 0), int(message.offset() or 0)
        items.append((partition, offset, decode_message(message, topic, signer)))
    return items


class Follower:
    """The thread that follows the topic, started again (with backoff) when it dies.

    It decodes records where it reads them and hands them to the event loop in
    batches (``deliver``), so a flood costs the loop a few dict operations per
    record. ``resume_at`` gives the offsets to restart from (what the loop has).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        consumer: Callable[[], Consumer | None],
        topic: str,
        signer: RecordSigner | None,
        watch: FetchWatch,
        *,
        deliver: Callable[[list[Item]], None],
        resume_at: Callable[[], dict[int, int]],
    ) -> None:
        self._loop = loop
        self._consumer = consumer
        self._topic = topic
        self._signer = signer
        self._watch = watch
        self._deliver = deliver
        self._resume_at = resume_at
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._deaths_in_a_row = 0
        self._why = ""
        self.alive = False
        #: Times the thread was started again after dying.
        self.restarts = 0

    def start(self) -> None:
        """Start following from the offsets the event loop has (on the loop)."""
        read_to = self._resume_at()
        self._thread = threading.Thread(
            target=self._run, args=(read_to, self.restarts > 0),
            name="clientmetrics-topic-store", daemon=True,
        )  # fmt: skip
        self.alive = True
        self._thread.start()

    def health(self) -> str | None:
        """None while following; else why not."""
        if self.alive:
            return None
        return f"subscription store follower down ({self._why}); restarting"

    def _run(self, read_to: dict[int, int], reassign: bool) -> None:
        started = time.monotonic()
        why = "stopped following"
        try:
            self._follow(read_to, reassign)
        except BaseException as exc:  # whatever kills it, it is restarted
            why = f"{type(exc).__name__}: {exc}"[:200]
            log.error("subscription_follower_died", topic=self._topic, error=why, exc_info=True)
        if self._stop.is_set():
            return
        lived = time.monotonic() - started
        with contextlib.suppress(RuntimeError):  # the loop closed: nothing to restart
            self._loop.call_soon_threadsafe(self._died, why, lived)

    def _follow(self, read_to: dict[int, int], reassign: bool) -> None:
        """Hand every new record to the event loop, as the long-polling consumer reads it.

        librdkafka keeps one fetch outstanding, held by the broker until a record
        arrives or ``fetch.wait.max.ms`` passes; consuming only waits for what it
        delivers, so it sends nothing to the cluster by itself.
        """
        while not self._stop.is_set():
            consumer = self._consumer()
            if consumer is None:
                raise RuntimeError("no consumer")
            if reassign or self._watch.stuck:
                if self._watch.stuck:
                    # Sent no fetch for two fetch waits: start the partitions' fetchers again.
                    log.warning("subscription_follower_restarted", topic=self._topic)
                self._watch.stuck = reassign = False
                partitions = [TopicPartition(self._topic, p, o) for p, o in read_to.items()]
                consumer.assign(partitions)
                consumer.resume(partitions)
            try:
                items = read_batch(consumer, self._topic, self._signer, POLL_S)
            except RuntimeError:
                if self._stop.is_set():
                    return  # closed under us: stop() is under way
                raise
            if items:
                for partition, offset, _record in items:
                    read_to[partition] = offset + 1
                self._loop.call_soon_threadsafe(self._deliver, items)

    def _died(self, why: str, lived: float) -> None:
        """On the loop: note the death, and start the thread again after a backoff."""
        self.alive = False
        self._why = why
        if lived >= HEALTHY_S:
            self._deaths_in_a_row = 0
        delay = min(MAX_BACKOFF_S, BACKOFF_S * 2**self._deaths_in_a_row)
        self._deaths_in_a_row += 1
        log.warning("subscription_follower_down", topic=self._topic, error=why, restart_in_s=delay)
        self._retry = self._loop.call_later(delay, self._restart)

    def _restart(self) -> None:
        if self._stop.is_set():
            return
        self.restarts += 1
        self.start()
        log.info("subscription_follower_restarted", topic=self._topic, after="died",
                 restarts=self.restarts)  # fmt: skip

    async def stop(self) -> None:
        """Stop following (the thread notices within ``POLL_S``)."""
        self._stop.set()
        if self._retry is not None:
            self._retry.cancel()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
