"""The admin port: the gateway's metrics (Prometheus text) and health endpoints.

``/healthz`` answers 200 while the process serves at all (liveness: restart it
if this fails). ``/readyz`` answers 200 only when a push can be accepted and
landed now, else 503 with the reason (readiness: take it out of rotation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence

import structlog
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from clientmetrics.exporters.queued import ExporterStats
from clientmetrics.http_endpoint import NOT_FOUND, HttpRequest, HttpResponse, handle_http

log = structlog.get_logger("clientmetrics.gateway")

#: name -> (kind, help); kind "counter" or "gauge". Names follow KIP-714's broker
#: metrics (group client-metrics), the Prometheus way: base units (seconds, bytes),
#: and counters exposed with ``_total`` (``kafka_server_client_metrics_push_total``).
METRICS: dict[str, tuple[str, str]] = {
    "instance_count": ("gauge", "Client instances currently tracked"),
    "unknown_subscription_request": ("counter", "Pushes with an unknown subscription id"),
    "throttle": ("counter", "Get and Push requests throttled"),
    "plugin_export": ("counter", "Pushes handed to the exporters successfully"),
    "plugin_export_time_seconds": ("counter", "Total time spent exporting"),
    "plugin_export_time_max_seconds": ("gauge", "Longest export so far"),
    "plugin_error": ("counter", "Pushes the exporters failed to land"),
    "push": ("counter", "PushTelemetry requests answered"),
    "get_subscriptions": ("counter", "GetTelemetrySubscriptions requests answered"),
    "connections": ("gauge", "Open client connections"),
    "connections_closed": ("counter", "Client connections closed, by either side"),
    "connection_records_written": ("counter", "Connection records landed"),
    "connection_records_dropped": (
        "counter",
        "Connections not recorded: their client key was new to a full table",
    ),
    "connection_records_write_failures": ("counter", "Intervals of connection records lost"),
    "connection_records_produced": ("counter", "Connection records the topic's cluster took"),
    "connection_records_produce_failures": (
        "counter",
        "Connection records not produced to the topic (not taken within the flush's bound)",
    ),
    "connection_records_keys": ("gauge", "Client keys in this interval's connection table"),
    "connections_throttled": (
        "counter",
        "Connections held unread, then closed, over connection_creation_rate_per_ip",
    ),
    "request_budget_used_bytes": (
        "gauge",
        "Bytes reserved for large requests still arriving (queued_max_request_bytes)",
    ),
    "accepted_pushes": ("counter", "Pushes accepted (answered NONE), empty ones included"),
    "empty_pushes": ("counter", "Accepted pushes with no metrics"),
    "instances_expired": ("counter", "Client instances removed by expiry"),
    "instances_evicted": ("counter", "Client instances dropped because the registry was full"),
    "ready": ("gauge", "1 when /readyz answers 200: pushes can be accepted and landed now"),
    "landing_pushes_durable": ("counter", "Pushes fsynced in the landing WAL (acknowledged)"),
    "landing_rows_landed": ("counter", "Rows written to landed Parquet files (visible)"),
    "landing_files": ("counter", "Parquet files landed"),
    "landing_wal_failures": ("counter", "Landing WAL writes that failed (pushes answered 89)"),
    "landing_convert_failures": ("counter", "Segment conversions that failed (retried)"),
    "landing_segments_waiting": ("gauge", "Sealed WAL segments waiting for conversion"),
    "landing_ready": ("gauge", "1 while landing WAL writes succeed"),
    "landing_converting_ok": ("gauge", "0 while segment conversions fail"),
    "event_loop_lag_max_seconds": (
        "gauge",
        "Longest delay of the event loop (a timer firing late) in the last 60 s, seconds",
    ),
    "event_loop_lag_p99_seconds": (
        "gauge",
        "99th percentile of the event loop's delay over the last 60 s, seconds",
    ),
    "event_loop_busy_max_seconds": (
        "gauge",
        "Most CPU time the event loop's thread used between two 10 ms samples, last 60 s",
    ),
    "event_loop_stalls": (
        "counter",
        "Event-loop delays of loop_stall_log_ms or more (logged as loop_stalled)",
    ),
    "gc_pause_seconds": ("counter", "Time spent in garbage collections, seconds"),
    "subscription_records_refused": (
        "counter",
        "Subscription store records refused (changing nothing), by reason",
    ),
    "subscription_records_signed": (
        "gauge",
        "1 when the topic store's records are signed and verified (subscriptions_key_file)",
    ),
    "store_topic_refused": (
        "counter",
        "Client requests naming the subscription store's topic, refused (proxy mode)",
    ),
    "subscription_follower_up": ("gauge", "1 while the topic store's follower thread runs"),
    "subscription_follower_restarts": (
        "counter",
        "Times the topic store's follower died and was started again",
    ),
}
#: Values of a labelled metric are keyed ``name:label value`` (one label, ``reason``).
LABELLED = {"subscription_records_refused": "reason"}


PREFIX = "kafka_server_client_metrics_"


def exposed_name(name: str) -> str:
    """The name a ``METRICS`` entry has on ``/metrics``."""
    return f"{PREFIX}{name}_total" if METRICS[name][0] == "counter" else f"{PREFIX}{name}"


class _GatewayCollector(Collector):
    def __init__(self, read: Callable[[], Mapping[str, float]]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        values = self._read()
        for name, (kind, text) in METRICS.items():
            full = f"{PREFIX}{name}"
            family: Metric
            if name in LABELLED:
                labelled = {k.split(":", 1)[1]: v for k, v in values.items()
                            if k.startswith(f"{name}:")}  # fmt: skip
                if labelled:
                    family = CounterMetricFamily(full, text, labels=[LABELLED[name]])
                    for label, value in sorted(labelled.items()):
                        family.add_metric([label], value)
                    yield family
                continue
            if name not in values:
                continue
            if kind == "counter":
                family = CounterMetricFamily(full, text, value=values[name])
            else:
                family = GaugeMetricFamily(full, text, value=values[name])
            yield family


#: Per-exporter counters: ``clientmetrics_exporter_<name>{exporter="..."}``.
EXPORTER_COUNTERS = {
    "received": "Accepted pushes handed to the exporter",
    "exported": "Pushes the exporter delivered",
    "dropped": "Pushes dropped because the exporter's queue was full",
    "failed": "Pushes the exporter gave up on",
}


class _ExporterCollector(Collector):
    def __init__(self, read: Callable[[], Sequence[ExporterStats]]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        stats = self._read()
        if not stats:
            return
        for name, text in EXPORTER_COUNTERS.items():
            counter = CounterMetricFamily(
                f"clientmetrics_exporter_{name}", text, labels=["exporter"]
            )
            for s in stats:
                counter.add_metric([s.name], getattr(s, name))
            yield counter
        depth = GaugeMetricFamily(
            "clientmetrics_exporter_queue_depth", "Pushes waiting in the queue", labels=["exporter"]
        )
        latency = SummaryMetricFamily(
            "clientmetrics_exporter_export_seconds",
            "Time per export (per batch for queued exporters)",
            labels=["exporter"],
        )
        latency_max = GaugeMetricFamily(
            "clientmetrics_exporter_export_seconds_max", "Longest export", labels=["exporter"]
        )
        for s in stats:
            depth.add_metric([s.name], s.queue_depth)
            latency.add_metric([s.name], s.export_seconds_count, s.export_seconds_sum)
            latency_max.add_metric([s.name], s.export_seconds_max)
        yield from (depth, latency, latency_max)
        extra = sorted({key for s in stats for key in s.extra})
        for key in extra:
            family = CounterMetricFamily(
                f"clientmetrics_exporter_{key}", key.replace("_", " "), labels=["exporter"]
            )
            for s in stats:
                if key in s.extra:
                    family.add_metric([s.name], s.extra[key])
            yield family


class MetricsServer:
    """A tiny HTTP server: ``/metrics``, ``/healthz``, ``/readyz``; everything else is 404.

    ``not_ready`` returns None when the gateway is ready, else the reason.
    """

    def __init__(
        self,
        read: Callable[[], Mapping[str, float]],
        exporters: Callable[[], Sequence[ExporterStats]] | None = None,
        not_ready: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_GatewayCollector(read))
        if exporters is not None:
            self._registry.register(_ExporterCollector(exporters))
        self._not_ready = not_ready
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._handle, host, port)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handle_http(reader, writer, self._answer, timeout_s=5)

    async def _answer(self, request: HttpRequest) -> HttpResponse:
        if request.path == "/metrics":
            body = generate_latest(self._registry)
            return HttpResponse("200 OK", body, "text/plain; version=0.0.4; charset=utf-8")
        if request.path == "/healthz":
            return HttpResponse("200 OK", b"ok\n")
        if request.path == "/readyz":
            reason = self._not_ready()
            if reason is None:
                return HttpResponse("200 OK", b"ready\n")
            return HttpResponse("503 Service Unavailable", reason.encode() + b"\n")
        return NOT_FOUND

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
