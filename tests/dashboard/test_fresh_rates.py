"""The dashboard's fresh view and the tables agree on the same pushes (delta and cumulative sums).

The tables part is the golden points table's first batch; the rest of the same
client's pushes are only landed. The charts must show, for every point of both
parts, the rate the golden table holds.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clientmetrics.dashboard.series import POINT_COLUMNS, SeriesReader, landing_reader
from clientmetrics.dashboard.tables import TableReader
from clientmetrics.pipeline.core.schemas import POINTS_ARROW
from tests.pipeline.golden import MIXED, golden_batches, golden_rows
from tests.synthetic import land

SUMS = ("c", "d")  # cumulative and delta sums: charted as rates


def _label(series: str) -> str:
    # A rate's one unlabelled line is named for what it shows.
    attributes = series.rsplit("|", 1)[-1]
    return attributes or "per second"


def _golden_mixed() -> list[dict[str, object]]:
    return [row for row in golden_rows("points") if row["client_instance_id"] == MIXED]


def _as_table(rows: list[dict[str, object]]) -> pa.Table:
    schema = pa.schema([POINTS_ARROW.field(name) for name in POINT_COLUMNS])
    columns = {}
    for field in schema:
        values = [row[field.name] for row in rows]
        if pa.types.is_timestamp(field.type):
            values = [None if v is None else datetime.fromisoformat(str(v)) for v in values]
        columns[field.name] = pa.array(values, field.type)
    return pa.table(columns, schema=schema)


def test_fresh_rates_continue_the_tables_and_match_the_golden_points(tmp_path: Path) -> None:
    golden = _golden_mixed()
    first_batch = {push.received_at_us for push in golden_batches()[0]}
    tables = tmp_path / "tables"
    in_tables = [
        row
        for row in golden
        if int(datetime.fromisoformat(str(row["received_at"])).timestamp() * 1e6) in first_batch
    ]
    assert 0 < len(in_tables) < len(golden)
    (tables / "points" / "date=2026-11-21").mkdir(parents=True)
    pq.write_table(_as_table(in_tables), tables / "points" / "date=2026-11-21" / "part-0.parquet")
    land(tmp_path, [push for push in golden_batches()[1] if push.client_instance_id == MIXED])

    reader = SeriesReader(TableReader(tables), landing_reader(tmp_path))
    charts = {chart.metric_name: chart for chart in reader.charts(MIXED, None)}
    for metric in SUMS:
        shown = {line.label: list(line.points) for line in charts[metric].lines}
        expected: dict[str, list[tuple[float, float]]] = {}
        for row in golden:
            if row["metric_name"] == metric and row["rate_per_second"] is not None:
                moment = datetime.fromisoformat(str(row["event_time"])).timestamp()
                label = _label(str(row["series"]))
                expected.setdefault(label, []).append((moment, float(row["rate_per_second"])))
        assert shown == {label: sorted(points) for label, points in expected.items()}, metric
        # Both parts are there: the fresh points carried on from the table's state.
        assert max(len(points) for points in shown.values()) == 9, metric
