"""Alert events as incidents: the labels KIP-714's proactive workflow collects, for Alertmanager.

An alert event (a row of the alerts table, as ``alerts.event_lines`` writes
it) already carries its client's labels (``clients.client_labels``: the
broker's labels of the latest push and the client's resource attributes).
This turns one into a Prometheus Alertmanager v2 alert: the KIP's label set
under the KIP's label names, the rule (and, for a finding, the finding's
name) as ``alertname``, the per-broker ``node_id`` of the metric the rule
read, and the finding's meaning and suggestion as annotations. No I/O.

Grouping: Alertmanager groups by ``alertname`` and ``node_id``
(``GROUP_BY``), so one slow broker reported by many clients is one incident;
the broker's own incident (``brokers.BrokerSweep``, ``broker_alert``) can
inhibit its per-client alerts (``INHIBIT``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from clientmetrics.pipeline.core.findings import finding_of

__all__ = ["FIRING_HOLD", "GROUP_BY", "KIP_LABELS", "alertmanager_alert", "host_alert"]

#: The labels KIP-714's proactive-monitoring workflow collects for an alert, in its order
#: (``member_id`` is librdkafka's spelling of the KIP's ``group_member_id``).
KIP_LABELS = (
    "client_instance_id",
    "client_id",
    "client_source_address",
    "client_source_port",
    "node_id",
    "principal",
    "tenant",
    "client_software_name",
    "client_software_version",
    "group_id",
    "group_instance_id",
    "member_id",
    "transactional_id",
)

#: What Alertmanager should group incidents by: one finding about one broker is one incident.
GROUP_BY = ("alertname", "node_id")

#: Alertmanager's inhibit rule: a broker's own incident silences its per-client alerts.
INHIBIT = {
    "source_matchers": ['alertname="slow-broker"'],
    "target_matchers": ['alertname="slow-broker-requests"'],
    "equal": ["node_id"],
}
#: And a client's own host incident silences its per-broker alerts.
INHIBIT_HOST = {
    "source_matchers": ['alertname="slow-client-host"'],
    "target_matchers": ['alertname="slow-broker-requests"'],
    "equal": ["client_instance_id"],
}

#: A firing alert's ``endsAt``: the pipeline announces an event once, so the incident must
#: not time out in Alertmanager before its ``resolved`` event comes.
FIRING_HOLD = timedelta(hours=24)

_LABEL_NAME = re.compile(r"[^A-Za-z0-9_]")


def _label_name(name: str) -> str:
    cleaned = _LABEL_NAME.sub("_", name)
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"_{cleaned}"


def incident_labels(event: Mapping[str, Any]) -> dict[str, str]:
    """The KIP's label set of an alert event, under Alertmanager-valid names.

    ``node_id`` is the broker the metric is about (the point's ``node.id`` or
    ``node_id`` attribute); the broker that received the push is
    ``push_node_id``. ``group_member_id`` is the latest member id the client
    sent (``group_member_id``, or librdkafka's ``member_id``).
    """
    own: Mapping[str, str | None] = event.get("labels") or {}
    attributes: Mapping[str, str | None] = event.get("attributes") or {}
    rule = str(event["rule"])
    finding = finding_of(rule)
    labels: dict[str, str | None] = {
        "alertname": finding.name if finding else rule,
        "rule": rule,
        "severity": "warning",
        "metric_name": event.get("metric_name"),
    }
    if finding is not None:
        labels["finding"] = finding.name
    for name in KIP_LABELS:
        if name not in ("node_id", "member_id"):
            labels[name] = own.get(name)
    labels["client_instance_id"] = event.get("client_instance_id") or own.get("client_instance_id")
    labels["group_member_id"] = own.get("group_member_id") or own.get("member_id")
    labels["push_node_id"] = own.get("node_id")
    labels["node_id"] = attributes.get("node.id") or attributes.get("node_id")
    return {_label_name(k): str(v) for k, v in labels.items() if v not in (None, "")}


def _moment(value: object) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def alertmanager_alert(event: Mapping[str, Any]) -> dict[str, Any]:
    """One alert event as an Alertmanager v2 ``postableAlert``.

    A ``firing`` event starts at its firing and is held for ``FIRING_HOLD``;
    a ``resolved`` one ends at its resolution (Alertmanager then resolves the
    alert with the same labels).
    """
    finding = finding_of(str(event["rule"]))
    fired = _moment(event["fired_at"])
    if event["status"] == "resolved" and event.get("resolved_at") is not None:
        ends = _moment(event["resolved_at"])
    else:
        ends = fired + FIRING_HOLD
    annotations = {
        "alert_id": event.get("alert_id"),
        "summary": finding.summary if finding else f"rule {event['rule']} fired",
        "description": finding.meaning if finding else None,
        "suggestion": finding.suggestion if finding else None,
        "condition": f"{event.get('op')} {event.get('threshold')} "
        f"for {event.get('duration_seconds')} s",
        "peak": None if event.get("peak") is None else str(event["peak"]),
        "condition_since": None
        if event.get("started_at") is None
        else _rfc3339(_moment(event["started_at"])),
        "resolution": event.get("resolution"),
    }
    return {
        "labels": incident_labels(event),
        "annotations": {k: str(v) for k, v in annotations.items() if v is not None},
        "startsAt": _rfc3339(fired),
        "endsAt": _rfc3339(ends),
    }


def broker_alert(incident: Mapping[str, Any]) -> dict[str, Any]:
    """A broker incident (``brokers.BrokerSweep``) as an Alertmanager v2 ``postableAlert``."""
    per_client = finding_of("slow-broker-requests/producer")
    fired = _moment(incident["fired_at"])
    resolved = incident.get("resolved_at")
    ends = _moment(resolved) if resolved is not None else fired + FIRING_HOLD
    clients = ", ".join(incident.get("client_instance_ids") or [])
    annotations = {
        "alert_id": incident["alert_id"],
        "summary": f"broker {incident['node_id']} is slow for {incident['clients']} clients",
        "description": "At least "
        f"{incident['min_clients']} clients had slow-broker-requests open for this node_id at "
        "the same time: the broker is the cause, not each client.",
        "suggestion": per_client.suggestion if per_client else None,
        "clients": clients or None,
    }
    return {
        "labels": {
            "alertname": str(incident["rule"]),
            "finding": str(incident["rule"]),
            "node_id": str(incident["node_id"]),
            "severity": "critical",
        },
        "annotations": {k: str(v) for k, v in annotations.items() if v is not None},
        "startsAt": _rfc3339(fired),
        "endsAt": _rfc3339(ends),
    }


def host_alert(incident: Mapping[str, Any]) -> dict[str, Any]:
    """A client-host incident (``brokers.HostSweep``) as an Alertmanager v2 ``postableAlert``.

    It carries the client's KIP labels (those of its per-client events) but no
    ``node_id``: it is about the client's host or network, not one broker.
    """
    per_client = finding_of("slow-broker-requests/producer")
    fired = _moment(incident["fired_at"])
    resolved = incident.get("resolved_at")
    ends = _moment(resolved) if resolved is not None else fired + FIRING_HOLD
    labels = incident_labels(
        {
            "rule": incident["rule"],
            "client_instance_id": incident["client_instance_id"],
            "labels": incident.get("labels") or {},
        }
    )
    labels.update(finding=str(incident["rule"]), severity="warning")
    nodes = ", ".join(incident.get("node_ids") or [])
    annotations = {
        "alert_id": incident["alert_id"],
        "summary": f"client {incident['client_instance_id']} is slow to every broker it "
        f"uses ({nodes})",
        "description": f"The client had slow-broker-requests open for at least "
        f"{incident['min_nodes']} brokers at the same time: its host or its network is the "
        "cause, not each broker.",
        "suggestion": "Check the client's host (CPU, GC pauses, memory) and its network path "
        "to the cluster (latency, packet loss, a proxy or NAT in between)"
        + (f"; else: {per_client.suggestion}" if per_client else "."),
        "node_ids": nodes or None,
    }
    return {
        "labels": labels,
        "annotations": {k: str(v) for k, v in annotations.items() if v is not None},
        "startsAt": _rfc3339(fired),
        "endsAt": _rfc3339(ends),
    }
