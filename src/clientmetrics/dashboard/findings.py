"""The findings page, and a client's findings: what the shipped catalogue says is wrong.

A finding's episodes are alert episodes (``dashboard.alerts``) whose rule was
made from the catalogue (``core.findings.finding_of``); nothing is computed
here that the pipeline did not. The page groups the open ones by finding:
which clients, since when (the earliest condition start of its open
episodes), what it means and the change to suggest; then the catalogue
itself, so an operator sees what runs and how it is tuned (docs/findings.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape

from clientmetrics.dashboard.alerts import Alert
from clientmetrics.dashboard.pages import _table, client_link, layout, when
from clientmetrics.pipeline.core.findings import Finding, catalogue, finding_of

__all__ = ["client_findings", "findings_page"]

#: Affected clients a finding's row links to (the count is always whole).
SHOWN_CLIENTS = 10


@dataclass
class _Open:
    finding: Finding
    clients: set[str] = field(default_factory=set)
    since: datetime | None = None
    nodes: set[str] = field(default_factory=set)


#: What a condition judges, when it is not the metric's value (``findings.JUDGED_COLUMNS``).
_JUDGES = {
    "rate": " (rate)",
    "profile": " (spreads from the client's own profile)",
    "cohort": " (spreads from its cohort's profile)",
}


def _open_by_finding(alerts: Sequence[Alert]) -> list[_Open]:
    grouped: dict[str, _Open] = {}
    for alert in alerts:
        finding = finding_of(alert.rule)
        if finding is None or not alert.is_open:
            continue
        entry = grouped.setdefault(finding.name, _Open(finding))
        entry.clients.add(alert.client_instance_id)
        start = alert.started_at or alert.fired_at
        if start is not None and (entry.since is None or start < entry.since):
            entry.since = start
        node = dict(alert.attributes).get("node.id") or dict(alert.attributes).get("node_id")
        if node not in (None, "", "-1"):
            entry.nodes.add(str(node))
    # The most widespread first: one broker slow for many shows at the top.
    return sorted(grouped.values(), key=lambda e: (-len(e.clients), e.finding.name))


def _clients_cell(clients: set[str]) -> str:
    ordered = sorted(clients)
    links = ", ".join(client_link(c) for c in ordered[:SHOWN_CLIENTS])
    more = f" and {len(ordered) - SHOWN_CLIENTS} more" if len(ordered) > SHOWN_CLIENTS else ""
    return f"<b>{len(ordered)}</b>: {links}{more}"


def _finding_cell(finding: Finding) -> str:
    return f"<code>{escape(finding.name)}</code><br>{escape(finding.summary)}"


def findings_page(alerts: Sequence[Alert]) -> str:
    """Open findings by kind (affected clients, since when, suggestion), then the catalogue."""
    found = _open_by_finding(alerts)
    noun = "finding" if len(found) == 1 else "findings"
    parts = [f"<p id=summary>{len(found)} {noun} open.</p>"]
    if found:
        rows = [
            [
                _finding_cell(entry.finding),
                _clients_cell(entry.clients),
                ", ".join(sorted(entry.nodes)) or "",
                when(entry.since),
                escape(entry.finding.suggestion),
            ]
            for entry in found
        ]
        headers = ("finding", "affected clients", "brokers (node_id)", "since", "suggestion")
        parts.append(_table(headers, rows, "findings"))
    else:
        parts.append("<p class=muted>No finding is open.</p>")
    parts.append(
        "<h2>Catalogue</h2><p class=muted>Runs when the rules file says "
        "<code>findings = true</code>; <code>[finding.NAME]</code> tables tune "
        "(<code>condition</code>) or disable (<code>enabled = false</code>) one "
        "(docs/findings.md).</p>"
    )
    catalogue_rows = [
        [
            _finding_cell(finding),
            escape(", ".join(m.removeprefix("org.apache.kafka.") for m in finding.metrics))
            + _JUDGES.get(finding.on, ""),
            escape(finding.condition),
            escape(finding.meaning),
        ]
        for finding in catalogue()
    ]
    parts.append(_table(("finding", "reads", "condition", "meaning"), catalogue_rows, "findings"))
    return layout("Findings", "/findings", "".join(parts))


def client_findings(alerts: Sequence[Alert]) -> str:
    """A client's open findings with their suggestions (empty when it has none)."""
    found = _open_by_finding(alerts)
    if not found:
        return ""
    rows = [
        [
            _finding_cell(entry.finding),
            when(entry.since),
            escape(entry.finding.meaning),
            escape(entry.finding.suggestion),
        ]
        for entry in found
    ]
    table = _table(("finding", "since", "meaning", "suggestion"), rows, "findings")
    return f"<h2>Findings</h2>{table}"
