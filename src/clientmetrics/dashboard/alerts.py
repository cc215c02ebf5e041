"""Alert episodes from the pipeline's ``alerts`` event log (``firing`` then ``resolved``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from clientmetrics.pipeline.core.incidents import KIP_LABELS
from clientmetrics.pipeline.core.schemas import ALERTS_ARROW

#: The labels KIP-714's proactive-monitoring workflow collects for an alert, in its order.
WORKFLOW_LABELS = KIP_LABELS


#: Why an alert resolved (the pipeline's ``resolution``), as the alerts page explains it.
RESOLUTIONS = {
    "cleared": "the condition stopped holding",
    "terminated": "the client closed (its terminating push)",
    "expired": "the client went silent (3 push intervals without a push)",
}


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert episode: fired once, resolved at most once."""

    alert_id: str
    rule: str
    client_instance_id: str
    metric_name: str
    attributes: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...]
    started_at: datetime | None
    fired_at: datetime | None
    resolved_at: datetime | None
    peak: float | None
    op: str
    threshold: float | None
    duration_seconds: float | None
    #: Why it resolved (``RESOLUTIONS``); None while open, or from tables older than the reason.
    resolution: str | None = None

    @property
    def is_open(self) -> bool:
        """Still firing: no ``resolved`` event seen yet."""
        return self.resolved_at is None

    @property
    def condition(self) -> str:
        """The rule's condition in KIP-714's words."""
        limit = "" if self.threshold is None else f"{self.threshold:g}"
        held = "" if self.duration_seconds is None else f" for {self.duration_seconds:g} s"
        return f"{self.metric_name} {self.op} {limit}{held}"

    def workflow_labels(self) -> list[tuple[str, str]]:
        """The proactive workflow's labels first (those present), then any others."""
        labels = dict(self.labels)
        ordered = [(name, labels.pop(name)) for name in WORKFLOW_LABELS if labels.get(name)]
        return ordered + sorted((k, v) for k, v in labels.items() if v)


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), "" if v is None else str(v)) for k, v in items))


def episodes(events: pa.Table | None) -> list[Alert]:
    """Fold ``firing``/``resolved`` events into episodes, newest first.

    A replayed batch can repeat an event; the alert id makes that harmless.
    """
    if events is None:
        return []
    present = [name for name in ALERTS_ARROW.names if name in events.column_names]
    by_id: dict[str, Alert] = {}
    for row in events.select(present).to_pylist():
        alert_id = row.get("alert_id") or ""
        previous = by_id.get(alert_id)
        resolved = row.get("resolved_at") if row.get("status") == "resolved" else None
        why = row.get("resolution") if resolved is not None else None
        if previous is not None:
            resolved, why = (
                (resolved, why) if resolved else (previous.resolved_at, previous.resolution)
            )
        by_id[alert_id] = Alert(
            alert_id=alert_id,
            rule=row.get("rule") or "",
            client_instance_id=row.get("client_instance_id") or "",
            metric_name=row.get("metric_name") or "",
            attributes=_pairs(row.get("attributes")),
            labels=_pairs(row.get("labels")),
            started_at=row.get("started_at"),
            fired_at=row.get("fired_at") or (previous.fired_at if previous else None),
            resolved_at=resolved,
            peak=row.get("peak"),
            op=row.get("op") or "",
            threshold=row.get("threshold"),
            duration_seconds=row.get("duration_seconds"),
            resolution=why,
        )
    return sorted(by_id.values(), key=_newest_first)


def _newest_first(alert: Alert) -> float:
    moment = alert.fired_at or alert.started_at
    return -moment.timestamp() if moment is not None else 0.0


def open_counts(alerts: list[Alert]) -> dict[str, int]:
    """Open alerts per client instance."""
    counts: dict[str, int] = {}
    for alert in alerts:
        if alert.is_open:
            counts[alert.client_instance_id] = counts.get(alert.client_instance_id, 0) + 1
    return counts
