"""Per-client time series for the charts: the points table, topped up from the landing zone.

The pipeline lags the gateway by a trigger or two; pushes landed after the
newest point the pipeline wrote for a client are decoded here (with the same
pure decoder the pipeline uses), so a chart reaches the last few seconds.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.dashboard.svg import Line
from clientmetrics.dashboard.tables import TableReader
from clientmetrics.telemetry.otlp_arrow import decode_points

POINT_COLUMNS = (
    "client_instance_id",
    "received_at",
    "metric_name",
    "metric_unit",
    "kind",
    "series",
    "event_time",
    "value",
    "rate_per_second",
)
LANDING_COLUMNS = ("received_at", "client_instance_id", "payload")
_UTC_US = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class Chart:
    """One metric of one client: a line per series (e.g. per ``node.id``)."""

    metric_name: str
    unit: str
    #: True when the lines are per-second rates of a cumulative sum.
    is_rate: bool
    lines: tuple[Line, ...]


@dataclass(frozen=True, slots=True)
class _Sample:
    metric: str
    unit: str
    kind: str
    label: str
    time_s: float
    value: float | None
    cumulative: bool


def _label(series: str, metric: str) -> str:
    # The pipeline's series key is "instance|metric|k=v,k=v"; the attributes tell lines apart.
    attributes = series.rsplit("|", 1)[-1] if series.count("|") >= 2 else ""
    return attributes or metric.rsplit(".", 1)[-1]


def _from_points(table: pa.Table) -> list[_Sample]:
    samples = []
    for row in table.to_pylist():
        is_sum = row["kind"] == "sum"
        value = row["rate_per_second"] if is_sum else row["value"]
        samples.append(
            _Sample(
                metric=row["metric_name"] or "",
                unit=row.get("metric_unit") or "",
                kind=row["kind"] or "",
                label=_label(row["series"] or "", row["metric_name"] or ""),
                time_s=row["event_time"].timestamp(),
                value=value,
                cumulative=False,
            )
        )
    return samples


def _from_payloads(payloads: pa.Table) -> list[_Sample]:
    decoded = decode_points(payloads.column("payload")).points
    samples = []
    for row in decoded.select(
        ["metric_name", "metric_unit", "kind", "temporality", "event_time", "value", "attributes"]
    ).to_pylist():
        attributes = ",".join(f"{k}={v or ''}" for k, v in sorted(row["attributes"] or []))
        samples.append(
            _Sample(
                metric=row["metric_name"] or "",
                unit=row["metric_unit"] or "",
                kind=row["kind"] or "",
                label=attributes or (row["metric_name"] or "").rsplit(".", 1)[-1],
                time_s=row["event_time"].timestamp(),
                value=row["value"],
                cumulative=row["kind"] == "sum" and row["temporality"] == "cumulative",
            )
        )
    return _cumulative_to_rates(samples)


def _cumulative_to_rates(samples: list[_Sample]) -> list[_Sample]:
    """Sums become per-second rates between consecutive points, as the pipeline's are."""
    out: list[_Sample] = []
    last: dict[tuple[str, str], _Sample] = {}
    for sample in sorted(samples, key=lambda s: s.time_s):
        if sample.kind != "sum":
            out.append(sample)
            continue
        key = (sample.metric, sample.label)
        before = last.get(key)
        last[key] = sample
        if sample.value is None or before is None or before.value is None:
            continue
        elapsed = sample.time_s - before.time_s
        amount = sample.value - before.value if sample.cumulative else sample.value
        if elapsed > 0 and amount >= 0:
            out.append(_replace_value(sample, amount / elapsed))
    return out


def _replace_value(sample: _Sample, value: float) -> _Sample:
    return _Sample(
        sample.metric,
        sample.unit,
        sample.kind,
        sample.label,
        sample.time_s,
        value,
        sample.cumulative,
    )


def build_charts(samples: Iterable[_Sample]) -> list[Chart]:
    """Group samples into one chart per metric and one line per series, in time order."""
    grouped: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    meta: dict[str, tuple[str, bool]] = {}
    for sample in samples:
        if sample.value is None or not math.isfinite(sample.value):
            continue
        grouped[sample.metric][sample.label].append((sample.time_s, sample.value))
        meta[sample.metric] = (sample.unit, sample.kind == "sum")
    charts = []
    for metric in sorted(grouped, key=_chart_order):
        lines = tuple(
            Line(label, tuple(sorted(points))) for label, points in sorted(grouped[metric].items())
        )
        unit, is_rate = meta[metric]
        charts.append(Chart(metric, unit, is_rate, lines))
    return charts


#: Charts an operator looks at first come first: latencies, then queue times, then the rest.
_FIRST = ("latency", "queue", "throttle")


def _chart_order(metric: str) -> tuple[int, str]:
    rank = next((i for i, word in enumerate(_FIRST) if word in metric), len(_FIRST))
    return rank, metric


class SeriesReader:
    """Reads one client's samples from the points table and the newest landed pushes."""

    def __init__(
        self,
        tables: TableReader,
        landing: TableReader | None,
        clock: Callable[[], float] = time.time,
        landing_recent_s: float = 900.0,
    ) -> None:
        self._tables = tables
        self._landing = landing
        self._clock = clock
        self._recent_s = landing_recent_s

    def charts(self, client_instance_id: str, since: datetime | None) -> list[Chart]:
        """Charts of every metric the client pushed since ``since`` (all time when None)."""
        samples: list[_Sample] = []
        newest: Any = None
        points = self._tables.read("points", POINT_COLUMNS)
        if points is not None:
            mine = points.filter(pc.equal(points.column("client_instance_id"), client_instance_id))
            newest = pc.max(mine.column("received_at")).as_py() if mine.num_rows else None
            if since is not None:
                mine = mine.filter(pc.greater_equal(mine.column("event_time"), _ts(since)))
            samples += _from_points(mine)
        samples += self._landed_after(client_instance_id, newest, since)
        return build_charts(samples)

    def _landed_after(
        self, client_instance_id: str, newest: datetime | None, since: datetime | None
    ) -> list[_Sample]:
        if self._landing is None:
            return []
        landed = self._landing.read_recent(LANDING_COLUMNS, self._clock() - self._recent_s)
        if landed is None:
            return []
        mask = pc.equal(landed.column("client_instance_id"), client_instance_id)
        for bound in (newest, since):
            if bound is not None:
                mask = pc.and_(mask, pc.greater(landed.column("received_at"), _ts(bound)))
        mine = landed.filter(mask)
        return _from_payloads(mine) if mine.num_rows else []


def _ts(moment: datetime) -> pa.Scalar:
    return pa.scalar(moment.astimezone(UTC), _UTC_US)


def landing_reader(data_dir: Path) -> TableReader:
    """A reader over ``DATA/landing/pushes`` (``date=``/``hour=`` partitions)."""
    return TableReader(data_dir / "landing" / "pushes", pattern="date=*/hour=*/*.parquet")
