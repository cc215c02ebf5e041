"""Incidents reach a real Alertmanager (Debian's package): firing, resolved, one per slow broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from clientmetrics.pipeline.core.alerts import event_lines
from clientmetrics.pipeline.core.incidents import GROUP_BY, INHIBIT
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.core.schemas import DECODED_ARROW, INVENTORY_ARROW
from clientmetrics.pipeline.jobs.notify import AlertNotifier
from tests.alertmanager_server import AlertmanagerServer, alertmanager_binary
from tests.pipeline.core.engine import EnginePass
from tests.pipeline.core.tables import table
from tests.procs import wait_for

pytestmark = pytest.mark.skipif(
    alertmanager_binary() is None, reason="needs Debian's prometheus-alertmanager package"
)

LATENCY = "org.apache.kafka.consumer.node.request.latency.avg"
RULES = parse_rules({"findings": True}).rules
CLIENTS = [f"i-{n}" for n in range(5)]
INVENTORY = table(
    INVENTORY_ARROW,
    [
        {
            "client_instance_id": client,
            "client_id": f"app-{n}",
            "client_software_name": "librdkafka",
            "client_software_version": "2.16.0",
            "client_source_address": f"10.0.0.{n}",
            "client_source_port": 50000 + n,
            "principal": "User:orders",
            "node_id": 1,
            "resource_attributes": {"group_id": "orders", "member_id": f"rdkafka-{n}"},
        }
        for n, client in enumerate(CLIENTS)
    ],
)


def _batch(engine: EnginePass, start: datetime, seconds: list[int], value: float) -> list[str]:
    """Five consumers report ``value`` ms to broker 3 (and 2 ms to broker 2) at ``seconds``."""
    rows: list[dict[str, Any]] = [
        {
            "client_instance_id": client,
            "received_at": start,
            "metric_name": LATENCY,
            "kind": "gauge",
            "event_time": start + timedelta(seconds=second),
            "value": value if node == "3" else 2.0,
            "attributes": [("node.id", node)],
        }
        for client in CLIENTS
        for second in seconds
        for node in ("2", "3")
    ]
    decoded = table(DECODED_ARROW, [{**row, "attributes": dict(row["attributes"])} for row in rows])
    return event_lines(engine.batch(decoded))


def _listed(server: AlertmanagerServer, alertname: str) -> list[dict[str, Any]]:
    """Alerts Alertmanager holds (active, inhibited or silenced; not resolved) of one name."""
    alerts: list[dict[str, Any]] = server.get("/alerts")
    return [alert for alert in alerts if alert["labels"].get("alertname") == alertname]


def test_one_slow_broker_is_one_incident_fired_then_resolved(tmp_path: Path) -> None:
    server = AlertmanagerServer(tmp_path / "am", GROUP_BY, (INHIBIT,)).start()
    try:
        notifier = AlertNotifier(None, None, alertmanager=server.url())
        # Near the wall clock: Alertmanager drops alerts whose endsAt has passed.
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
        engine = EnginePass(RULES, INVENTORY)
        lines = _batch(engine, start, [0, 60, 120], 4000.0)
        assert len(lines) == 5  # one firing finding per client, about broker 3 only
        notifier.notify_lines(lines)
        per_client = "slow-broker-requests"
        wait_for(lambda: len(_listed(server, per_client)) == 5, 60, what="five firing alerts")
        alert = next(
            a for a in _listed(server, per_client) if a["labels"]["client_instance_id"] == "i-2"
        )
        assert {
            k: alert["labels"][k]
            for k in (
                "client_id",
                "client_source_address",
                "client_source_port",
                "principal",
                "client_software_name",
                "client_software_version",
                "group_id",
                "group_member_id",
                "node_id",
                "push_node_id",
                "finding",
            )
        } == {
            "client_id": "app-2",
            "client_source_address": "10.0.0.2",
            "client_source_port": "50002",
            "principal": "User:orders",
            "client_software_name": "librdkafka",
            "client_software_version": "2.16.0",
            "group_id": "orders",
            "group_member_id": "rdkafka-2",
            "node_id": "3",
            "push_node_id": "1",
            "finding": "slow-broker-requests",
        }
        assert "broker" in alert["annotations"]["suggestion"]
        groups = [
            group
            for group in server.get("/alerts/groups")
            if group["labels"].get("alertname") == "slow-broker-requests"
        ]
        assert [(group["labels"], len(group["alerts"])) for group in groups] == [
            ({"alertname": "slow-broker-requests", "node_id": "3"}, 5)
        ]
        # And the broker's own incident, which inhibits the per-client alerts of node 3.
        (broker,) = _listed(server, "slow-broker")
        assert broker["labels"]["node_id"] == "3"
        assert broker["annotations"]["summary"] == "broker 3 is slow for 3 clients"
        assert broker["status"]["state"] == "active"
        wait_for(
            lambda: {a["status"]["state"] for a in _listed(server, per_client)} == {"suppressed"},
            60,
            what="the per-client alerts to be inhibited by the broker's",
        )

        lines = _batch(engine, start, [180], 2.0)
        assert len(lines) == 5
        assert all('"resolved"' in line for line in lines)
        notifier.notify_lines(lines)
        wait_for(
            lambda: not _listed(server, per_client) and not _listed(server, "slow-broker"),
            60,
            what="the incidents to resolve",
        )
        assert engine.alert_state.num_rows == 0
    finally:
        server.stop()
