"""Read-only views of the subscriptions in force and of the gateway's own counters."""

from __future__ import annotations

import shlex
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from clientmetrics.errors import ClientMetricsError

_GATEWAY_PREFIX = "kafka_server_client_metrics_"
_EXPORTER_PREFIX = "clientmetrics_exporter_"
#: Counters shown as per-second rates between two page loads.
RATE_COUNTERS = (
    "push_total",
    "accepted_pushes_total",
    "throttle_total",
    "unknown_subscription_request_total",
)


@dataclass(frozen=True, slots=True)
class SubscriptionView:
    """One CLIENT_METRICS resource as the admin tool shows it."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: str | None
    match: tuple[str, ...]

    def alter_command(self, bootstrap: str) -> str:
        """The ``kafka-client-metrics`` command that sets this subscription as it is."""
        args = ["kafka-client-metrics", "--bootstrap-server", bootstrap, "--alter"]
        args += ["--name", self.name, "--metrics", ",".join(self.metrics)]
        if self.interval_ms is not None:
            args += ["--interval", self.interval_ms]
        if self.match:
            args += ["--match", ",".join(self.match)]
        return shlex.join(args)

    def delete_command(self, bootstrap: str) -> str:
        """The command that removes it."""
        args = ["kafka-client-metrics", "--bootstrap-server", bootstrap, "--delete"]
        return shlex.join([*args, "--name", self.name])


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def subscription_view(name: str, configs: Mapping[str, str | None]) -> SubscriptionView:
    """A view of one resource's config map."""
    return SubscriptionView(
        name=name,
        metrics=_split(configs.get("metrics")),
        interval_ms=configs.get("interval.ms"),
        match=_split(configs.get("match")),
    )


def subscriptions_from_sqlite(path: Path) -> list[SubscriptionView]:
    """The subscriptions in the gateway's SQLite store, opened read-only.

    Raises ``ClientMetricsError`` when the file cannot be read.
    """
    if not path.exists():
        return []
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            rows = conn.execute(
                "SELECT name, key, value FROM client_metrics_configs ORDER BY name, key"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ClientMetricsError(f"cannot read subscriptions from {path}: {exc}") from exc
    resources: dict[str, dict[str, str | None]] = {}
    for name, key, value in rows:
        resources.setdefault(name, {})[key] = value
    return [subscription_view(name, configs) for name, configs in sorted(resources.items())]


def subscriptions_from_admin(bootstrap: str) -> list[SubscriptionView]:
    """The subscriptions a broker or gateway reports through the admin API."""
    from clientmetrics.admin import describe_all

    resources = describe_all(bootstrap)
    return [subscription_view(r.name, r.as_dict()) for r in sorted(resources, key=lambda r: r.name)]


@dataclass(frozen=True, slots=True)
class GatewaySample:
    """The gateway's counters at one moment, with rates since the previous sample."""

    values: dict[str, float] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    #: Per exporter: its ``clientmetrics_exporter_*`` counters by short name.
    exporters: dict[str, dict[str, float]] = field(default_factory=dict)


def parse_gateway_metrics(text: str) -> dict[str, float]:
    """``kafka_server_client_metrics_*`` values from Prometheus text, by their name on
    ``/metrics`` without the prefix (counters keep their ``_total``)."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if not name.startswith(_GATEWAY_PREFIX) or name.endswith("_created"):
                continue
            values[name.removeprefix(_GATEWAY_PREFIX)] = float(sample.value)
    return values


def parse_exporter_metrics(text: str) -> dict[str, dict[str, float]]:
    """``clientmetrics_exporter_*{exporter=...}`` values from Prometheus text, per exporter."""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exporter = sample.labels.get("exporter")
            if not sample.name.startswith(_EXPORTER_PREFIX) or exporter is None:
                continue
            short = sample.name.removeprefix(_EXPORTER_PREFIX).removesuffix("_total")
            out.setdefault(exporter, {})[short] = float(sample.value)
    return out


class GatewayMetrics:
    """Scrapes a gateway's ``/metrics`` URL; rates come from consecutive scrapes."""

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._url = url
        self._clock = clock
        self._previous: tuple[float, dict[str, float]] | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """Where the counters are read."""
        return self._url

    def sample(self) -> GatewaySample:
        """Scrape now; the error is reported in the sample, never raised.

        The very first call scrapes twice, half a second apart, so that even the
        first page load shows rates.
        """
        if self._previous is None:
            first = self._scrape()
            if first.error is not None:
                return first
            time.sleep(0.5)
        return self._scrape()

    def _scrape(self) -> GatewaySample:
        try:
            with urllib.request.urlopen(self._url, timeout=3.0) as response:
                text = response.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return GatewaySample(error=f"cannot read {self._url}: {exc}")
        values = parse_gateway_metrics(text)
        now = self._clock()
        rates: dict[str, float] = {}
        with self._lock:
            if self._previous is not None and now > self._previous[0]:
                elapsed = now - self._previous[0]
                for name in RATE_COUNTERS:
                    if name in values and name in self._previous[1]:
                        rates[name] = max(0.0, values[name] - self._previous[1][name]) / elapsed
            self._previous = (now, values)
        return GatewaySample(values=values, rates=rates, exporters=parse_exporter_metrics(text))
