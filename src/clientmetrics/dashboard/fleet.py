"""The "fleet" page: every client, pushing or not, grouped by principal.

The rule is the pipeline core's (``pipeline.core.fleet``); this module only reads
its inputs — the gateways' connection records in the landing zone and the
pipeline's clients table — and renders the result. Each row's usage on the current
UTC day comes from the same usage table the export writes (``pipeline.core.usage``):
counted by the proxy where it was (exact), else from the client's pushed metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path
from typing import Any

import pyarrow as pa

from clientmetrics.dashboard.inventory import LANDING_LABELS, with_landed_clients
from clientmetrics.dashboard.pages import known, layout
from clientmetrics.dashboard.series import landing_reader
from clientmetrics.dashboard.tables import TableReader
from clientmetrics.pipeline.core.fleet import (
    CONNECTION_ARROW,
    conform_connections,
    fleet_table,
    landed_connections,
)
from clientmetrics.pipeline.core.schemas import CLIENTS_ARROW, LANDED_FILES
from clientmetrics.pipeline.core.usage import (
    USAGE_POINT_COLUMNS,
    Measures,
    fleet_usage,
    usage_table,
)

__all__ = ["FleetSource", "FleetView", "fleet_page"]

_STATES = {
    "pushes": "pushes",
    "cannot": "cannot push",
    "does_not": "could, does not",
}
_REASONS = {
    "no_subscription": "no subscription matches it",
    "telemetry_off": "telemetry turned off (never asked for a subscription)",
}


_SOURCES = {"proxy": "proxy (exact)", "pushed_metrics": "pushed metrics"}


@dataclass(frozen=True, slots=True)
class FleetView:
    """What the page shows: the fleet, and each row's usage on one UTC day."""

    fleet: pa.Table
    connections_seen: bool
    day: str
    #: Per fleet row: (source, measures), or None when nothing counted it that day.
    usage: list[tuple[str, Measures] | None]
    #: Per principal and source: usage no row claims.
    unclaimed: dict[str, dict[str, Measures]]


class FleetSource:
    """Reads what the fleet is made of: connection records and the clients table."""

    def __init__(
        self, data_dir: Path, tables: TableReader, clock: Callable[[], float], recent_s: float
    ) -> None:
        self._connections = TableReader(landed_connections(data_dir), pattern=LANDED_FILES)
        self._landing = landing_reader(data_dir)
        self._tables = tables
        self._clock = clock
        self._recent_s = recent_s
        #: One reader per day of the points table read (today and the day before).
        self._points: dict[str, TableReader] = {}

    def fleet(self) -> tuple[pa.Table, bool]:
        """The fleet table, and whether any connection records were there to join."""
        return self._fleet(read_connections(self._connections))

    def view(self) -> FleetView:
        """The fleet and its usage on the current UTC day (by the export's rule)."""
        connections = read_connections(self._connections)
        fleet, seen = self._fleet(connections)
        now = datetime.fromtimestamp(self._clock(), UTC)
        day = now.strftime("%Y-%m-%d")
        # The day before too: a counter's growth today starts from its last value then.
        days = [(now - timedelta(days=1)).strftime("%Y-%m-%d"), day]
        points = [p for d in days if (p := self._points_of(d)) is not None]
        usage = usage_table(
            pa.concat_tables(points, promote_options="permissive") if points else None, connections
        )
        rows, unclaimed = fleet_usage(fleet, usage, day)
        return FleetView(fleet, seen, day, rows, unclaimed)

    def _points_of(self, day: str) -> pa.Table | None:
        reader = self._points.get(day)
        if reader is None:
            if len(self._points) >= 4:  # days gone by are not read again
                self._points.clear()
            root = self._tables.root / "points"
            reader = self._points[day] = TableReader(root, pattern=f"date={day}/*.parquet")
        return reader.read("", USAGE_POINT_COLUMNS)

    def _fleet(self, connections: pa.Table) -> tuple[pa.Table, bool]:
        # The pipeline lags the gateway: recent landed pushes top the clients table up,
        # as on the inventory page.
        landed = self._landing.read_recent(LANDING_LABELS, self._clock() - self._recent_s)
        clients = with_landed_clients(self._tables.read("clients"), landed)
        seen = connections.num_rows > 0
        return (
            fleet_table(
                connections,
                clients if clients is not None else CLIENTS_ARROW.empty_table(),
            ),
            seen,
        )


def read_connections(records: TableReader) -> pa.Table:
    """Every landed connection record, as ``CONNECTION_ARROW`` (older files included)."""
    return conform_connections(records.read("", CONNECTION_ARROW.names))


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _amount(records: int | None, size: int | None) -> str:
    """``records rec · bytes B``, exact (what is billed); a measure not reported is —."""
    if records is None and size is None:
        return "—"
    shown = "—" if records is None else f"{records:,}"
    return f"{shown} rec · {'—' if size is None else f'{size:,}'} B"


