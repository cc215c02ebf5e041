"""The Prometheus exporter's state: the latest value of every client series.

Pushes are folded in one at a time (``apply``): gauges keep their latest value,
cumulative sums and histograms replace theirs, delta ones are added up into a
cumulative total (Prometheus cannot ingest deltas). A client instance's series
go when it expires (no push for max(``min_expiry_ms``, 3 × its push interval))
or sends its terminating push. ``max_series`` bounds the state; series beyond it
are refused and counted. Time is passed in (epoch ms).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.exporters.prometheus_names import label_name, metric_name
from clientmetrics.telemetry.otlp_arrow import decode_points

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]

GAUGE, COUNTER, HISTOGRAM = "gauge", "counter", "histogram"


class Series:
    """One series' value: a number, or a histogram's bounds, bucket counts, sum and count."""

    __slots__ = ("bounds", "buckets", "count", "labels", "last_time_us", "value")

    def __init__(self, labels: str) -> None:
        #: The exposition's ``{k="v",...}`` text, escaped once when the series is made.
        self.labels = labels
        self.value = 0.0
        self.last_time_us = 0
        self.bounds: tuple[float, ...] = ()
        self.buckets: list[int] = []
        self.count = 0


@dataclass(frozen=True, slots=True)
class PushView:
    """What the state needs of an accepted push."""

    instance_id: uuid.UUID
    #: The broker labels the exporter adds, KIP-714's names and text values.
    labels: tuple[tuple[str, str], ...]
    push_interval_ms: int
    terminating: bool
    payload: bytes


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

    def apply(self, pushes: Sequence[PushView], now_ms: int) -> None:
        """Fold a batch of accepted pushes into the state, in order.

        The payloads are decoded together into Arrow columns (``decode_points``),
        so the only Python loop is the one over data points that updates series.
        """
        live: list[tuple[_Instance, Labels]] = []
        payloads: list[bytes] = []
        ending: list[uuid.UUID] = []
        for push in pushes:
            if push.terminating:
                ending.append(push.instance_id)
                continue
            expiry = max(self.min_expiry_ms, 3 * push.push_interval_ms)
            instance = self._instances.get(push.instance_id)
            if instance is None:
                instance = self._instances[push.instance_id] = _Instance(now_ms, expiry)
            instance.last_ms, instance.expiry_ms = now_ms, expiry
            if push.payload:
                live.append((instance, tuple(sorted((label_name(k), v) for k, v in push.labels))))
                payloads.append(push.payload)
        if payloads:
            self._apply_points(live, decode_points(pa.array(payloads, pa.binary())).points)
        for instance_id in ending:  # a terminating push ends its instance's series
            self.forget(instance_id)

    def _apply_points(self, live: list[tuple[_Instance, Labels]], points: pa.RecordBatch) -> None:
        col = points.column
        rows = col("row").to_pylist()
        names = col("metric_name").to_pylist()
        units = col("metric_unit").to_pylist()
        kinds = col("kind").to_pylist()
        delta = pc.equal(col("temporality"), "delta").to_pylist()
        monotonic = col("monotonic").to_pylist()
        times = pc.cast(col("event_time"), pa.int64()).to_pylist()
        values = col("value").to_pylist()
        attributes = col("attributes").to_pylist()
        histograms = "histogram" in kinds
        counts = col("count").to_pylist() if histograms else None
        buckets = col("bucket_counts").to_pylist() if histograms else None
        bounds = col("explicit_bounds").to_pylist() if histograms else None
        for i, row in enumerate(rows):
            kind = kinds[i]
            if kind == "sum":
                family = COUNTER if monotonic[i] else GAUGE
            elif kind in ("gauge", "histogram"):
                family = kind
            else:  # summaries, exponential histograms: no Kafka client sends them
                continue
            instance, broker = live[row]
            name = metric_name(names[i], units[i] or "", family == GAUGE)
            series = self._series(instance, name, family, names[i], broker, attributes[i])
            if series is None:
                continue
            at = times[i] or 0
            if delta[i] and at and at <= series.last_time_us:
                continue  # the same delta again (a re-sent push): count it once
            if family == HISTOGRAM:
                assert counts is not None
                assert buckets is not None
                assert bounds is not None
                _histogram(
                    series,
                    tuple(bounds[i] or ()),
                    buckets[i] or [],
                    values[i] or 0.0,
                    counts[i] or 0,
                    delta[i],
                )
            elif delta[i]:
                series.value += values[i] or 0.0
            else:
                series.value = values[i] or 0.0
            series.last_time_us = at

    def _series(
        self,
        instance: _Instance,
        name: str,
        kind: str,
        help_text: str,
        broker: Labels,
        attributes: list[tuple[str, str | None]] | None,
    ) -> Series | None:
        if attributes:
            merged = dict(broker)
            for attr, value in attributes:  # a data-point attribute wins over a broker label
                merged[label_name(attr)] = value or ""
            labels = tuple(sorted(merged.items()))
        else:
            labels = broker
        key: SeriesKey = (name, labels)
        series = self.series.get(key)
        if series is not None:
            instance.keys.add(key)
            return series
        family = self.families.get(name)
        if (family is not None and family.kind != kind) or len(self.series) >= self.max_series:
            self.refused += 1
            return None
        if family is None:
            family = self.families[name] = Family(kind, help_text)
        family.series += 1
        series = self.series[key] = Series(label_text(labels))
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

    def snapshot(self) -> tuple[list[tuple[SeriesKey, Series]], dict[str, Family]]:
        """The series and families as they are now, for a scrape to format elsewhere."""
        return list(self.series.items()), dict(self.families)


def exposition(
    series: list[tuple[SeriesKey, Series]], families: dict[str, Family], *, openmetrics: bool
) -> bytes:
    """The Prometheus text format (0.0.4) or OpenMetrics 1.0 of a snapshot."""
    grouped: dict[str, list[Series]] = {}
    for (name, _), one in series:
        grouped.setdefault(name, []).append(one)
    out: list[str] = []
    for name in sorted(grouped):
        family = families.get(name)
        if family is None:
            continue
        kind = family.kind
        head = f"{name}_total" if kind == COUNTER and not openmetrics else name
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {head} {help_text}\n# TYPE {head} {kind}\n")
        if kind == HISTOGRAM:
            for one in grouped[name]:
                out.extend(_histogram_lines(name, one))
            continue
        sample = f"{name}_total" if kind == COUNTER else name
        out.extend(f"{sample}{one.labels} {_number(one.value)}\n" for one in grouped[name])
    if openmetrics:
        out.append("# EOF\n")
    return "".join(out).encode()


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _histogram_lines(name: str, series: Series) -> list[str]:
    def with_le(bound: str) -> str:
        le = f'le="{bound}"'
        return "{" + le + "}" if not series.labels else series.labels[:-1] + "," + le + "}"

    lines = []
    running = 0
    for bound, count in zip(series.bounds, series.buckets, strict=False):
        running += count
        lines.append(f"{name}_bucket{with_le(_number(bound))} {running}\n")
    lines.append(f"{name}_bucket{with_le('+Inf')} {series.count}\n")
    lines.append(f"{name}_sum{series.labels} {_number(series.value)}\n")
    lines.append(f"{name}_count{series.labels} {series.count}\n")
    return lines


def _histogram(
    series: Series,
    bounds: tuple[float, ...],
    counts: list[int],
    total: float,
    count: int,
    delta: bool,
) -> None:
    if len(counts) != len(bounds) + 1:
        return
    if delta and series.bounds == bounds and series.buckets:
        series.buckets = [a + b for a, b in zip(series.buckets, counts, strict=True)]
        series.value += total
        series.count += count
    else:  # cumulative, or the first point / new bounds: start from this one
        series.bounds, series.buckets = bounds, list(counts)
        series.value, series.count = total, count


def label_text(labels: Labels) -> str:
    """``{a="x",b="y"}`` with the exposition format's escapes ('' for no labels)."""
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
