"""One broker slow for many clients: one finding about the broker, from the per-client ones.

The ``slow-broker-requests`` finding fires per client and per broker (the
point's ``node.id``). When at least ``min_clients`` clients have it open for
the same broker at the same time, the cause is the broker: ``BrokerSweep``
turns the per-client events into one ``slow-broker`` incident per broker,
firing when the count reaches ``min_clients`` and resolved when it drops
below. Alertmanager can then inhibit the per-client alerts of that broker
(docs/findings.md).

The mirror image is one client slow to every broker: its host or its network.
``HostSweep`` turns the per-client events into one ``slow-client-host``
incident per client when it has the finding open for at least ``min_nodes``
brokers at once, carrying the client's KIP labels. Both are one ``_Sweep``:
open episodes grouped by one key (the broker, or the client) and counted by
the other.

The sweeps need every client's events, so it runs where a batch's events
meet (the notifier), not in the per-instance pass; it reads nothing but
alert events and holds only the open per-client episodes. No I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.pipeline.core.findings import finding_of
from clientmetrics.telemetry.naming import COORDINATOR

__all__ = ["BROKER_FINDING", "HOST_FINDING", "MIN_CLIENTS", "MIN_NODES", "BrokerSweep", "HostSweep"]

#: The incidents' names, and the per-client finding they are made from.
BROKER_FINDING = "slow-broker"
HOST_FINDING = "slow-client-host"
PER_CLIENT = "slow-broker-requests"
#: Clients that must be slow to one broker at once before the broker is the finding.
MIN_CLIENTS = 3
#: Brokers one client must be slow to at once before its host or network is the finding.
MIN_NODES = 2
#: Instance ids an incident names (the count is always whole).
NAMED_CLIENTS = 20
#: librdkafka's ``node.id`` -1 is "the coordinator", whichever broker that is: not one broker.
_NOT_A_BROKER = {"-1", ""}


def node_of(event: Mapping[str, Any]) -> str | None:
    """The broker a per-client event is about: its point's ``node.id`` (or ``node_id``).

    The Java client's group coordinator connection (``+1``) is about that broker (1).
    """
    attributes = event.get("attributes") or {}
    node = attributes.get("node.id", attributes.get("node_id"))
    return None if node is None or str(node) in _NOT_A_BROKER else broker_of(str(node))


def broker_of(node: str) -> str:
    """The broker id a decoded ``node.id`` names (``+1``, a coordinator connection: 1)."""
    return node.removeprefix(COORDINATOR)


def _moment(event: Mapping[str, Any]) -> str:
    # ISO 8601 text in UTC sorts as time does.
    return str(event["resolved_at"] if event["status"] == "resolved" else event["fired_at"])


@dataclass
class _Sweep:
    """Open per-client ``slow-broker-requests`` episodes grouped by one key, counted by another."""

    #: group → alert id → member, of open per-client episodes.
    _open: dict[str, dict[str, str]] = field(default_factory=dict)
    #: group → when its incident fired.
    _firing: dict[str, str] = field(default_factory=dict)

    @property
    def least(self) -> int:
        """Members a group needs at once for its incident."""
        raise NotImplementedError

    def _group_member(self, event: Mapping[str, Any], node: str) -> tuple[str, str]:
        raise NotImplementedError

    def _incident(
        self, group: str, status: str, fired: str, resolved: str | None, members: list[str]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _seen(self, group: str, event: Mapping[str, Any]) -> None:
        """A firing per-client event of ``group`` (a sweep may keep what it needs of it)."""

    def _forget(self, group: str) -> None:
        """``group`` has no open episode left."""

    def feed(self, events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The incidents (firing, resolved) a batch of alert events (JSON form) makes."""
        out: list[dict[str, Any]] = []
        chosen = [e for e in events if _is_per_client(e) and node_of(e) is not None]
        for event in sorted(chosen, key=lambda e: (_moment(e), e["status"] == "firing")):
            group, member = self._group_member(event, str(node_of(event)))
            episodes = self._open.setdefault(group, {})
            if event["status"] == "firing":
                episodes[str(event["alert_id"])] = member
                self._seen(group, event)
            else:
                episodes.pop(str(event["alert_id"]), None)
            members = sorted(set(episodes.values()))
            at = _moment(event)
            if group not in self._firing and len(members) >= self.least:
                self._firing[group] = at
                out.append(self._incident(group, "firing", at, None, members))
            elif group in self._firing and len(members) < self.least:
                out.append(self._incident(group, "resolved", self._firing.pop(group), at, members))
            if not episodes:
                del self._open[group]
                self._forget(group)
        return out


def _incident_id(name: str, group: str, fired: str) -> str:
    return hashlib.sha256(f"{name}|{group}|{fired}".encode()).hexdigest()[:32]


@dataclass
class BrokerSweep(_Sweep):
    """Per broker, the clients with an open ``slow-broker-requests`` episode; fed event by event."""

    min_clients: int = MIN_CLIENTS

    @property
    def least(self) -> int:
        return self.min_clients

    def __post_init__(self) -> None:
        if self.min_clients < 2:
            raise ValueError("a broker finding needs at least 2 clients")

    def _group_member(self, event: Mapping[str, Any], node: str) -> tuple[str, str]:
        return node, str(event["client_instance_id"])

    def _incident(
        self, group: str, status: str, fired: str, resolved: str | None, members: list[str]
    ) -> dict[str, Any]:
        return {
            "kind": "broker",
            "alert_id": _incident_id(BROKER_FINDING, group, fired),
            "rule": BROKER_FINDING,
            "status": status,
            "node_id": group,
            "clients": len(members),
            "client_instance_ids": members[:NAMED_CLIENTS],
            "min_clients": self.min_clients,
            "fired_at": fired,
            "resolved_at": resolved,
        }


@dataclass
class HostSweep(_Sweep):
    """Per client, the brokers it has an open ``slow-broker-requests`` episode for."""

    min_nodes: int = MIN_NODES
    #: client → its latest firing per-client event's labels (one per client with open episodes).
    _labels: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def least(self) -> int:
        return self.min_nodes

    def __post_init__(self) -> None:
        if self.min_nodes < 2:
            raise ValueError("a client-host finding needs at least 2 brokers")

    def _group_member(self, event: Mapping[str, Any], node: str) -> tuple[str, str]:
        return str(event["client_instance_id"]), node

    def _seen(self, group: str, event: Mapping[str, Any]) -> None:
        if event.get("labels"):  # the latest labels win (a new group member id, say)
            self._labels[group] = event["labels"]

    def _forget(self, group: str) -> None:
        self._labels.pop(group, None)

    def _incident(
        self, group: str, status: str, fired: str, resolved: str | None, members: list[str]
    ) -> dict[str, Any]:
        return {
            "kind": "client",
            "alert_id": _incident_id(HOST_FINDING, group, fired),
            "rule": HOST_FINDING,
            "status": status,
            "client_instance_id": group,
            "labels": dict(self._labels.get(group, {})),
            "node_ids": members,
            "min_nodes": self.min_nodes,
            "fired_at": fired,
            "resolved_at": resolved,
        }


def _is_per_client(event: Mapping[str, Any]) -> bool:
    finding = finding_of(str(event.get("rule", "")))
    return (
        finding is not None
        and finding.name == PER_CLIENT
        and event.get("kind") not in ("broker", "client")
    )
