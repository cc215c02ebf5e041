"""HTML for each page: plain server-rendered markup, inline CSS, no scripts, nothing remote."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from clientmetrics.dashboard.alerts import RESOLUTIONS, Alert
from clientmetrics.dashboard.inventory import InventoryPage
from clientmetrics.dashboard.series import BOOTSTRAP_HINT, Chart
from clientmetrics.dashboard.sources import GatewaySample, SubscriptionView
from clientmetrics.dashboard.svg import format_value, line_chart

#: The chart windows a user can pick, label -> seconds (None: everything).
WINDOWS: dict[str, int | None] = {
    "5m": 300,
    "15m": 900,
    "1h": 3600,
    "6h": 21600,
    "24h": 86400,
    "all": None,
}

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f8fa}
header{background:#1b1f24;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:center}
header a{color:#d0d7de;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff}main{padding:16px 20px}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:4px 8px;text-align:left;white-space:nowrap}
th a{color:inherit}td.num{text-align:right}tr:hover td{background:#f0f6ff}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px}
.bad{background:#ffebe9;color:#cf222e}.ok{background:#dafbe1;color:#116329}
.muted{color:#57606a}.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart-box{background:#fff;border:1px solid #d8dee4;padding:6px}
.chart-box h3{margin:0 0 4px;font-size:13px;font-weight:600}
svg .grid{stroke:#eaeef2}svg .axis{stroke:#8c959f}svg .tick,svg .legend{font-size:11px;fill:#57606a}
svg .empty{font-size:13px;fill:#8c959f;text-anchor:middle}
code,pre{background:#eaeef2;padding:1px 4px;border-radius:4px;font-size:12px}
dl{display:grid;grid-template-columns:repeat(3,max-content minmax(120px,auto));gap:2px 12px;
background:#fff;border:1px solid #d8dee4;padding:8px}dt{color:#57606a}
dd{margin:0;min-width:0;overflow-wrap:anywhere}
table.subscriptions td,table.findings td{white-space:normal}td{vertical-align:top}
.wrap{white-space:normal}
tr.alert td{border-bottom:none}
table.alerts code{display:inline-block;margin:1px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #d8dee4;
padding:10px 14px;min-width:150px}.card b{display:block;font-size:22px}
form{margin:0 0 12px}input[type=search]{width:440px;padding:4px}
"""

_NAV = (
    ("/", "Clients"),
    ("/alerts", "Alerts"),
    ("/findings", "Findings"),
    ("/software", "Client software"),
    ("/fleet", "Fleet"),
    ("/subscriptions", "Subscriptions"),
    ("/investigate", "Investigate"),
    ("/gateway", "Gateway"),
)


