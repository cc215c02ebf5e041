"""The dashboard's parts: charts, table cache, inventory at scale, the gateway's counters."""

from __future__ import annotations

import math
import os
import re
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from clientmetrics.dashboard import (
    InventoryQuery,
    Line,
    TableReader,
    inventory_page,
    line_chart,
    parse_gateway_metrics,
)
from clientmetrics.dashboard.inventory import newest_push, with_landed_clients, with_status
from clientmetrics.dashboard.svg import nice_ticks
from tests.dashboard.conftest import NOW
from tests.dashboard.tables import ALERTS_SCHEMA, CLIENTS_SCHEMA, alert_events, client_row, write

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


@given(finite, finite)
def test_ticks_are_round_ascending_and_cover_the_range(a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    ticks = nice_ticks(low, high)
    assert ticks == sorted(ticks)
    if high - low > 1e-6 * max(1.0, abs(high)):
        assert 2 <= len(ticks) <= 8
        assert ticks[0] <= low
        assert ticks[-1] >= high
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 5, 10))


def test_chart_draws_one_polyline_per_line_with_every_point() -> None:
    lines = [
        Line("node.id=1", tuple((1000.0 + i, float(i)) for i in range(10))),
        Line("node.id=2", tuple((1000.0 + i, float(2 * i)) for i in range(7))),
        Line("empty", ()),
    ]
    svg = line_chart("latency", lines, "ms")
    drawn = re.findall(r'data-label="([^"]+)"[^>]*points="([^"]+)"', svg)
    assert [(label, len(points.split())) for label, points in drawn] == [
        ("node.id=1", 10),
        ("node.id=2", 7),
    ]
    # Higher values sit higher on the page (smaller y).
    ys = [float(p.split(",")[1]) for p in drawn[1][1].split()]
    assert ys == sorted(ys, reverse=True)
    assert "node.id=2 = 12" in svg


def test_chart_without_points_says_no_data() -> None:
    assert "no data" in line_chart("x", [Line("a", ())])


def test_table_reader_rereads_a_file_only_when_it_changes(tmp_path: Path) -> None:
    reader = TableReader(tmp_path)
    path = write(tmp_path, "clients", [client_row(0, NOW)], CLIENTS_SCHEMA)
    first = reader.read("clients", ["client_id", "last_seen"])
    assert first is not None
    assert first.column("client_id").to_pylist() == ["app-00000"]
    assert first.schema.field("last_seen").type == pa.timestamp("us", tz="UTC")
    assert first.column("last_seen")[0].as_py() == NOW
    assert reader.read("clients", ["client_id", "last_seen"]) is first  # cached
    pq.write_table(
        pa.table({"client_id": ["app-new"]}), path
    )  # replaced in place: new mtime and size
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = reader.read("clients", ["client_id", "last_seen"])
    assert again is not None
    assert again.column("client_id").to_pylist() == ["app-new"]


def test_table_reader_ignores_hidden_files_and_missing_tables(tmp_path: Path) -> None:
    reader = TableReader(tmp_path)
    assert reader.read("alerts") is None
    write(tmp_path, "clients", [client_row(0, NOW)], CLIENTS_SCHEMA, name=".part-0.parquet")
    write(tmp_path, "clients", [client_row(1, NOW)], CLIENTS_SCHEMA, name="_tmp.parquet")
    assert reader.read("clients") is None


def test_inventory_of_ten_thousand_clients_searches_sorts_and_pages(tmp_path: Path) -> None:
    rows = [client_row(i, NOW) for i in range(10_000)]
    write(tmp_path, "clients", rows, CLIENTS_SCHEMA)
    clients = TableReader(tmp_path).read("clients")
    assert clients is not None
    table = with_status(clients, {rows[9_999]["client_instance_id"]: 2}, NOW)
    page = inventory_page(table, InventoryQuery(sort="active_alerts", descending=True))
    assert page.total == 10_000
    assert page.pages == 200
    assert page.rows[0]["client_id"] == "app-09999"
    assert page.rows[0]["active_alerts"] == 2
    found = inventory_page(table, InventoryQuery(search="10.0.39.24", sort="client_id"))
    assert found.matched == 11  # 10.0.39.24 and 10.0.39.240 .. 10.0.39.249
    assert [r["client_source_address"] for r in found.rows][:2] == ["10.0.39.249", "10.0.39.248"]


def test_silent_is_judged_against_the_newest_landed_push_not_the_clock() -> None:
    rows = [
        client_row(0, NOW, last_seen=(NOW - timedelta(seconds=14)).replace(tzinfo=None)),
        client_row(1, NOW, last_seen=(NOW - timedelta(seconds=16)).replace(tzinfo=None)),
        client_row(2, NOW, last_seen=(NOW - timedelta(hours=1)).replace(tzinfo=None)),
        client_row(3, NOW, last_seen=NOW.replace(tzinfo=None)),
    ]
    rows[2]["terminated"] = True
    table = pa.Table.from_pylist(rows, schema=CLIENTS_SCHEMA)
    from clientmetrics.dashboard.tables import normalise_timestamps

    clients = normalise_timestamps(table)
    assert newest_push(clients) == NOW
    status = with_status(clients, {}, NOW)
    # 3 x 5000 ms: 14 s is still pushing, 16 s is silent, a goodbye is never silent.
    assert status.column("silent").to_pylist() == [False, True, False, False]
    # A page loaded an hour later, with nothing landed since, sees the same.
    assert with_status(clients, {}, newest_push(clients) or NOW).equals(status)


