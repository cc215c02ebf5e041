"""The export path: which exporters gate a push's answer and which are only offered it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from clientmetrics.exporters.base import Exporter
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter
from clientmetrics.telemetry.model import AcceptedPush


class ExportPath:
    """Hands each accepted push to every exporter.

    Gating exporters (landing, any plugin that is not a ``QueuedExporter``, and
    queued ones marked ``required``) are awaited: the push is answered once all of
    them have it durably. The others are offered the push only after that, without
    waiting, so they can neither delay nor fail the answer.
    """

    def __init__(self, exporters: Sequence[Exporter]) -> None:
        names = [e.name for e in exporters]
        if len(set(names)) != len(names):
            raise ValueError(f"two exporters share a name: {names}")
        self.exporters = tuple(exporters)
        self._offered = tuple(
            e for e in exporters if isinstance(e, QueuedExporter) and not e.required
        )
        self._gating = tuple(e for e in exporters if e not in self._offered)
        self._stats = {
            e.name: e.stats if isinstance(e, QueuedExporter) else ExporterStats(e.name)
            for e in exporters
        }

    async def export(self, push: AcceptedPush) -> None:
        """Land ``push`` in the gating exporters (raises ``ExportError``), then offer it."""
        if len(self._gating) == 1:
            await self._gate(self._gating[0], push)
        elif self._gating:
            await asyncio.gather(*(self._gate(e, push) for e in self._gating))
        for exporter in self._offered:
            exporter.offer(push)

    async def _gate(self, exporter: Exporter, push: AcceptedPush) -> None:
        if isinstance(exporter, QueuedExporter):  # counts for itself
            await exporter.export(push)
            return
        stats = self._stats[exporter.name]
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
        out = []
        for exporter in self.exporters:
            stats = self._stats[exporter.name]
            if isinstance(exporter, QueuedExporter):
                stats.queue_depth = exporter.queue_depth
            out.append(stats)
        return out
