"""The export path: which exporters gate a push's answer and which are only offered it."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from clientmetrics.exporters.base import Exporter, ExportError, Landed
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter
from clientmetrics.telemetry.model import AcceptedPush


@runtime_checkable
class Offered(Protocol):
    """A fail-open destination: takes a push without waiting, counts for itself."""

    def offer(self, push: AcceptedPush) -> object:
        """Take ``push`` or drop it (counted); never wait."""

    def exporter_stats(self) -> list[ExporterStats]:
        """The counters of the exporter(s) behind it."""


@runtime_checkable
class Counted(Protocol):
    """An exporter that keeps its own counters (queued, offered, or gating like the
    required topic exporter); the export path counts the others."""

    def exporter_stats(self) -> list[ExporterStats]:
        """The counters of the exporter(s) behind it."""


@runtime_checkable
class Submitting(Protocol):
    """A gating exporter that can take a push without a task (the landing exporter)."""

    def submit(self, push: AcceptedPush, landed: Landed) -> bool:
        """Take ``push`` now and call ``landed`` later; False if it cannot now (await
        ``export`` instead); raises ``ExportError`` as ``export`` does."""


def fail_open(exporter: object) -> bool:
    """Whether the export path offers pushes to ``exporter`` instead of awaiting it."""
    if isinstance(exporter, QueuedExporter):
        return not exporter.required
    return isinstance(exporter, Offered)


class ExportPath:
    """Hands each accepted push to every exporter.

    Gating exporters (landing, any plugin that is not fail-open, and queued ones
    marked ``required``) are awaited: the push is answered once all of
    them have it durably. The others are offered the push only after that, without
    waiting, so they can neither delay nor fail the answer.
    """

    def __init__(self, exporters: Sequence[Exporter]) -> None:
        names = [e.name for e in exporters]
        if len(set(names)) != len(names):
            raise ValueError(f"two exporters share a name: {names}")
        self.exporters = tuple(exporters)
        self._offered: tuple[Offered, ...] = tuple(
            e for e in exporters if fail_open(e) and isinstance(e, Offered)
        )
        self._gating = tuple(e for e in exporters if not fail_open(e))
        self._stats = {
            e.name: ExporterStats(e.name) for e in self._gating if not isinstance(e, Counted)
        }
        #: The one gating exporter's ``submit`` when it can take pushes without a task,
        #: and its counters (None if it keeps its own).
        self._submit: Callable[[AcceptedPush, Landed], bool] | None = None
        self._submit_stats: ExporterStats | None = None
        if len(self._gating) == 1 and isinstance(self._gating[0], Submitting):
            self._submit = self._gating[0].submit
            self._submit_stats = self._stats.get(self._gating[0].name)
        #: ``submit``'s tasks where the exporter cannot take the push at once.
        self._tasks: set[asyncio.Future[None]] = set()

    @property
    def gating(self) -> list[str]:
        """The names of the exporters a push's answer waits for."""
        return [e.name for e in self._gating]

    async def export(self, push: AcceptedPush) -> None:
        """Land ``push`` in the gating exporters (raises ``ExportError``), then offer it."""
        if len(self._gating) == 1:
            await self._gate(self._gating[0], push)
        elif self._gating:
            await asyncio.gather(*(self._gate(e, push) for e in self._gating))
        self._offer(push)

    def _offer(self, push: AcceptedPush) -> None:
        """Hand a landed push to the fail-open exporters (never waits)."""
        for exporter in self._offered:
            exporter.offer(push)

    def submit(self, push: AcceptedPush, landed: Landed) -> None:
        """``export`` for the hot path: ``landed(None)`` once the gating exporters have
        ``push`` durably (it is then offered to the others), ``landed(error)`` if not.

        With one gating exporter that can take it at once (landing), there is no task
        and no extra turn of the event loop between the push and its answer. A push
        refused at once is told so before ``submit`` returns.
        """
        submit = self._submit
        if submit is not None:
            stats = self._submit_stats
            started = time.perf_counter()

            def gated(error: BaseException | None) -> None:
                if stats is not None:
                    _counted(stats, started, error)
                if error is None:
                    self._offer(push)
                landed(error)

            try:
                taken = submit(push, gated)
            except ExportError as exc:
                taken = True
                gated(exc)
            if taken:
                if stats is not None:
                    stats.received += 1
                return
        task = asyncio.ensure_future(self.export(push))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._exported, landed))

    def _exported(self, landed: Landed, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        landed(asyncio.CancelledError() if task.cancelled() else task.exception())

    async def _gate(self, exporter: Exporter, push: AcceptedPush) -> None:
        # Told apart once, when the path was made: an isinstance check against a
        # runtime-checkable Protocol costs ~15 us, on the loop, for every push.
        stats = self._stats.get(exporter.name)
        if stats is None:  # counts for itself (``Counted``)
            await exporter.export(push)
            return
        stats.received += 1
        started = time.perf_counter()
        try:
            await exporter.export(push)
        except BaseException as exc:
            _counted(stats, started, exc)
            raise
        _counted(stats, started, None)

    def stats(self) -> list[ExporterStats]:
        """Every exporter's counters, queue depths filled in, in configuration order."""
        out: list[ExporterStats] = []
        for exporter in self.exporters:
            if isinstance(exporter, Counted):
                out.extend(exporter.exporter_stats())
            else:
                out.append(self._stats[exporter.name])
        return out


def _counted(stats: ExporterStats, started: float, error: BaseException | None) -> None:
    """Count one gated export that began at ``started`` (``time.perf_counter``)."""
    stats.timed(time.perf_counter() - started)
    if error is None:
        stats.exported += 1
    else:
        stats.failed += 1