def test_landed_pushes_refresh_known_clients_last_seen() -> None:
    stale = (NOW - timedelta(minutes=5)).replace(tzinfo=None)
    table = pa.Table.from_pylist([client_row(0, NOW, last_seen=stale)], schema=CLIENTS_SCHEMA)
    from clientmetrics.dashboard.tables import normalise_timestamps

    clients = normalise_timestamps(table)
    landed = pa.table(
        {
            "received_at": pa.array([NOW - timedelta(seconds=2)], pa.timestamp("us", tz="UTC")),
            "client_instance_id": clients.column("client_instance_id"),
            "terminating": [False],
        }
    )
    merged = with_landed_clients(clients, landed)
    assert merged is not None
    assert merged.column("last_seen")[0].as_py() == NOW - timedelta(seconds=2)
    assert with_status(merged, {}, NOW).column("silent").to_pylist() == [False]


def test_gateway_metrics_are_parsed_from_prometheus_text() -> None:
    text = (
        "# TYPE kafka_server_client_metrics_push counter\n"
        "kafka_server_client_metrics_push_total 42.0\n"
        "# TYPE kafka_server_client_metrics_instance_count gauge\n"
        "kafka_server_client_metrics_instance_count 7.0\n"
        "# TYPE other_metric gauge\nother_metric 1.0\n"
    )
    # by the names /metrics shows (counters keep _total), without the common prefix
    assert parse_gateway_metrics(text) == {"push_total": 42.0, "instance_count": 7.0}


def test_the_gateway_page_shows_each_exporters_counters() -> None:
    from clientmetrics.dashboard.pages import gateway_page
    from clientmetrics.dashboard.sources import GatewaySample, parse_exporter_metrics

    text = (
        "# TYPE clientmetrics_exporter_received counter\n"
        'clientmetrics_exporter_received_total{exporter="landing"} 10.0\n'
        'clientmetrics_exporter_received_total{exporter="otlp"} 10.0\n'
        "# TYPE clientmetrics_exporter_dropped counter\n"
        'clientmetrics_exporter_dropped_total{exporter="otlp"} 4.0\n'
        "# TYPE clientmetrics_exporter_queue_depth gauge\n"
        'clientmetrics_exporter_queue_depth{exporter="otlp"} 6.0\n'
        "# TYPE clientmetrics_exporter_export_seconds summary\n"
        'clientmetrics_exporter_export_seconds_count{exporter="landing"} 4.0\n'
        'clientmetrics_exporter_export_seconds_sum{exporter="landing"} 0.01\n'
    )
    exporters = parse_exporter_metrics(text)
    assert exporters["otlp"] == {"received": 10.0, "dropped": 4.0, "queue_depth": 6.0}
    page = gateway_page("http://gw/metrics", GatewaySample(exporters=exporters))
    assert "<h2>Exporters</h2>" in page
    assert (
        "<td><code>landing</code></td><td>10</td><td>–</td><td>–</td><td>–</td><td>–</td><td>2.50</td>"
        in page
    )
    assert (
        "<td><code>otlp</code></td><td>10</td><td>–</td><td>4</td><td>–</td><td>6</td><td>–</td>"
        in page
    )


def test_an_episode_keeps_why_it_resolved_whatever_the_order_of_its_events() -> None:
    from clientmetrics.dashboard.alerts import episodes

    events = alert_events("c-1", NOW, NOW + timedelta(minutes=1), "slow", resolution="terminated")
    table = pa.Table.from_pylist(events, schema=ALERTS_SCHEMA)
    replayed = pa.concat_tables([table, table.slice(0, 1)])  # a replayed firing event last
    for log in (table, replayed, table.take([1, 0])):
        (alert,) = episodes(log)
        assert (alert.is_open, alert.resolution) == (False, "terminated")
    (still,) = episodes(table.slice(0, 1))
    assert (still.is_open, still.resolution) == (True, None)


def test_a_java_coordinator_connection_is_named_and_explained_on_a_chart() -> None:
    """Kafka 4.4's Java client reports its group coordinator connection as ``node-+1``
    (decoded ``+1``): the chart's line says what it is, beside broker 1's own line."""
    from clientmetrics.dashboard.series import COORDINATOR_HINT, _label, _Sample, build_charts
    from clientmetrics.pipeline.core.series import SERIES_SEPARATOR

    def sample(label: str, value: float) -> _Sample:
        return _Sample("lat", "ms", "gauge", label, 1.0, value)

    keys = [SERIES_SEPARATOR.join(("i1", "lat", f"node.id={n}")) for n in ("1", "+1", "-1")]
    labels = [_label(key, "lat", False) for key in keys]
    assert labels == ["node.id=1", "coordinator node.id=1", "bootstrap"]
    (chart,) = build_charts(sample(label, 5.0) for label in labels)
    hints = {line.label: line.hint for line in chart.lines}
    assert hints["coordinator node.id=1"] == COORDINATOR_HINT
    assert hints["node.id=1"] == ""
