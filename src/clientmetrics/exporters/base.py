"""The exporter interface: where accepted pushes go.

An exporter is an asyncio object with four methods. ``export`` returns only when
the push is durable by that exporter's standard (the landing exporter: fsynced,
possibly in a group commit shared with other pushes), or raises ``ExportError``.
Exporters are found through the ``clientmetrics.exporters`` entry-point group;
each entry point names a factory ``(options: Mapping[str, object], data_dir: Path)
-> Exporter``.

An exporter returned as is gates every push's answer, like landing. To be
fail-open instead (never delay or fail an answer; drop and count when behind),
a plugin implements a ``queued.Sink`` and returns it wrapped in a
``queued.QueuedExporter``: the gateway then runs it in its exporter process
(``child``) behind a bounded queue, unless its table says ``required = true``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from clientmetrics.errors import ClientMetricsError
from clientmetrics.telemetry.model import AcceptedPush


class ExportError(ClientMetricsError):
    """An exporter could not land a push."""


#: Told a push's outcome: None once it is durable, else why it was not landed.
Landed = Callable[[BaseException | None], None]


@runtime_checkable
class Exporter(Protocol):
    """A destination for accepted pushes."""

    name: str

    async def start(self) -> None:
        """Open files, connections and background tasks. Called once before export."""

    async def export(self, push: AcceptedPush) -> None:
        """Land ``push``; return once it is durable, or raise ``ExportError``."""

    async def flush(self, timeout_s: float) -> None:
        """Make everything exported so far durable and visible to readers."""

    async def close(self, timeout_s: float) -> None:
        """Flush, then release every resource. Export is not called afterwards."""


@runtime_checkable
class HealthReporting(Protocol):
    """An exporter that can tell whether pushes land now, and count what it did.

    Optional beside ``Exporter``: the gateway's ``/readyz`` and ``/metrics`` use it
    where an exporter has it.
    """

    def health(self) -> str | None:
        """None when a push can land now; otherwise a one-line reason."""

    def counters(self) -> Mapping[str, float]:
        """Counters and gauges by metric name (``kafka_server_client_metrics_`` + name)."""
