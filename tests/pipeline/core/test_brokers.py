"""One broker slow for many clients is one finding about the broker."""

from __future__ import annotations

from typing import Any

import pytest

from clientmetrics.pipeline.core.brokers import BrokerSweep, HostSweep
from clientmetrics.pipeline.core.incidents import broker_alert, host_alert


def _event(client: str, node: str, status: str, second: int, rule: str = "") -> dict[str, Any]:
    at = f"2026-11-21T12:{second // 60:02d}:{second % 60:02d}+00:00"
    return {
        "alert_id": f"{client}-{node}",
        "rule": rule or "slow-broker-requests/consumer",
        "status": status,
        "client_instance_id": client,
        "attributes": {"node.id": node},
        "fired_at": "2026-11-21T12:00:00+00:00" if status == "resolved" else at,
        "resolved_at": at if status == "resolved" else None,
    }


def test_three_clients_slow_to_one_broker_make_one_incident_until_two_recover() -> None:
    sweep = BrokerSweep(min_clients=3)
    first = sweep.feed([_event("a", "3", "firing", 120), _event("b", "3", "firing", 130)])
    assert first == []  # two clients: still per-client
    # A third client, and one slow to another broker (never a broker finding).
    (fired,) = sweep.feed([_event("c", "3", "firing", 140), _event("d", "2", "firing", 140)])
    assert (fired["status"], fired["node_id"], fired["clients"], fired["fired_at"]) == (
        "firing", "3", 3, "2026-11-21T12:02:20+00:00",
    )  # fmt: skip
    assert fired["client_instance_ids"] == ["a", "b", "c"]
    # A fourth joins: no second incident. Then one leaves: still 3.
    assert sweep.feed([_event("e", "3", "firing", 150), _event("a", "3", "resolved", 200)]) == []
    (resolved,) = sweep.feed([_event("b", "3", "resolved", 260)])
    assert (resolved["status"], resolved["clients"], resolved["resolved_at"]) == (
        "resolved", 2, "2026-11-21T12:04:20+00:00",
    )  # fmt: skip
    assert resolved["alert_id"] == fired["alert_id"]


def test_other_findings_and_the_coordinator_node_never_count() -> None:
    sweep = BrokerSweep(min_clients=2)
    events = [
        _event("a", "-1", "firing", 60),
        _event("b", "-1", "firing", 60),
        _event("a", "4", "firing", 60, rule="slow-commits"),
        _event("b", "4", "firing", 60, rule="slow-commits"),
    ]
    assert sweep.feed(events) == []


def test_one_batch_with_the_whole_story_gives_firing_then_resolved_in_time_order() -> None:
    sweep = BrokerSweep(min_clients=2)
    events = [
        _event("b", "5", "resolved", 300),
        _event("a", "5", "firing", 60),
        _event("b", "5", "firing", 90),
    ]
    assert [i["status"] for i in sweep.feed(events)] == ["firing", "resolved"]


def test_the_broker_incident_for_alertmanager_names_the_node() -> None:
    sweep = BrokerSweep(min_clients=2)
    (fired,) = sweep.feed([_event("a", "7", "firing", 60), _event("b", "7", "firing", 60)])
    alert = broker_alert(fired)
    assert alert["labels"] == {
        "alertname": "slow-broker", "finding": "slow-broker", "node_id": "7",
        "severity": "critical",
    }  # fmt: skip
    assert alert["annotations"]["summary"] == "broker 7 is slow for 2 clients"
    assert alert["annotations"]["clients"] == "a, b"
    assert (alert["startsAt"], alert["endsAt"]) == ("2026-11-21T12:01:00Z", "2026-11-22T12:01:00Z")


def test_a_sweep_needs_two_clients_at_least() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        BrokerSweep(min_clients=1)
    with pytest.raises(ValueError, match="at least 2"):
        HostSweep(min_nodes=1)


def test_one_client_slow_to_two_brokers_is_one_host_incident_with_its_labels() -> None:
    sweep = HostSweep(min_nodes=2)
    labels = {"client_id": "billing", "principal": "User:billing", "node_id": "1"}
    slow_1 = {**_event("a", "1", "firing", 60), "labels": labels}
    # Slow to node 1 and to the coordinator (-1, no one broker): not yet its host.
    assert (
        sweep.feed([slow_1, _event("a", "-1", "firing", 60), _event("b", "2", "firing", 60)]) == []
    )
    (fired,) = sweep.feed([_event("a", "2", "firing", 90)])
    assert (fired["status"], fired["client_instance_id"], fired["node_ids"]) == (
        "firing", "a", ["1", "2"],
    )  # fmt: skip
    alert = host_alert(fired)
    assert alert["labels"] == {
        "alertname": "slow-client-host", "finding": "slow-client-host", "rule": "slow-client-host",
        "severity": "warning", "client_instance_id": "a", "client_id": "billing",
        "principal": "User:billing", "push_node_id": "1",
    }  # fmt: skip
    assert alert["annotations"]["summary"] == "client a is slow to every broker it uses (1, 2)"
    # Node 1 recovers: one broker left, the host incident resolves (same id); b never counted.
    (resolved,) = sweep.feed([_event("a", "1", "resolved", 200)])
    assert (resolved["status"], resolved["alert_id"]) == ("resolved", fired["alert_id"])
    assert host_alert(resolved)["endsAt"] == "2026-11-21T12:03:20Z"


def test_a_slow_broker_for_many_clients_is_no_host_incident() -> None:
    # Five clients slow to broker 3 only: the broker's incident, not five hosts.
    events = [_event(c, "3", "firing", 60) for c in "abcde"]
    assert HostSweep().feed(events) == []
    assert [i["node_id"] for i in BrokerSweep().feed(events)] == ["3"]


def test_a_java_coordinator_connection_is_about_its_broker() -> None:
    """Kafka 4.4's Java client names its group coordinator connection ``+1`` (broker 1):
    slow there, it counts for broker 1; -1 (librdkafka's coordinator) for no broker."""
    sweep = BrokerSweep(min_clients=2)
    assert sweep.feed([_event("a", "+1", "firing", 120), _event("c", "-1", "firing", 120)]) == []
    (fired,) = sweep.feed([_event("b", "1", "firing", 130)])
    assert (fired["node_id"], fired["clients"]) == ("1", 2)