def layout(title: str, active: str, body: str) -> str:
    """A whole page around ``body``."""
    links = "".join(
        f'<a href="{href}"{" class=on" if href == active else ""}>{name}</a>' for href, name in _NAV
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · clientmetrics</title><style>{_CSS}</style></head>"
        f"<body><header><span class=brand>clientmetrics</span>{links}</header>"
        f"<main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )


def when(moment: datetime | None) -> str:
    """A timestamp as UTC text (empty for none)."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], css: str = "") -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: How the dashboard shows a label a record does not carry (null or empty).
UNKNOWN = "unknown"


def known(value: object) -> str:
    """A label as shown: its text, or ``UNKNOWN`` when the record lacks it."""
    return UNKNOWN if value is None or value == "" else str(value)


def label_pair(first: object, second: object, separator: str) -> str:
    """Two labels shown as one (software and version, address and port): ``UNKNOWN``
    when both are missing, each missing one as ``UNKNOWN`` otherwise."""
    if known(first) == UNKNOWN and known(second) == UNKNOWN:
        return UNKNOWN
    return f"{known(first)}{separator}{known(second)}"


def client_link(instance_id: str, text: str | None = None) -> str:
    """A link to a client's page."""
    return f'<a href="/client/{quote(instance_id)}">{escape(text or instance_id)}</a>'


_INVENTORY_HEADERS = (
    ("client_id", "client id"),
    ("client_instance_id", "instance id"),
    ("client_software_name", "software"),
    ("client_source_address", "source address"),
    ("principal", "principal"),
    ("group_id", "group"),
    ("last_seen", "last seen"),
    ("silent", "state"),
    ("active_alerts", "active alerts"),
)


def _inventory_row(row: dict[str, Any]) -> list[str]:
    software = label_pair(row["client_software_name"], row["client_software_version"], " ")
    address = label_pair(row["client_source_address"], row["client_source_port"], ":")
    if row["terminated"]:
        state = "<span class='badge ok'>terminated</span>"
    elif row["silent"]:
        state = "<span class='badge bad'>silent</span>"
    else:
        state = "<span class='badge ok'>pushing</span>"
    alerts = row["active_alerts"]
    alert_cell = f"<span class='badge bad'>{alerts}</span>" if alerts else "0"
    return [
        client_link(row["client_instance_id"], row["client_id"] or "(none)"),
        _short_id(row["client_instance_id"] or ""),
        escape(software),
        escape(address),
        escape(row["principal"] or ""),
        escape(row["group_id"] or ""),
        when(row["last_seen"]),
        state,
        alert_cell,
    ]


def _short_id(instance_id: str) -> str:
    # Full ids make the table too wide to read; the title and the search keep all of it.
    shown = instance_id if len(instance_id) <= 13 else instance_id[:8] + "…"
    return f'<code title="{escape(instance_id)}">{escape(shown)}</code>'


def inventory(page: InventoryPage) -> str:
    """The client inventory: search box, sortable headers, one page of rows, pager."""
    q = page.query

    def href(**change: Any) -> str:
        params = {"q": q.search, "sort": q.sort, "desc": int(q.descending), "page": q.page}
        params.update(change)
        return "/?" + urlencode(params)

    headers = []
    for column, label in _INVENTORY_HEADERS:
        arrow = (" ▼" if q.descending else " ▲") if column == q.sort else ""
        flip = not q.descending if column == q.sort else column in ("last_seen", "active_alerts")
        link = href(sort=column, desc=int(flip), page=1)
        headers.append(f'<a href="{escape(link)}">{label}{arrow}</a>')
    form = (
        f"<form action='/' method=get><input type=search name=q value=\"{escape(q.search)}\" "
        "placeholder='client id, instance id, software, address, principal, group'>"
        f"<input type=hidden name=sort value='{escape(q.sort)}'>"
        f"<input type=hidden name=desc value='{int(q.descending)}'> <button>Search</button></form>"
    )
    summary = (
        f"<p class=muted id=summary>{page.matched} of {page.total} clients · page {q.page} of "
        f"{page.pages}</p>"
    )
    pager = []
    if q.page > 1:
        pager.append(f'<a href="{escape(href(page=q.page - 1))}">« previous</a>')
    if q.page < page.pages:
        pager.append(f'<a href="{escape(href(page=q.page + 1))}">next »</a>')
    rows = (_inventory_row(row) for row in page.rows)
    table = _table(headers, rows, "inventory")
    return layout("Clients", "/", form + summary + table + "<p>" + " · ".join(pager) + "</p>")


def client(
    instance_id: str,
    details: dict[str, Any] | None,
    charts: Sequence[Chart],
    alerts: Sequence[Alert],
    window: str,
    findings: str = "",
) -> str:
    """One client: its labels, its open findings (``findings``' HTML), its open and past
    alerts and a chart per metric."""
    parts = []
    if details is not None:
        shown = [(k, v) for k, v in details.items() if v not in (None, "") and k != "date"]
        parts.append("<dl>" + "".join(_label_item(k, v) for k, v in shown) + "</dl>")
    else:
        parts.append("<p class=muted>Not in the clients table yet.</p>")
    parts.append(findings)
    if alerts:
        parts.append("<h2>Alerts</h2>" + alert_table(alerts))
    choices = " ".join(
        f'<a href="/client/{quote(instance_id)}?window={w}">'
        f"{'<b>' + w + '</b>' if w == window else w}</a>"
        for w in WINDOWS
    )
    parts.append(f"<h2>Metrics</h2><p>Window: {choices}</p>")
    if not charts:
        parts.append("<p class=muted id=no-charts>No data points in this window.</p>")
    limits: dict[str, set[float]] = {}
    for alert in alerts:
        if alert.threshold is not None:
            limits.setdefault(alert.metric_name, set()).add(alert.threshold)
    boxes = []
    for chart in charts:
        suffix = " (per second)" if chart.is_rate else ""
        title = f"{chart.metric_name}{suffix}"
        drawn = () if chart.is_rate else sorted(limits.get(chart.metric_name, ()))
        boxes.append(
            f"<div class=chart-box><h3>{escape(title)}</h3>"
            f"{line_chart(title, chart.lines, chart.unit, drawn)}</div>"
        )
    parts.append("<div class=charts>" + "".join(boxes) + "</div>")
    if any(line.hint == BOOTSTRAP_HINT for chart in charts for line in chart.lines):
        parts.append(f"<p class=muted id=bootstrap-note>{escape(BOOTSTRAP_HINT)}</p>")
    name = (details or {}).get("client_id") or instance_id
    return layout(f"Client {name}", "/", "".join(parts))


#: Lists longer than this (standard_metrics: up to 21 names) fold behind their count,
#: so one label does not stretch the labels' box.
_FOLD_AFTER = 3


def _label_item(name: str, value: Any) -> str:
    text = escape(_text(value))
    if isinstance(value, list) and len(value) > _FOLD_AFTER:
        text = f"<details><summary>{len(value)} items</summary>{text}</details>"
    return f"<dt>{escape(name)}</dt><dd>{text}</dd>"


def _text(value: Any) -> str:
    if isinstance(value, bool):  # as the tables and JSON write them, not Python's True
        return "true" if value else "false"
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, list):  # a map's (key, value) pairs, or a list's items
        return ", ".join(
            f"{item[0]}={item[1]}" if isinstance(item, tuple) else str(item) for item in value
        )
    return str(value)


