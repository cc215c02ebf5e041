"""Every page through ``Dashboard.handle``, over pipeline-shaped tables, with a fixed clock."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from clientmetrics.dashboard import Dashboard, DashboardConfig
from clientmetrics.dashboard.series import rate_unit
from clientmetrics.pipeline.core.units import display_unit
from tests.dashboard.conftest import NOW
from tests.dashboard.tables import (
    LATENCY,
    REQUESTS,
    DataDir,
    write_findings,
    write_subscriptions,
)
from tests.synthetic import Push, land, producer_payload


def dashboard(data: DataDir, **options: object) -> Dashboard:
    config = DashboardConfig(data.root, **options)  # type: ignore[arg-type]
    return Dashboard(config, clock=NOW.timestamp)


def get(app: Dashboard, target: str) -> str:
    response = app.handle(target)
    assert response.status == 200, target
    return response.body.decode()


def inventory_ids(page: str) -> list[str]:
    return re.findall(r'href="/client/([^"?]+)"', page)


def test_inventory_lists_a_page_of_clients_newest_first(data: DataDir) -> None:
    page = get(dashboard(data), "/")
    assert "120 of 120 clients · page 1 of 3" in page
    ids = inventory_ids(page)
    assert len(ids) == 50
    # last_seen is now minus (index % 60) s: indices 0, 60 are newest, then 1, 61...
    assert ids[:4] == [str(uuid.UUID(int=n + 1)) for n in (0, 60, 1, 61)]


def test_inventory_search_is_case_insensitive_over_several_columns(data: DataDir) -> None:
    app = dashboard(data)
    assert "1 of 120 clients" in get(app, "/?q=APP-00042")
    assert "40 of 120 clients" in get(app, "/?q=user:ALICE")  # every third client
    by_group = get(app, "/?q=group-3")
    assert len(inventory_ids(by_group)) == len({i for i in range(120) if i % 2 and i % 7 == 3})
    assert "0 of 120 clients" in get(app, "/?q=nobody-has-this")


def test_inventory_sorts_and_paginates(data: DataDir) -> None:
    app = dashboard(data)
    ascending = inventory_ids(get(app, "/?sort=client_id&desc=0&page=1"))
    assert ascending[:2] == [str(uuid.UUID(int=1)), str(uuid.UUID(int=2))]
    last_page = inventory_ids(get(app, "/?sort=client_id&desc=0&page=3"))
    assert len(last_page) == 20
    assert last_page[-1] == str(uuid.UUID(int=120))
    descending = inventory_ids(get(app, "/?sort=client_id&desc=1"))
    assert descending[0] == str(uuid.UUID(int=120))


def test_inventory_shows_state_and_active_alerts(data: DataDir) -> None:
    page = get(dashboard(data), "/?sort=active_alerts&desc=1")
    first_row = page.split("<tbody>")[1].split("</tr>")[0]
    assert data.ids[0] in first_row
    assert "badge bad'>1<" in first_row
    silent = get(dashboard(data), "/?q=app-00003")  # not seen for 5 min > 3 x 5 s
    assert "silent" in silent
    terminated = get(dashboard(data), "/?q=app-00004")
    assert "terminated" in terminated
    assert ">silent<" not in terminated


def test_inventory_without_tables_says_so(tmp_path: Path) -> None:
    app = Dashboard(DashboardConfig(tmp_path))
    assert "has not written" in get(app, "/")


def test_client_page_charts_one_line_per_node_in_the_window(data: DataDir) -> None:
    app = dashboard(data)
    page = get(app, f"/client/{data.ids[0]}?window=all")
    assert "app-00000" in page
    latency = page.split(f"<h3>{LATENCY}</h3>")[1].split("</svg>")[0]
    lines = re.findall(r'data-label="([^"]+)"[^>]*points="([^"]+)"', latency)
    assert [label for label, _ in lines] == ["node.id=1", "node.id=2"]
    assert all(len(points.split()) == 40 for _, points in lines)
    assert f"{REQUESTS} (per second)" in page
    # The client's open alert on this metric: its threshold is drawn, inside the axes.
    assert 'class="threshold"' in latency
    assert "alert &gt; 5000" in latency
    assert 'class="threshold"' not in page.split(f"<h3>{REQUESTS} (per second)</h3>")[1]
    # The client sent no unit: the axis says the one KIP-714 gives latencies (ms).
    assert re.search(r'<text x="4" y="\d+" class="tick">ms</text>', latency)
    recent = get(app, f"/client/{data.ids[0]}?window=5m")
    chart = recent.split(f"<h3>{LATENCY}</h3>")[1].split("</svg>")[0]
    # Points span now-4min .. now-1min15s; all are inside five minutes.
    assert len(re.findall(r'points="([^"]+)"', chart)[0].split()) == 40
    assert "No data points" not in recent


def test_client_page_window_excludes_older_points(data: DataDir) -> None:
    app = Dashboard(DashboardConfig(data.root), clock=(NOW + timedelta(hours=2)).timestamp)
    page = get(app, f"/client/{data.ids[0]}?window=1h")
    assert "No data points in this window" in page
    assert "<polyline" in get(app, f"/client/{data.ids[0]}?window=6h")


def test_client_page_adds_pushes_landed_after_the_tables(data: DataDir) -> None:
    instance = data.ids[0]
    # The tables end at now-1m15s; two pushes landed at now-30 s and now-25 s.
    pushes = [
        Push(
            int((NOW - timedelta(seconds=s)).timestamp() * 1e6),
            instance,
            producer_payload(int((NOW - timedelta(seconds=s)).timestamp() * 1e9), 3, (1, 2)),
        )
        for s in (30, 25)
    ]
    land(data.root, pushes)
    page = get(dashboard(data), f"/client/{instance}?window=all")
    latency = page.split(f"<h3>{LATENCY}</h3>")[1].split("</svg>")[0]
    lines = dict(re.findall(r'data-label="([^"]+)"[^>]*points="([^"]+)"', latency))
    assert len(lines["node.id=1"].split()) == 42
    # A series only the landed pushes have: the bootstrap connection's, named and explained.
    assert len(lines["bootstrap"].split()) == 2
    legend = re.search(r'class="legend"><title>([^<]+)</title>bootstrap = ', latency)
    assert legend is not None
    assert "node.id=-1" in legend[1]
    assert "bootstrap server" in page.split("id=bootstrap-note>")[1].split("</p>")[0]


def test_inventory_includes_clients_only_the_landing_zone_knows(data: DataDir) -> None:
    moment = NOW - timedelta(seconds=5)
    pushes = [
        Push(
            int(moment.timestamp() * 1e6) + step,
            "new-instance",
            producer_payload(int(moment.timestamp() * 1e9), step),
            client_id="just-started",
        )
        for step in range(3)
    ]
    land(data.root, pushes)
    app = dashboard(data)
    assert "121 of 121 clients" in get(app, "/")
    row = get(app, "/?q=just-started").split("<tbody>")[1]
    assert "new-instance" in row
    assert "librdkafka 2.16.0" in row
    assert ">pushing<" in row
    assert "of 121 clients" in get(app, "/?q=app-00001")  # the table's clients are still there


def test_alerts_page_splits_open_and_resolved_with_workflow_labels(data: DataDir) -> None:
    app = dashboard(data)
    open_page = get(app, "/alerts")
    assert "1 open, 1 resolved" in open_page
    assert "slow-requests" in open_page
    assert ">slow<" not in open_page
    assert "principal=User:alice" in open_page
    assert "transactional_id=tx-9" in open_page
    assert f"{LATENCY} &gt; 5000 for 180 s" in open_page
    resolved = get(app, "/alerts?status=resolved")
    assert ">slow<" in resolved
    assert "2026-11-21 11:58:00 UTC" in resolved
    # Why it resolved: its client went silent (the pipeline's resolution), explained on hover.
    assert (
        "<span class='badge ok'>resolved</span><br><span class=muted "
        "title='the client went silent (3 push intervals without a push)'>expired</span>"
    ) in resolved
    assert ">expired<" not in open_page


def test_client_page_lists_its_alerts(data: DataDir) -> None:
    page = get(dashboard(data), f"/client/{data.ids[1]}")
    assert "<h2>Alerts</h2>" in page
    assert "resolved" in page
    assert ">expired</span>" in page


def test_subscriptions_page_reads_the_store_and_shows_commands(data: DataDir) -> None:
    write_subscriptions(
        data.root / "subscriptions.db",
        {
            "prod": {"metrics": "org.apache.kafka.producer.", "interval.ms": "30000"},
            "debug": {"metrics": "org.apache.kafka.", "match": "client_id=app-1.*"},
        },
    )
    page = get(dashboard(data), "/subscriptions")
    assert (
        "kafka-client-metrics --bootstrap-server 127.0.0.1:9092 --alter --name prod "
        "--metrics org.apache.kafka.producer. --interval 30000" in page
    )
    assert "--match 'client_id=app-1.*'" in page.replace("&#x27;", "'")
    assert "--delete --name debug" in page
    assert page.index(">debug<") < page.index(">prod<")


def test_unknown_pages_are_404(data: DataDir) -> None:
    assert dashboard(data).handle("/nope").status == 404


def test_unknown_client_is_404(data: DataDir) -> None:
    unknown = str(uuid.UUID(int=12345))
    response = dashboard(data).handle(f"/client/{unknown}")
    assert response.status == 404
    assert f"No client with instance id <code>{unknown}</code>" in response.body.decode()


def test_client_labels_show_booleans_as_the_tables_write_them(data: DataDir) -> None:
    app = dashboard(data)
    labels = get(app, f"/client/{data.ids[0]}").split("<dl>")[1].split("</dl>")[0]
    assert "<dt>terminated</dt><dd>false</dd>" in labels
    labels = get(app, f"/client/{data.ids[4]}").split("<dl>")[1].split("</dl>")[0]
    assert "<dt>terminated</dt><dd>true</dd>" in labels
    assert "True" not in labels
    assert "False" not in labels


def test_client_labels_show_lists_and_maps(data: DataDir) -> None:
    app = dashboard(data)
    labels = get(app, f"/client/{data.ids[0]}").split("<dl>")[1].split("</dl>")[0]
    assert f"<dt>standard_metrics</dt><dd>{LATENCY}, {REQUESTS}</dd>" in labels


@pytest.mark.parametrize("target", ["/client/%3Cscript%3E", "/?q=%3Cscript%3Ealert(1)"])
def test_user_text_is_escaped(data: DataDir, target: str) -> None:
    assert "<script>" not in dashboard(data).handle(target).body.decode()


def test_labels_a_record_lacks_show_as_unknown(data: DataDir) -> None:
    # As the broker plugin's records can arrive: no software, no source address.
    moment = NOW - timedelta(seconds=5)
    stamp = int(moment.timestamp() * 1e6)
    payload = producer_payload(int(moment.timestamp() * 1e9), 1)
    land(
        data.root,
        [
            Push(stamp, "bare", payload, client_id="bare-app", client_software_name=None,  # type: ignore[arg-type]
                 client_software_version=None, client_source_address=None,  # type: ignore[arg-type]
                 client_source_port=None),  # type: ignore[arg-type]
            Push(stamp, "half", payload, client_id="half-app", client_software_name="",
                 client_software_version="1.0", client_source_address="10.0.0.9",
                 client_source_port=None),  # type: ignore[arg-type]
        ],
    )  # fmt: skip
    app = dashboard(data)
    cells = re.findall(r"<td>(.*?)</td>", get(app, "/?q=bare-app").split("<tbody>")[1])
    assert cells[2:4] == ["unknown", "unknown"]
    cells = re.findall(r"<td>(.*?)</td>", get(app, "/?q=half-app").split("<tbody>")[1])
    assert cells[2:4] == ["unknown 1.0", "10.0.0.9:unknown"]
    software = get(app, "/software")
    assert "<td><b>unknown</b></td><td>unknown</td>" in software
    assert "<td><b>unknown</b></td><td>1.0</td>" in software
    for page in (get(app, "/"), software):
        assert "None" not in page
        assert ">:<" not in page


def test_a_cumulative_sum_is_charted_as_a_rate_and_says_so(data: DataDir) -> None:
    instance = data.ids[0]
    # connection.creation.total: 10 × step, pushes 5 s apart -> 2 connections per second.
    pushes = [
        Push(
            int((NOW - timedelta(seconds=s)).timestamp() * 1e6),
            instance,
            producer_payload(int((NOW - timedelta(seconds=s)).timestamp() * 1e9), step, (1,)),
        )
        for step, s in ((100, 30), (101, 25))
    ]
    land(data.root, pushes)
    page = get(dashboard(data), f"/client/{instance}?window=all")
    name = "org.apache.kafka.producer.connection.creation.total"
    chart = page.split(f"<h3>{name} (per second)</h3>")[1].split("</svg>")[0]
    # Its line is the rate, not a "total"; its axis unit is per second.
    assert re.search(r'class="legend">per second = 2<', chart)
    assert "total =" not in chart
    assert '<text x="4" y="20" class="tick">/s</text>' in chart
    latency = page.split(f"<h3>{LATENCY}</h3>")[1].split("</svg>")[0]
    assert '<text x="4" y="20" class="tick">ms</text>' in latency  # a gauge keeps its unit


@pytest.mark.parametrize(
    ("metric", "unit"),
    [
        ("org.apache.kafka.consumer.coordinator.rebalance.latency.total", "ms/s"),
        ("org.apache.kafka.producer.connection.creation.total", "/s"),
        ("org.apache.kafka.producer.outgoing.byte.total", "bytes/s"),
    ],
)
def test_a_rate_of_a_sum_is_in_its_unit_per_second(metric: str, unit: str) -> None:
    assert rate_unit(display_unit(metric)) == unit


def test_findings_page_groups_open_findings_and_the_client_page_shows_its_own(
    data: DataDir,
) -> None:
    write_findings(data)  # clients 5-7 slow to broker 3 (open), 8 slow processing (resolved)
    app = dashboard(data)
    page = get(app, "/findings")
    assert "1 finding open." in page
    (row,) = page.split("<table class='findings'>")[1].split("</tbody>")[0].split("<tr>")[2:]
    assert "<code>slow-broker-requests</code>" in row
    assert "<b>3</b>:" in row
    assert all(data.ids[n] in row for n in (5, 6, 7))
    assert "<td>3</td>" in row  # the broker, from the points' node.id
    # Since the earliest open episode's start: fired 7 min ago, held 180 s before.
    assert "2026-11-21 11:50:00 UTC" in row
    assert "If many clients name the same node_id" in row
    # The catalogue lists every shipped finding, the resolved one included.
    assert page.count("<code>slow-processing</code>") == 1
    assert "coordinator.rebalance.latency.total (rate)" in page
    client = get(app, f"/client/{data.ids[5]}")
    assert "<h2>Findings</h2>" in client
    assert "slow-broker-requests" in client
    assert "<h2>Findings</h2>" not in get(app, f"/client/{data.ids[8]}")
