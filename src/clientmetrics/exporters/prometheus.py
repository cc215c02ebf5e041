"""The Prometheus exporter: client metrics on a scrape endpoint of their own.

``[exporters.prometheus] listen = "127.0.0.1:9465"`` serves ``/metrics`` with the
latest value of every client series (``prometheus_state``), in the text format or
OpenMetrics when the scraper asks for it. It is a queued, fail-open exporter:
folding pushes into the state happens on its own worker, never in a push's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from clientmetrics.addresses import parse_host_port
from clientmetrics.errors import ConfigurationError, ListenError
from clientmetrics.exporters.base import Exporter
from clientmetrics.exporters.prometheus_state import PushView, SeriesStore, exposition
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter, QueueOptions
from clientmetrics.http_endpoint import NOT_FOUND, HttpRequest, HttpResponse, handle_http
from clientmetrics.telemetry.model import AcceptedPush

log = structlog.get_logger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9465"
TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
_OPTIONS = ("listen", "max_series", "min_expiry_s")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PrometheusSink:
    """Folds pushes into a ``SeriesStore`` and serves it over HTTP."""

    max_batch = 256
    max_delay_s = 0.0

    def __init__(
        self,
        listen: tuple[str, int],
        labels: Sequence[str],
        *,
        max_series: int = 200_000,
        min_expiry_s: float = 60.0,
    ) -> None:
        self.listen = listen
        self.labels = tuple(labels)
        self.store = SeriesStore(max_series, int(min_expiry_s * 1000))
        self.port: int | None = None
        self._server: asyncio.Server | None = None
        self._stats: ExporterStats | None = None
        self._expired_at = 0

    async def start(self, stats: ExporterStats) -> None:
        self._stats = stats
        host, port = self.listen
        try:
            self._server = await asyncio.start_server(self._handle, host, port)
        except OSError as exc:
            raise ListenError(f"prometheus exporter cannot listen on {host}:{port}: {exc}") from exc
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("prometheus_exporter_listening", listen=f"{host}:{self.port}")

    async def send(self, pushes: Sequence[AcceptedPush]) -> int:
        views = [
            PushView(
                push.client_instance_id,
                tuple((k, str(v)) for k, v in push.label_values(self.labels)),
                push.push_interval_ms,
                push.terminating,
                push.payload,
            )
            for push in pushes
        ]
        now = _now_ms()
        self.store.apply(views, now)
        if now - self._expired_at >= 1000:  # bounded without a scraper too
            self._expired_at = now
            self.store.expire(now)
        if self._stats is not None:
            self._stats.extra["series_refused"] = self.store.refused
        return len(pushes)

    async def render(self, accept: str) -> tuple[bytes, str]:
        """The scrape body and its content type for an ``Accept`` header.

        Expiry and the snapshot happen on the event loop; formatting, the long part
        with many series, on a worker thread, so pushes keep being answered.
        """
        self.store.expire(_now_ms())
        series, families = self.store.snapshot()
        openmetrics = "application/openmetrics-text" in accept
        body = await asyncio.to_thread(exposition, series, families, openmetrics=openmetrics)
        return body, OPENMETRICS if openmetrics else TEXT

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handle_http(reader, writer, self._answer)

    async def _answer(self, request: HttpRequest) -> HttpResponse:
        if request.path != "/metrics":
            return NOT_FOUND
        body, ctype = await self.render(request.headers.get("accept", ""))
        return HttpResponse("200 OK", body, ctype)

    async def flush(self, timeout_s: float) -> None:
        pass

    async def close(self, timeout_s: float) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), timeout_s)


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory: ``listen``, ``max_series``, ``min_expiry_s`` + the queue's options."""
    queue, rest = QueueOptions.take("prometheus", options)
    unknown = set(rest) - set(_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown prometheus exporter options: {', '.join(sorted(unknown))}"
        )
    max_series = rest.get("max_series", 200_000)
    min_expiry_s = rest.get("min_expiry_s", 60.0)
    if isinstance(max_series, bool) or not isinstance(max_series, int) or max_series < 1:
        raise ConfigurationError("prometheus.max_series must be a positive integer")
    if (
        isinstance(min_expiry_s, bool)
        or not isinstance(min_expiry_s, int | float)
        or min_expiry_s <= 0
    ):
        raise ConfigurationError("prometheus.min_expiry_s must be a positive number")
    sink = PrometheusSink(
        parse_host_port(rest.get("listen", DEFAULT_LISTEN), "prometheus.listen"),
        queue.labels,
        max_series=max_series,
        min_expiry_s=float(min_expiry_s),
    )
    return QueuedExporter("prometheus", sink, queue)
