"""The Prometheus exporter's state: the latest value of every client series.

Pushes are folded in one at a time (``apply``): gauges keep their latest value,
cumulative sums and histograms replace theirs, delta ones are added up into a
cumulative total (Prometheus cannot ingest deltas). A client instance's series
go when it expires (no push for max(``min_expiry_ms``, 3 × its push interval))
or sends its terminating push. ``max_series`` bounds the state; series beyond it
are refused and counted. Time is passed in (epoch ms).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.exporters.prometheus_names import label_name, metric_name
from clientmetrics.telemetry.otlp import DELTA, parse_metrics_data

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]

GAUGE, COUNTER, HISTOGRAM = "gauge", "counter", "histogram"


@dataclass(slots=True)
class Series:
    """One series' value: a number, or a histogram's bounds, bucket counts, sum and count."""

    value: float = 0.0
    bounds: tuple[float, ...] = ()
    buckets: list[int] = field(default_factory=list)
    count: int = 0
    last_time_ns: int = 0


@dataclass(slots=True)
class Family:
    """A metric family: its type, help text and how many series it has."""

    kind: str
    help: str
    series: int = 0


@dataclass(slots=True)
class _Instance:
    last_ms: int
    expiry_ms: int
    keys: set[SeriesKey] = field(default_factory=set)


class SeriesStore:
    """Client series by (Prometheus name, labels), owned by their client instance."""

    def __init__(self, max_series: int, min_expiry_ms: int) -> None:
        self.max_series = max_series
        self.min_expiry_ms = min_expiry_ms
        self.series: dict[SeriesKey, Series] = {}
        self.families: dict[str, Family] = {}
        self.refused = 0
        self._instances: dict[uuid.UUID, _Instance] = {}

    def __len__(self) -> int:
        return len(self.series)

    def apply(
        self,
        instance_id: uuid.UUID,
        payload: bytes,
        labels: Sequence[tuple[str, str]],
        *,
        push_interval_ms: int,
        terminating: bool,
        now_ms: int,
    ) -> None:
        """Fold one accepted push into the state (its terminating push removes it)."""
        if terminating:
            self.forget(instance_id)
            return
        expiry = max(self.min_expiry_ms, 3 * push_interval_ms)
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self._instances[instance_id] = _Instance(now_ms, expiry)
        instance.last_ms, instance.expiry_ms = now_ms, expiry
        if not payload:
            return
        broker = tuple((label_name(k), v) for k, v in labels)
        for resource_metrics in parse_metrics_data(payload).resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    self._apply_metric(instance, metric, broker)

    def _apply_metric(self, instance: _Instance, metric: Any, broker: Labels) -> None:
        kind = metric.WhichOneof("data")
        if kind == "gauge":
            self._numbers(instance, metric, metric.gauge.data_points, GAUGE, False, broker)
        elif kind == "sum":
            data = metric.sum
            family = COUNTER if data.is_monotonic else GAUGE
            delta = data.aggregation_temporality == DELTA
            self._numbers(instance, metric, data.data_points, family, delta, broker)
        elif kind == "histogram":
            data = metric.histogram
            delta = data.aggregation_temporality == DELTA
            name = metric_name(metric.name, metric.unit, gauge=False)
            for point in data.data_points:
                series = self._series(instance, name, HISTOGRAM, metric, point, broker)
                if series is not None:
                    _histogram(series, point, delta)
        # Summaries and exponential histograms are not sent by Kafka clients; skipped.

    def _numbers(
        self, instance: _Instance, metric: Any, points: Any, kind: str, delta: bool, broker: Labels
    ) -> None:
        name = metric_name(metric.name, metric.unit, gauge=kind == GAUGE)
        for point in points:
            series = self._series(instance, name, kind, metric, point, broker)
            if series is None:
                continue
            value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
            if delta:
                if point.time_unix_nano and point.time_unix_nano <= series.last_time_ns:
                    continue  # the same delta again (a re-sent push): count it once
                series.value += value
            else:
                series.value = float(value)
            series.last_time_ns = point.time_unix_nano

    def _series(
        self, instance: _Instance, name: str, kind: str, metric: Any, point: Any, broker: Labels
    ) -> Series | None:
        attrs = {label_name(kv.key): _text(kv.value) for kv in point.attributes}
        # A data-point attribute wins over a broker label of the same name.
        labels = tuple(sorted({**dict(broker), **attrs}.items()))
        key = (name, labels)
        series = self.series.get(key)
        if series is not None:
            instance.keys.add(key)
            return series
        family = self.families.get(name)
        if (family is not None and family.kind != kind) or len(self.series) >= self.max_series:
            self.refused += 1
            return None
        if family is None:
            family = self.families[name] = Family(kind, metric.description or metric.name)
        family.series += 1
        series = self.series[key] = Series()
        instance.keys.add(key)
        return series

    def forget(self, instance_id: uuid.UUID) -> None:
        """Drop an instance and every series it owns."""
        instance = self._instances.pop(instance_id, None)
        if instance is None:
            return
        for key in instance.keys:
            if self.series.pop(key, None) is not None:
                family = self.families[key[0]]
                family.series -= 1
                if family.series == 0:
                    del self.families[key[0]]

    def expire(self, now_ms: int) -> int:
        """Forget instances silent for longer than their expiry; how many went."""
        gone = [i for i, inst in self._instances.items() if now_ms - inst.last_ms > inst.expiry_ms]
        for instance_id in gone:
            self.forget(instance_id)
        return len(gone)

    def by_family(self) -> Iterator[tuple[str, Family, list[tuple[Labels, Series]]]]:
        """Every family with its series, sorted by name (what a scrape shows)."""
        grouped: dict[str, list[tuple[Labels, Series]]] = {}
        for (name, labels), series in self.series.items():
            grouped.setdefault(name, []).append((labels, series))
        for name in sorted(grouped):
            yield name, self.families[name], grouped[name]


def _histogram(series: Series, point: Any, delta: bool) -> None:
    bounds = tuple(point.explicit_bounds)
    counts = list(point.bucket_counts)
    if len(counts) != len(bounds) + 1:
        return
    if delta and series.bounds == bounds and series.buckets:
        if point.time_unix_nano and point.time_unix_nano <= series.last_time_ns:
            return
        series.buckets = [a + b for a, b in zip(series.buckets, counts, strict=True)]
        series.value += point.sum
        series.count += point.count
    else:  # cumulative, or the first point / new bounds: start from this one
        series.bounds, series.buckets = bounds, counts
        series.value, series.count = point.sum, point.count
    series.last_time_ns = point.time_unix_nano


def _text(value: Any) -> str:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    inner = getattr(value, which)
    if which == "bool_value":
        return "true" if inner else "false"
    return str(inner)
