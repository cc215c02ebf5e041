"""The "fleet" page: every client, pushing or not, grouped by principal.

The rule is the pipeline core's (``pipeline.core.fleet``); this module only reads
its inputs — the gateways' connection records in the landing zone and the
pipeline's clients table — and renders the result.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
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

__all__ = ["FleetSource", "fleet_page"]

_STATES = {
    "pushes": "pushes",
    "cannot": "cannot push",
    "does_not": "could, does not",
}
_REASONS = {
    "no_subscription": "no subscription matches it",
    "telemetry_off": "telemetry turned off (never asked for a subscription)",
}


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

    def fleet(self) -> tuple[pa.Table, bool]:
        """The fleet table, and whether any connection records were there to join."""
        connections = read_connections(self._connections)
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


def _row(row: dict[str, Any]) -> str:
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
        "</tr>"
    )


def fleet_page(fleet: pa.Table, connections_seen: bool) -> str:
    """Every client, grouped by principal, with its coverage state."""
    if connections_seen:
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
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "client.id",
            "software",
            "address",
            "coverage",
            "why",
            "instances",
            "connections",
            "pushes",
            "last seen (UTC)",
        )
    )
    sections = []
    rows = fleet.to_pylist()
    for principal in sorted({str(r["principal"]) for r in rows}):
        mine = [r for r in rows if r["principal"] == principal]
        sections.append(
            f"<h2>{escape(principal)} <span class=muted>({len(mine)})</span></h2>"
            f"<table class=fleet><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(_row(r) for r in mine)}</tbody></table>"
        )
    counts = {state: sum(r["coverage"] == state for r in rows) for state in _STATES}
    summary = ", ".join(f"{n} {_STATES[state]}" for state, n in counts.items())
    body = f"<p class=muted id=summary>{note} {len(rows)} clients: {summary}.</p>" + (
        "".join(sections) or "<p class=muted>No clients yet.</p>"
    )
    return layout("Fleet", "/fleet", body)
