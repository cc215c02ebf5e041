"""The fleet page: connection records and the clients table, grouped by principal."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from click.testing import CliRunner

from clientmetrics.cli import cli
from clientmetrics.dashboard import Dashboard, DashboardConfig
from clientmetrics.gateway.connection_log import write_records
from clientmetrics.telemetry.connections import ClientKey, ConnectionTable, landed_connections
from tests.dashboard.conftest import NOW
from tests.dashboard.tables import CLIENTS_SCHEMA, POINTS_SCHEMA, client_row, naive, write

PUSHER = client_row(0, NOW)  # User:alice, librdkafka 2.16.1, app-00000
ROW = re.compile(
    r"<tr class=(\w+) data-client-id='([^']*)'><td>[^<]*</td><td><b>([^<]*)</b> ([^<]*)"
    r"(?: <span class=defect>[^<]*</span>)?</td>"
    r"<td>[^<]*</td><td class=coverage>([^<]*)</td><td class=wrap>([^<]*)</td>"
)


def _records(data_dir: Path) -> None:
    now_ms = int(NOW.timestamp() * 1000)
    table = ConnectionTable(max_keys=10, node_id=0, now_ms=now_ms - 60_000)
    pusher = ClientKey(
        "User:alice", "app-00000", "librdkafka", "2.16.1", "PLAINTEXT", "PLAINTEXT",
        "10.0.0.0", PUSHER["client_instance_id"], True,
    )  # fmt: skip
    table.observe(pusher, now_ms - 1_000, usage=(0, 0, 0, 1_234, 98_765, 12))
    table.observe(
        ClientKey("User:bob", "go-app", "sarama", "1.61.1", "PLAINTEXT", "PLAINTEXT", "10.0.0.9"),
        now_ms - 2_000,
        usage=(10, 700, 10, 0, 0, 0),
    )
    table.observe(
        ClientKey(
            "User:bob", "quiet", "apache-kafka-java", "4.4.0", "PLAINTEXT", "PLAINTEXT", "10.0.0.9"
        ),
        now_ms - 3_000,
    )
    write_records(landed_connections(data_dir), table.drain(now_ms), "part-test")


def test_fleet_page_shows_every_client_by_principal(tmp_path: Path) -> None:
    write(tmp_path / "tables", "clients", [PUSHER], CLIENTS_SCHEMA)
    _records(tmp_path)
    page = Dashboard(DashboardConfig(tmp_path), clock=NOW.timestamp).handle("/fleet").body.decode()
    assert '<a href="/fleet" class=on>Fleet</a>' in page
    assert re.findall(r"<h2>([^<]*) <span", page) == ["User:alice", "User:bob"]
    rows = {m[1]: (m[0], m[2], m[3], m[4], m[5]) for m in ROW.findall(page)}
    assert rows == {
        "app-00000": ("pushes", "librdkafka", "2.16.1", "pushes", ""),
        "go-app": ("cannot", "sarama", "1.61.1", "cannot push",
                   "Sarama implements no GetTelemetrySubscriptions or PushTelemetry request."),
        "quiet": ("does_not", "apache-kafka-java", "4.4.0", "could, does not",
                  "telemetry turned off (never asked for a subscription)"),
    }  # fmt: skip
    assert "3 clients: 1 pushes, 1 cannot push, 1 could, does not." in page
    assert "only clients that" not in page
    # Usage on the clock's UTC day, as the proxy counted it (the export's rows).
    cells = re.findall(
        r"data-client-id='([^']*)'>.*?<td class=produced>([^<]*)</td>"
        r"<td class=consumed>([^<]*)</td><td class=source>([^<]*)</td></tr>",
        page,
    )
    assert {c[0]: c[1:] for c in cells} == {
        "app-00000": ("0 rec · 0 B", "1,234 rec · 98,765 B", "proxy (exact)"),
        "go-app": ("10 rec · 700 B", "0 rec · 0 B", "proxy (exact)"),
        "quiet": ("—", "—", "—"),
    }
    assert "Usage is the UTC day 2026-11-21's" in page
    totals = re.findall(r"<p class='muted principal-usage'>Today: ([^<]*)\.</p>", page)
    assert totals == [
        "produced 0 rec · 0 B, consumed 1,234 rec · 98,765 B (proxy (exact))",
        "produced 10 rec · 700 B, consumed 0 rec · 0 B (proxy (exact))",
    ]
    # Java 4.4.0 still has KAFKA-21077 (open): the row is flagged, as on the findings.
    assert re.search(r"data-client-id='quiet'>.*?<span class=defect>KAFKA-21077</span>", page)


def test_without_connection_records_the_page_says_it_sees_only_pushers(tmp_path: Path) -> None:
    old = client_row(
        1, NOW, client_software_name="apache-kafka-java", client_software_version="4.1.0"
    )
    write(tmp_path / "tables", "clients", [PUSHER, old], CLIENTS_SCHEMA)
    page = Dashboard(DashboardConfig(tmp_path), clock=NOW.timestamp).handle("/fleet").body.decode()
    assert "sees <b>only clients that push</b>" in page
    assert "2 clients: 2 pushes, 0 cannot push, 0 could, does not." in page
    # The software row is flagged from the known-defects table (fixed in 4.2.0).
    assert "<span class=defect>KAFKA-19747" in page
    assert page.count("<td class=source>—</td>") == 2  # no points: no usage


def test_without_a_proxy_usage_is_the_pushed_counters_growth_today(tmp_path: Path) -> None:
    """The Java producer's record.send.total: 100 at the end of yesterday, 180 now:
    80 records today (the day before is read for its last value)."""
    write(tmp_path / "tables", "clients", [PUSHER], CLIENTS_SCHEMA)
    name = "org.apache.kafka.producer.record.send.total"
    instance = PUSHER["client_instance_id"]

    def point(at: datetime, value: float) -> dict[str, object]:
        return {"client_instance_id": instance, "client_id": PUSHER["client_id"],
                "principal": PUSHER["principal"], "metric_name": name, "kind": "sum",
                "temporality": "cumulative", "start_time": naive(NOW - timedelta(days=2)),
                "event_time": naive(at), "received_at": naive(at), "attributes": [],
                "series": f"{instance}|{name}|", "cumulative_value": value}  # fmt: skip

    yesterday = NOW - timedelta(days=1)
    write(tmp_path / "tables", "points", [point(yesterday - timedelta(hours=1), 60),
          point(yesterday, 100)], POINTS_SCHEMA, day="2026-11-20")  # fmt: skip
    write(tmp_path / "tables", "points", [point(NOW - timedelta(hours=1), 150),
          point(NOW, 180)], POINTS_SCHEMA)  # fmt: skip
    page = Dashboard(DashboardConfig(tmp_path), clock=NOW.timestamp).handle("/fleet").body.decode()
    assert (
        "<td class=produced>80 rec · — B</td><td class=consumed>—</td>"
        "<td class=source>pushed metrics</td>"
    ) in page
    assert "Today: produced 80 rec · — B, consumed — (pushed metrics)." in page
    assert str((NOW - timedelta(seconds=1)).year) in page


def test_the_fleet_and_usage_export_as_csv_and_parquet(tmp_path: Path) -> None:
    write(tmp_path / "tables", "clients", [PUSHER], CLIENTS_SCHEMA)
    _records(tmp_path)
    out, usage = tmp_path / "fleet.csv", tmp_path / "usage.parquet"
    args = ["fleet", "--data-dir", str(tmp_path), "--out", str(out), "--usage", str(usage)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = {r["client_id"]: r for r in pacsv.read_csv(out).to_pylist()}
    assert {c: r["coverage"] for c, r in rows.items()} == {
        "app-00000": "pushes",
        "go-app": "cannot",
        "quiet": "does_not",
    }
    assert rows["app-00000"]["instances"] == PUSHER["client_instance_id"]
    # No points table: the proxy's rows only, the figures the page shows.
    measures = ("produced_records", "produced_bytes", "consumed_records", "consumed_bytes")
    exported = [
        (r["day"], r["client_id"], *(r[m] for m in measures), r["source"])
        for r in pq.read_table(usage).to_pylist()
    ]
    assert exported == [
        ("2026-11-21", "app-00000", 0, 0, 1_234, 98_765, "proxy"),
        ("2026-11-21", "go-app", 10, 700, 0, 0, "proxy"),
    ]
    bad = CliRunner().invoke(cli, ["fleet", "--data-dir", str(tmp_path), "--out", "f.json"])
    assert bad.exit_code != 0
    assert "must end in .parquet or .csv" in bad.output