def _usage_cells(usage: tuple[str, Measures] | None) -> str:
    if usage is None:
        return "<td class=produced>—</td><td class=consumed>—</td><td class=source>—</td>"
    source, used = usage
    produced = _amount(used.get("produced_records"), used.get("produced_bytes"))
    consumed = _amount(used.get("consumed_records"), used.get("consumed_bytes"))
    return (
        f"<td class=produced>{produced}</td><td class=consumed>{consumed}</td>"
        f"<td class=source>{_SOURCES.get(source, escape(source))}</td>"
    )


def _row(row: dict[str, Any], usage: tuple[str, Measures] | None) -> str:
    coverage = str(row["coverage"])
    reason = str(row["reason"] or "")
    defects = ", ".join(str(d) for d in row["defects"] or [])
    instances = row["instances"] or []
    return (
        f"<tr class={coverage} data-client-id='{escape(str(row['client_id']))}'>"
        f"<td>{escape(known(str(row['client_id']) or None))}</td>"
        f"<td><b>{escape(known(str(row['client_software_name'])))}</b> "
        f"{escape(known(str(row['client_software_version'])))}"
        f"{f' <span class=defect>{escape(defects)}</span>' if defects else ''}</td>"
        f"<td>{escape(str(row['client_source_address']))}</td>"
        f"<td class=coverage>{_STATES.get(coverage, coverage)}</td>"
        f"<td class=wrap>{escape(_REASONS.get(reason, reason))}</td>"
        f"<td>{len(instances)}</td>"
        f"<td>{row['connections']}</td><td>{row['pushes']}</td>"
        f"<td>{_when(row['last_seen_ms'])}</td>"
        f"{_usage_cells(usage)}"
        "</tr>"
    )


def _principal_usage(
    shown: list[tuple[str, Measures] | None], unclaimed: dict[str, Measures]
) -> str:
    """A principal's usage today, per source: its rows' and what no row claims."""
    totals: dict[str, Measures] = {}
    for source, used in [u for u in shown if u is not None] + list(unclaimed.items()):
        into = totals.setdefault(source, {})
        for name, value in used.items():
            if value is not None:
                into[name] = (into.get(name) or 0) + value
    parts = [
        f"produced {_amount(t.get('produced_records'), t.get('produced_bytes'))}, consumed "
        f"{_amount(t.get('consumed_records'), t.get('consumed_bytes'))} ({_SOURCES.get(s, s)})"
        for s, t in sorted(totals.items())
    ]
    if not parts:
        return "nothing counted"
    if unclaimed:
        parts.append("with usage of clients not on a row (a client id several rows share)")
    return "; ".join(parts)


_HEAD = (
    "client.id",
    "software",
    "address",
    "coverage",
    "why",
    "instances",
    "connections",
    "pushes",
    "last seen (UTC)",
    "produced today",
    "consumed today",
    "usage from",
)


def fleet_page(view: FleetView) -> str:
    """Every client, grouped by principal, with its coverage state and its usage today."""
    if view.connections_seen:
        note = (
            "Every client the gateway served (its connection records), joined with the "
            "clients that push."
        )
    else:
        note = (
            "No connection records: this deployment has no gateway in front of its "
            "clients (the broker plugin alone), so this page sees <b>only clients that "
            "push</b>. Clients that cannot or do not push are not shown."
        )
    note += (
        f" Usage is the UTC day {view.day}'s: records and record-batch bytes, counted by "
        "the proxy where it relays the client (exact), else from the client's pushed metrics."
    )
    head = "".join(f"<th>{h}</th>" for h in _HEAD)
    sections = []
    rows = list(zip(view.fleet.to_pylist(), view.usage, strict=True))
    for principal in sorted({str(r["principal"]) for r, _ in rows}):
        mine = [(r, u) for r, u in rows if r["principal"] == principal]
        total = _principal_usage([u for _, u in mine], view.unclaimed.get(principal, {}))
        sections.append(
            f"<h2>{escape(principal)} <span class=muted>({len(mine)})</span></h2>"
            f"<p class='muted principal-usage'>Today: {escape(total)}.</p>"
            f"<table class=fleet><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(_row(r, u) for r, u in mine)}</tbody></table>"
        )
    counts = {state: sum(r["coverage"] == state for r, _ in rows) for state in _STATES}
    summary = ", ".join(f"{n} {_STATES[state]}" for state, n in counts.items())
    body = f"<p class=muted id=summary>{note} {len(rows)} clients: {summary}.</p>" + (
        "".join(sections) or "<p class=muted>No clients yet.</p>"
    )
    return layout("Fleet", "/fleet", body)
