"""The topic exporter as a gating exporter (``required = true``).

A push is answered only once the cluster acknowledged its record: the producer
is idempotent and writes with ``acks=all``, so an answered push is on every
in-sync replica, once. Gateways configured so keep no state of their own (no
landing zone needed): any number of them behind one bootstrap address lose no
acknowledged push when one dies.

While the cluster cannot take a record, the push waits for it up to
``delivery_timeout_ms`` (librdkafka's ``message.timeout.ms``), then fails with
``ExportError``, which the gateway answers ``THROTTLING_QUOTA_EXCEEDED``: a
retriable code (the Java client and librdkafka ask for their subscription again
after the push interval and go on pushing; ``INVALID_RECORD`` would turn the Java
client's telemetry off for good). At most ``max_in_flight`` pushes wait for the
cluster; the next ones fail at once, so a cluster outage holds a bounded amount
of memory and no connection longer than the timeout.

Nothing costly runs on the event loop: records are built (OTLP decoded, labelled,
encoded) and handed to librdkafka on a worker thread, one batch at a time, and
delivery reports come back from the producer's poll thread in one call per poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol

from clientmetrics.exporters.base import ExportError
from clientmetrics.exporters.queued import ExporterStats
from clientmetrics.telemetry.model import AcceptedPush

__all__ = ["AckedTopicExporter"]

#: Pushes handed to the producer thread in one go at most.
_BATCH = 512
#: How much longer than librdkafka's own timeout a push waits for its report.
_GRACE_S = 5.0

Pending = list[tuple[AcceptedPush, "asyncio.Future[None]"]]


class AckingSink(Protocol):
    """What this exporter needs of ``exporters.topic.TopicSink`` (named here, so that
    the topic module, which builds this exporter, is not imported back)."""

    topic: str
    fatal: str | None

    async def start(self, stats: ExporterStats) -> None: ...

    def produce(self, push: AcceptedPush, future: asyncio.Future[None] | None = None) -> None: ...

    async def flush(self, timeout_s: float) -> None: ...

    async def close(self, timeout_s: float) -> None: ...


class AckedTopicExporter:
    """Gates each push's answer on the cluster's acknowledgement of its record."""

    def __init__(self, name: str, sink: AckingSink, max_in_flight: int, timeout_s: float) -> None:
        self.name = name
        self.sink = sink
        self.max_in_flight = max_in_flight
        self.timeout_s = timeout_s
        self.stats = ExporterStats(name)
        self._in_flight = 0
        self._pending: Pending = []
        self._pump: asyncio.Task[None] | None = None
        self._started = False

    async def start(self) -> None:
        await self.sink.start(self.stats)
        self._started = True

    async def export(self, push: AcceptedPush) -> None:
        """Return once the cluster acknowledged ``push``'s record; else ``ExportError``."""
        stats = self.stats
        stats.received += 1
        if not self._started:
            raise ExportError(f"exporter {self.name} is not running")
        if self.sink.fatal is not None:
            stats.failed += 1
            raise ExportError(f"topic producer failed for good: {self.sink.fatal}")
        if self._in_flight >= self.max_in_flight:
            stats.dropped += 1
            raise ExportError(
                f"topic {self.sink.topic}: {self._in_flight} pushes already await the cluster"
            )
        started = time.perf_counter()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight += 1
        try:
            self._pending.append((push, done))
            if self._pump is None or self._pump.done():
                self._pump = asyncio.create_task(self._drain(), name=f"exporter-{self.name}")
            await asyncio.wait_for(done, self.timeout_s + _GRACE_S)
        except TimeoutError as exc:
            raise ExportError(
                f"topic {self.sink.topic}: no acknowledgement in {self.timeout_s:g} s"
            ) from exc
        finally:
            self._in_flight -= 1
        stats.timed(time.perf_counter() - started)

    async def _drain(self) -> None:
        """Hand pending pushes to the producer thread, a batch at a time, in order."""
        while self._pending:
            batch = self._pending[:_BATCH]
            del self._pending[:_BATCH]
            refused = await asyncio.to_thread(self._produce, batch)
            for future, reason in refused:
                self.stats.failed += 1
                if not future.done():
                    future.set_exception(ExportError(f"topic {self.sink.topic}: {reason}"))

    def _produce(self, batch: Pending) -> list[tuple[asyncio.Future[None], str]]:
        """On a worker thread: build and produce each record; the ones librdkafka refused."""
        refused = []
        for push, future in batch:
            try:
                self.sink.produce(push, future)
            except BufferError:
                refused.append((future, "the producer's buffer is full"))
            except Exception as exc:  # a bad record or a dead producer fails this push only
                refused.append((future, repr(exc)))
        return refused

    def exporter_stats(self) -> list[ExporterStats]:
        """Counters: exported = acknowledged, dropped = refused at the in-flight bound."""
        self.stats.queue_depth = self._in_flight
        return [self.stats]

    def health(self) -> str | None:
        """None while pushes can be produced; the reason once they cannot."""
        if not self._started:
            return f"exporter {self.name} is not running"
        if self.sink.fatal is not None:
            return f"topic producer failed for good: {self.sink.fatal}"
        return None

    def counters(self) -> dict[str, float]:
        return {"topic_in_flight": float(self._in_flight)}

    async def flush(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) until every record sent is acknowledged."""
        await self.sink.flush(timeout_s)

    async def close(self, timeout_s: float) -> None:
        """Send what is pending, wait for the reports (up to ``timeout_s``), close."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._pump is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._pump), timeout_s)
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        for _, future in self._pending:
            if not future.done():
                future.set_exception(ExportError(f"exporter {self.name} closed"))
        self._pending.clear()
        self._started = False
        await self.sink.close(max(0.0, deadline - loop.time()))
