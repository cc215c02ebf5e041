"""Fail-open exporters: each gets accepted pushes through its own bounded queue.

A ``QueuedExporter`` wraps a ``Sink`` (Prometheus, OTLP, topic, or a plugin's own).
The gateway ``offer``s it every acknowledged push without waiting: when the queue
is full the push is dropped and counted, so a slow or dead endpoint costs nothing
but its own queue. One worker task takes batches off the queue (up to the sink's
``max_batch``, waiting at most ``max_delay_s`` for a batch to fill) and hands
them to ``Sink.send``. With ``required = true`` the exporter gates the answer
instead, like the landing exporter: ``export`` waits until its push was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.base import ExportError
from clientmetrics.telemetry.model import PUSH_LABELS, AcceptedPush

log = structlog.get_logger(__name__)

#: Strimzi's default: the client id and the instance id; the rest are opt-in.
DEFAULT_LABELS = ("client_id", "client_instance_id")
DEFAULT_QUEUE_SIZE = 10_000


@dataclass(slots=True)
class ExporterStats:
    """One exporter's counters since start (read by ``/metrics`` and the dashboard)."""

    name: str
    received: int = 0
    exported: int = 0
    dropped: int = 0
    failed: int = 0
    queue_depth: int = 0
    export_seconds_sum: float = 0.0
    export_seconds_count: int = 0
    export_seconds_max: float = 0.0
    #: Counters particular to one exporter (e.g. Prometheus' refused series).
    extra: dict[str, float] = field(default_factory=dict)

    def timed(self, seconds: float) -> None:
        """Record how long one export (or one batch) took."""
        self.export_seconds_sum += seconds
        self.export_seconds_count += 1
        self.export_seconds_max = max(self.export_seconds_max, seconds)


class Sink(Protocol):
    """Where a queued exporter's batches go."""

    #: The most pushes one ``send`` gets; the wait for a batch to fill.
    max_batch: int
    max_delay_s: float

    async def start(self, stats: ExporterStats) -> None:
        """Open connections; ``stats`` is where the sink counts what it reports later."""

    async def send(self, pushes: Sequence[AcceptedPush]) -> int:
        """Send a batch; return how many are exported now (the sink counts the rest
        itself as they are confirmed). Raise ``ExportError`` when it gave up on them."""

    async def flush(self, timeout_s: float) -> None:
        """Wait until what was sent is confirmed."""

    async def close(self, timeout_s: float) -> None:
        """Release every resource."""


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """The options every queued exporter shares, taken out of its TOML table."""

    queue_size: int = DEFAULT_QUEUE_SIZE
    required: bool = False
    labels: tuple[str, ...] = DEFAULT_LABELS

    @classmethod
    def take(
        cls, name: str, options: Mapping[str, object]
    ) -> tuple[QueueOptions, dict[str, object]]:
        """Split ``options`` into the shared ones (validated) and the sink's own."""
        rest = dict(options)
        queue_size = rest.pop("queue_size", DEFAULT_QUEUE_SIZE)
        required = rest.pop("required", False)
        labels = rest.pop("labels", list(DEFAULT_LABELS))
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise ConfigurationError(f"{name}.queue_size must be a positive integer")
        if not isinstance(required, bool):
            raise ConfigurationError(f"{name}.required must be true or false")
        return cls(queue_size, required, parse_labels(name, labels)), rest


def parse_labels(name: str, labels: object) -> tuple[str, ...]:
    """A ``labels = [...]`` list: KIP-714's broker label names, each at most once."""
    if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
        raise ConfigurationError(f"{name}.labels must be a list of label names")
    unknown = [x for x in labels if x not in PUSH_LABELS]
    if unknown:
        raise ConfigurationError(
            f"{name}.labels: unknown {', '.join(unknown)} (known: {', '.join(PUSH_LABELS)})"
        )
    if len(set(labels)) != len(labels):
        raise ConfigurationError(f"{name}.labels names a label twice")
    return tuple(labels)


class QueuedExporter:
    """An ``Exporter`` that feeds a ``Sink`` from a bounded queue, fail-open."""

    def __init__(self, name: str, sink: Sink, options: QueueOptions) -> None:
        self.name = name
        self.sink = sink
        self.required = options.required
        self.labels = options.labels
        self.stats = ExporterStats(name)
        self._size = options.queue_size
        self._queue: deque[tuple[AcceptedPush, asyncio.Future[None] | None]] = deque()
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.sink.start(self.stats)
        self._task = asyncio.create_task(self._run(), name=f"exporter-{self.name}")

    def offer(self, push: AcceptedPush) -> bool:
        """Queue ``push`` without waiting; False (dropped, counted) when the queue is full."""
        stats = self.stats
        stats.received += 1
        if len(self._queue) >= self._size:
            stats.dropped += 1
            return False
        self._queue.append((push, None))
        self._idle.clear()
        self._wake.set()
        return True

    async def export(self, push: AcceptedPush) -> None:
        """Fail-open: ``offer``. Required: wait for room, then until the push was sent."""
        if not self.required:
            self.offer(push)
            return
        if self._task is None or self._task.done():
            raise ExportError(f"exporter {self.name} is not running")
        self.stats.received += 1
        while len(self._queue) >= self._size:
            self._space.clear()
            await self._space.wait()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((push, done))
        self._idle.clear()
        self._wake.set()
        await done

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
            deadline = loop.time() + self.sink.max_delay_s
            while len(self._queue) < self.sink.max_batch and loop.time() < deadline:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), deadline - loop.time())
            batch = [
                self._queue.popleft() for _ in range(min(len(self._queue), self.sink.max_batch))
            ]
            self._space.set()
            await self._send(batch)

    async def _send(self, batch: list[tuple[AcceptedPush, asyncio.Future[None] | None]]) -> None:
        stats = self.stats
        started = time.perf_counter()
        error: ExportError | None = None
        try:
            stats.exported += await self.sink.send([push for push, _ in batch])
        except ExportError as exc:
            error = exc
            stats.failed += len(batch)
            log.warning(
                "exporter_send_failed", exporter=self.name, pushes=len(batch), error=str(exc)
            )
        except Exception as exc:  # a sink bug must not kill its worker: count, log, go on
            error = ExportError(f"{self.name}: {exc!r}")
            stats.failed += len(batch)
            log.exception("exporter_send_crashed", exporter=self.name)
        stats.timed(time.perf_counter() - started)
        for _, done in batch:
            if done is not None and not done.done():
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def exporter_stats(self) -> list[ExporterStats]:
        """This exporter's counters, queue depth filled in."""
        self.stats.queue_depth = len(self._queue)
        return [self.stats]

    async def flush(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) until the queue is sent, then flush the sink."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        await self.sink.flush(max(0.0, deadline - loop.time()))

    async def close(self, timeout_s: float) -> None:
        """Send what is queued (up to ``timeout_s``), stop the worker, close the sink."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._task is not None:
            await self.flush(timeout_s)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        left = len(self._queue)
        if left:
            self.stats.dropped += left
            log.warning("exporter_closed_with_queue", exporter=self.name, dropped=left)
            for _, done in self._queue:
                if done is not None and not done.done():
                    done.set_exception(ExportError(f"exporter {self.name} closed"))
            self._queue.clear()
        await self.sink.close(max(0.0, deadline - loop.time()))
