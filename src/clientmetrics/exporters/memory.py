"""The in-memory exporter: the test double for everything that exports."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.base import Exporter, ExportError
from clientmetrics.telemetry.model import AcceptedPush


class InMemoryExporter:
    """Keeps every exported push in ``pushes``; can be told to fail."""

    name = "memory"

    def __init__(self) -> None:
        self.pushes: list[AcceptedPush] = []
        self.started = False
        self.closed = False
        self.flushes = 0
        self._failure: ExportError | None = None

    def fail_with(self, error: ExportError | None) -> None:
        """Make every later ``export`` raise ``error`` (None: succeed again)."""
        self._failure = error

    async def start(self) -> None:
        """Mark the exporter started."""
        self.started = True

    async def export(self, push: AcceptedPush) -> None:
        """Record ``push``, or raise the configured failure."""
        if not self.started or self.closed:
            raise ExportError("the memory exporter is not running")
        if self._failure is not None:
            raise self._failure
        self.pushes.append(push)

    async def flush(self, timeout_s: float) -> None:
        """Nothing to make durable; counts calls for tests."""
        self.flushes += 1

    async def close(self, timeout_s: float) -> None:
        """Mark the exporter closed; the recorded pushes stay readable."""
        self.closed = True


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory. Option ``fail`` (a message) makes every export fail."""
    unknown = set(options) - {"fail"}
    if unknown:
        raise ConfigurationError(f"unknown memory exporter options: {', '.join(sorted(unknown))}")
    exporter = InMemoryExporter()
    failure = options.get("fail")
    if failure:
        exporter.fail_with(ExportError(str(failure)))
    return exporter
