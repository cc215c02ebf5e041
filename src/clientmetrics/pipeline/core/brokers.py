"""One broker slow for many clients: one finding about the broker, from the per-client ones.

The ``slow-broker-requests`` finding fires per client and per broker (the
point's ``node.id``). When at least ``min_clients`` clients have it open for
the same broker at the same time, the cause is the broker: ``BrokerSweep``
turns the per-client events into one ``slow-broker`` incident per broker,
firing when the count reaches ``min_clients`` and resolved when it drops
below. Alertmanager can then inhibit the per-client alerts of that broker
(docs/findings.md).

The sweep needs every client's events, so it runs where a batch's events
meet (the notifier), not in the per-instance pass; it reads nothing but
alert events and holds only the open per-client episodes. No I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.pipeline.core.findings import finding_of

__all__ = ["BROKER_FINDING", "MIN_CLIENTS", "BrokerSweep"]

#: The incident's name, and the per-client finding it is made from.
BROKER_FINDING = "slow-broker"
PER_CLIENT = "slow-broker-requests"
#: Clients that must be slow to one broker at once before the broker is the finding.
MIN_CLIENTS = 3
#: Instance ids an incident names (the count is always whole).
NAMED_CLIENTS = 20
#: librdkafka's ``node.id`` -1 is "the coordinator", whichever broker that is: not one broker.
_NOT_A_BROKER = {"-1", ""}


def node_of(event: Mapping[str, Any]) -> str | None:
    """The broker a per-client event is about: its point's ``node.id`` (or ``node_id``)."""
    attributes = event.get("attributes") or {}
    node = attributes.get("node.id", attributes.get("node_id"))
    return None if node is None or str(node) in _NOT_A_BROKER else str(node)


def _moment(event: Mapping[str, Any]) -> str:
    # ISO 8601 text in UTC sorts as time does.
    return str(event["resolved_at"] if event["status"] == "resolved" else event["fired_at"])


@dataclass
class BrokerSweep:
    """Per broker, the clients with an open ``slow-broker-requests`` episode; fed event by event."""

    min_clients: int = MIN_CLIENTS
    #: node → alert id → instance id, of open per-client episodes.
    _open: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node → when its broker incident fired.
    _firing: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.min_clients < 2:
            raise ValueError("a broker finding needs at least 2 clients")

    def feed(self, events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The broker incidents (firing, resolved) a batch of alert events (JSON form) makes."""
        out: list[dict[str, Any]] = []
        chosen = [e for e in events if _is_per_client(e) and node_of(e) is not None]
        for event in sorted(chosen, key=lambda e: (_moment(e), e["status"] == "firing")):
            node = str(node_of(event))
            episodes = self._open.setdefault(node, {})
            if event["status"] == "firing":
                episodes[str(event["alert_id"])] = str(event["client_instance_id"])
            else:
                episodes.pop(str(event["alert_id"]), None)
            clients = sorted(set(episodes.values()))
            at = _moment(event)
            if node not in self._firing and len(clients) >= self.min_clients:
                self._firing[node] = at
                out.append(self._incident(node, "firing", at, None, clients))
            elif node in self._firing and len(clients) < self.min_clients:
                out.append(self._incident(node, "resolved", self._firing.pop(node), at, clients))
            if not episodes:
                del self._open[node]
        return out

    def _incident(
        self, node: str, status: str, fired: str, resolved: str | None, clients: list[str]
    ) -> dict[str, Any]:
        key = f"{BROKER_FINDING}|{node}|{fired}"
        return {
            "kind": "broker",
            "alert_id": hashlib.sha256(key.encode()).hexdigest()[:32],
            "rule": BROKER_FINDING,
            "status": status,
            "node_id": node,
            "clients": len(clients),
            "client_instance_ids": clients[:NAMED_CLIENTS],
            "min_clients": self.min_clients,
            "fired_at": fired,
            "resolved_at": resolved,
        }


def _is_per_client(event: Mapping[str, Any]) -> bool:
    finding = finding_of(str(event.get("rule", "")))
    return finding is not None and finding.name == PER_CLIENT and event.get("kind") != "broker"