def alert_table(alerts: Sequence[Alert]) -> str:
    """Alerts with their condition, times and peak; under each, the labels KIP-714's
    proactive-monitoring workflow collects for the incident."""
    headers = ("status", "rule", "client", "condition", "peak", "started", "fired", "resolved")
    rows = []
    for alert in alerts:
        status = (
            "<span class='badge bad'>open</span>"
            if alert.is_open
            else "<span class='badge ok'>resolved</span>" + _resolution(alert.resolution)
        )
        attributes = ",".join(f"{k}={v}" for k, v in alert.attributes)
        condition = escape(alert.condition)
        if attributes:
            condition += f" <code>{escape(attributes)}</code>"
        cells = [
            status,
            escape(alert.rule),
            client_link(alert.client_instance_id, dict(alert.labels).get("client_id")),
            f"<div class=wrap>{condition}</div>",
            "" if alert.peak is None else escape(format_value(alert.peak)),
            when(alert.started_at),
            when(alert.fired_at),
            when(alert.resolved_at),
        ]
        labels = " ".join(
            f"<code>{escape(k)}={escape(v)}</code>" for k, v in alert.workflow_labels()
        )
        rows.append("<tr class=alert>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        rows.append(
            f"<tr class=labels><td></td><td colspan={len(headers) - 1}><div class=wrap>"
            f"<span class=muted>labels:</span> {labels}</div></td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in headers)
    return (
        f"<table class=alerts><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _resolution(reason: str | None) -> str:
    """Why an alert resolved, under its badge, explained on hover."""
    if not reason:
        return ""
    title = RESOLUTIONS.get(reason, "")
    return f"<br><span class=muted title='{escape(title)}'>{escape(reason)}</span>"


def alerts_page(alerts: Sequence[Alert], status: str) -> str:
    """Every alert, filtered by status (open, resolved or all)."""
    tabs = " · ".join(
        f'<a href="/alerts?status={s}">{"<b>" + s + "</b>" if s == status else s}</a>'
        for s in ("open", "resolved", "all")
    )
    shown = [a for a in alerts if status == "all" or (a.is_open == (status == "open"))]
    counts = f"{sum(a.is_open for a in alerts)} open, {sum(not a.is_open for a in alerts)} resolved"
    body = f"<p>{tabs} <span class=muted>({counts})</span></p>"
    body += alert_table(shown) if shown else "<p class=muted>No alerts.</p>"
    return layout("Alerts", "/alerts", body)


def subscriptions_page(
    subscriptions: Sequence[SubscriptionView], source: str, bootstrap: str, error: str | None
) -> str:
    """The subscriptions in force, each with the admin commands that would change it."""
    body = f"<p class=muted>Read from {escape(source)} (read-only).</p>"
    if error:
        body += f"<p class='badge bad'>{escape(error)}</p>"
    rows = [
        [
            f"<b>{escape(s.name)}</b>",
            "<br>".join(escape(m) for m in s.metrics) or "<span class=muted>(none)</span>",
            escape(s.interval_ms or ""),
            "<br>".join(escape(m) for m in s.match) or "<span class=muted>all clients</span>",
            f"<code>{escape(s.alter_command(bootstrap))}</code><br>"
            f"<code>{escape(s.delete_command(bootstrap))}</code>",
        ]
        for s in subscriptions
    ]
    headers = ("name", "metrics", "interval.ms", "match", "change with")
    body += _table(headers, rows, "subscriptions") if rows else "<p>No subscriptions.</p>"
    return layout("Subscriptions", "/subscriptions", body)


_CARDS = (
    ("push_total", "pushes/s", True),
    ("accepted_pushes_total", "accepted pushes/s", True),
    ("throttle_total", "throttles/s", True),
    ("unknown_subscription_request_total", "unknown subscriptions/s", True),
    ("instance_count", "instances tracked", False),
    ("connections", "connections", False),
)


def gateway_page(url: str | None, sample: GatewaySample | None) -> str:
    """The gateway's own counters, and rates since the previous page load."""
    if url is None or sample is None:
        body = "<p>Start the dashboard with <code>--gateway-metrics URL</code> to see them.</p>"
        return layout("Gateway", "/gateway", body)
    body = f"<p class=muted>From <code>{escape(url)}</code>.</p>"
    if sample.error:
        return layout(
            "Gateway", "/gateway", body + f"<p class='badge bad'>{escape(sample.error)}</p>"
        )
    cards = []
    for name, label, is_rate in _CARDS:
        source = sample.rates if is_rate else sample.values
        value = "–" if name not in source else format_value(source[name])
        cards.append(f"<div class=card id='card-{name}'><b>{value}</b>{label}</div>")
    body += "<div class=cards>" + "".join(cards) + "</div>"
    body += "<p class=muted>Rates are measured between two loads of this page.</p>"
    rows = [
        [f"<code>kafka_server_client_metrics_{escape(k)}</code>", format_value(v)]
        for k, v in sorted(sample.values.items())
    ]
    body += _table(("metric", "value"), rows, "gateway")
    body += _exporters_table(sample.exporters)
    return layout("Gateway", "/gateway", body)


_EXPORTER_COLUMNS = ("received", "exported", "dropped", "failed", "queue_depth")


def _exporters_table(exporters: Mapping[str, Mapping[str, float]]) -> str:
    """One row per exporter: its counters, queue depth and mean export time."""
    if not exporters:
        return ""
    rows = []
    for name, values in sorted(exporters.items()):
        count = values.get("export_seconds_count", 0.0)
        mean = values.get("export_seconds_sum", 0.0) / count * 1000 if count else None
        cells = [format_value(values[c]) if c in values else "–" for c in _EXPORTER_COLUMNS]
        rows.append(
            [f"<code>{escape(name)}</code>", *cells, "–" if mean is None else f"{mean:.2f}"]
        )
    headers = ("exporter", *(c.replace("_", " ") for c in _EXPORTER_COLUMNS), "mean export ms")
    return "<h2>Exporters</h2>" + _table(headers, rows, "exporters")
