"""Per-client time series for the charts: the points table, topped up from the landing zone.

The pipeline lags the gateway by a trigger or two; pushes landed after the
newest point the pipeline wrote for a client are decoded and normalised here
with the pipeline's own core (``pipeline.core``: the same decoder, series
keys and rate rule, carried on from each series' latest point in the table),
so a chart reaches the last few seconds and agrees with the tables.
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
from clientmetrics.pipeline.core.brokers import broker_of
from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.rates import fresh_rates, series_state_of
from clientmetrics.pipeline.core.schemas import (
    LABEL_COLUMNS,
    LANDED_FILES,
    POINTS_ARROW,
    landed_pushes,
)
from clientmetrics.pipeline.core.series import series_attributes
from clientmetrics.pipeline.core.units import display_unit

POINT_COLUMNS = (
    "client_instance_id",
    "received_at",
    "metric_name",
    "metric_unit",
    "kind",
    "series",
    "start_time",
    "event_time",
    "value",
    "cumulative_value",
    "rate_per_second",
)
LANDING_COLUMNS = (*LABEL_COLUMNS, "payload")
_UTC_US = pa.timestamp("us", tz="UTC")
_NO_STATE = series_state_of(POINTS_ARROW.empty_table())


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


#: The series a client reports for its bootstrap connection: the pipeline keeps it
#: (``node.id`` -1, the Java client's ``node--1``), the charts say what it is.
BOOTSTRAP_ATTRIBUTE = "node.id=-1"
BOOTSTRAP_LABEL = "bootstrap"
BOOTSTRAP_HINT = (
    "bootstrap: node.id=-1, the client's connection to a bootstrap server, made before "
    "it knew which broker answers there; clients report that connection's metrics under "
    "node id -1, beside a series per broker they then used."
)
#: The Java client's connection to its group coordinator (``node.id=+1``: broker 1).
COORDINATOR_LABEL = "coordinator"
COORDINATOR_HINT = (
    "coordinator: the Java client's connection to its group coordinator, a second "
    "connection to that broker beside its node.id=N series (the client names it +N)."
)
#: The legend of a chart's one unlabelled line when it is a rate, not the metric's value.
RATE_LABEL = "per second"


def _label(series: str, metric: str, is_sum: bool) -> str:
    # The series' attributes tell the lines of one chart apart; a chart's single
    # unlabelled line is named for what it shows (a sum's rate is not its "total").
    attributes = series_attributes(series)
    if attributes:
        parts = attributes.split(",")
        if BOOTSTRAP_ATTRIBUTE in parts:
            return attributes.replace(BOOTSTRAP_ATTRIBUTE, BOOTSTRAP_LABEL, 1)
        return ",".join(_coordinator(part) for part in parts)
    return RATE_LABEL if is_sum else metric.rsplit(".", 1)[-1]


def _coordinator(part: str) -> str:
    """``node.id=+1`` as ``coordinator node.id=1``; any other attribute as it is."""
    key, _, value = part.partition("=")
    if key == "node.id" and broker_of(value) != value:
        return f"{COORDINATOR_LABEL} node.id={broker_of(value)}"
    return part


def _hint(label: str) -> str:
    parts = label.split(",")
    if BOOTSTRAP_LABEL in parts:
        return BOOTSTRAP_HINT
    if any(part.startswith(COORDINATOR_LABEL + " ") for part in parts):
        return COORDINATOR_HINT
    return ""


def rate_unit(unit: str) -> str:
    """The unit of a per-second rate of a sum counted in ``unit`` (ms -> ms/s)."""
    if not unit:
        return "/s"
    return unit if unit.endswith("/s") else f"{unit}/s"


def _from_points(table: pa.Table) -> list[_Sample]:
    """Chart samples: a sum's rate per second, any other kind's value."""
    samples = []
    for row in table.select(list(POINT_COLUMNS)).to_pylist():
        is_sum = row["kind"] == "sum"
        value = row["rate_per_second"] if is_sum else row["value"]
        samples.append(
            _Sample(
                metric=row["metric_name"] or "",
                unit=row.get("metric_unit") or "",
                kind=row["kind"] or "",
                label=_label(row["series"] or "", row["metric_name"] or "", is_sum),
                time_s=row["event_time"].timestamp(),
                value=value,
            )
        )
    return samples


def _from_payloads(payloads: pa.Table, table_points: pa.Table | None) -> list[_Sample]:
    """Samples of landed pushes the tables lack, continuing each series from the table."""
    state = series_state_of(table_points) if table_points is not None else None
    points = fresh_rates(decode_pushes(payloads), state if state is not None else _NO_STATE)
    return _from_points(points)


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
        is_rate = sample.kind == "sum"
        unit = display_unit(sample.metric, sample.unit)
        meta[sample.metric] = (rate_unit(unit) if is_rate else unit, is_rate)
    charts = []
    for metric in sorted(grouped, key=_chart_order):
        lines = tuple(
            Line(label, tuple(sorted(points)), _hint(label))
            for label, points in sorted(grouped[metric].items())
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
        mine: pa.Table | None = None
        points = self._tables.read("points", POINT_COLUMNS)
        if points is not None:
            mine = points.filter(pc.equal(points.column("client_instance_id"), client_instance_id))
            newest = pc.max(mine.column("received_at")).as_py() if mine.num_rows else None
            shown = mine
            if since is not None:
                shown = mine.filter(pc.greater_equal(mine.column("event_time"), _ts(since)))
            samples += _from_points(shown)
        samples += self._landed_after(client_instance_id, newest, since, mine)
        return build_charts(samples)

    def _landed_after(
        self,
        client_instance_id: str,
        newest: datetime | None,
        since: datetime | None,
        table_points: pa.Table | None,
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
        return _from_payloads(mine, table_points) if mine.num_rows else []


def _ts(moment: datetime) -> pa.Scalar:
    return pa.scalar(moment.astimezone(UTC), _UTC_US)


def landing_reader(data_dir: Path) -> TableReader:
    """A reader over ``DATA/landing/pushes`` (``date=``/``hour=`` partitions)."""
    return TableReader(landed_pushes(data_dir), pattern=LANDED_FILES)
