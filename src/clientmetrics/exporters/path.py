"""The export path: which exporters gate a push's answer and which are only offered it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from clientmetrics.exporters.base import Exporter
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
        for exporter in self._offered:
            exporter.offer(push)

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
        except BaseException:
            stats.failed += 1
            raise
        finally:
            stats.timed(time.perf_counter() - started)
        stats.exported += 1

    def stats(self) -> list[ExporterStats]:
        """Every exporter's counters, queue depths filled in, in configuration order."""
        out: list[ExporterStats] = []
        for exporter in self.exporters:
            if isinstance(exporter, Counted):
                out.extend(exporter.exporter_stats())
            else:
                out.append(self._stats[exporter.name])
        return out
