"""The fleet: connection records joined with the clients table, one row per client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.fleet import FLEET_ARROW, fleet_table, parse_support, support_for
from clientmetrics.pipeline.core.schemas import CLIENTS_ARROW
from clientmetrics.telemetry.connections import ClientKey, ConnectionTable, records_to_arrow

JAVA_ID = "5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b"
PLUGIN_ID = "0d4c2b1a-0000-4000-8000-00000000000a"


def _key(
    client_id: str, name: str, version: str, instance: str = "", asked: bool = False
) -> ClientKey:
    return ClientKey(
        "User:app", client_id, name, version, "PLAIN", "PLAINTEXT", "10.0.0.1", instance, asked
    )


def _connections() -> pa.Table:
    table = ConnectionTable(max_keys=100, node_id=0, now_ms=1_000)
    table.observe(_key("java", "apache-kafka-java", "4.4.0"), 1_100, since_ms=1_050)  # bootstrap
    table.observe(_key("java", "apache-kafka-java", "4.4.0", JAVA_ID, True), 1_900)  # broker
    table.observe(_key("java", "unknown", "unknown"), 1_950)  # open, before its ApiVersions
    table.observe(_key("quiet", "apache-kafka-java", "4.4.0"), 1_500)
    table.observe(
        _key("asked", "librdkafka", "2.16.0", "11111111-2222-4333-8444-555555555555", True), 1_500
    )
    table.observe(_key("go", "sarama", "1.61.1"), 1_200)
    table.observe(_key("go", "sarama", "1.61.1"), 1_300)
    table.observe(_key("js", "unknown", "unknown"), 1_400)
    table.observe(_key("old", "apache-kafka-java", "3.6.1"), 1_400)
    table.observe(_key("new-software", "zig-kafka", "0.1"), 1_400)
    return records_to_arrow(table.drain(2_000))


def _client(instance: str, client_id: str, name: str, version: str, pushes: int) -> dict[str, Any]:
    at = datetime.fromtimestamp(1.5, tz=UTC)
    return {
        "client_instance_id": instance, "client_id": client_id, "client_software_name": name,
        "client_software_version": version, "client_source_address": "10.0.0.1",
        "principal": "User:app",
        "first_seen": at, "last_seen": at, "pushes": pushes,
    }  # fmt: skip


def test_each_client_appears_once_with_its_coverage() -> None:
    clients = pa.Table.from_pylist(
        [
            _client(JAVA_ID, "java", "apache-kafka-java", "4.4.0", 3),
            # Pushing through a broker with the plugin: no connection record of it.
            _client(PLUGIN_ID, "plugin-seen", "apache-kafka-java", "4.1.0", 2),
        ],
        schema=CLIENTS_ARROW,
    )
    fleet = fleet_table(_connections(), clients)
    assert fleet.schema == FLEET_ARROW
    got = {
        r["client_id"]: (r["coverage"], r["reason"], r["instances"], r["connections"], r["pushes"])
        for r in fleet.to_pylist()
    }
    no_name = "sends no software name (ApiVersions before v3): no KIP-714 client does"
    assert got == {
        "java": ("pushes", "", [JAVA_ID], 3, 3),
        "plugin-seen": ("pushes", "", [PLUGIN_ID], 0, 2),
        "quiet": ("does_not", "telemetry_off", [], 1, 0),
        "asked": ("does_not", "no_subscription", ["11111111-2222-4333-8444-555555555555"], 1, 0),
        "go": (
            "cannot",
            "Sarama implements no GetTelemetrySubscriptions or PushTelemetry request.",
            [],
            2,
            0,
        ),
        "js": ("cannot", no_name, [], 1, 0),
        "old": ("cannot", "older than the first version with KIP-714 (3.7)", [], 1, 0),
        "new-software": ("does_not", "telemetry_off", [], 1, 0),
    }
    java = next(r for r in fleet.to_pylist() if r["client_id"] == "java")
    assert (java["first_seen_ms"], java["last_seen_ms"], java["listeners"]) == (
        1_050,
        1_950,
        ["PLAIN"],
    )
    # Flagged from the known-defects table: 4.1.0 is below KAFKA-19747's fix (4.2.0).
    plugin = next(r for r in fleet.to_pylist() if r["client_id"] == "plugin-seen")
    assert "KAFKA-19747" in plugin["defects"]
    assert "KAFKA-19747" not in java["defects"]


def test_no_records_and_no_clients_make_an_empty_fleet() -> None:
    empty = fleet_table(records_to_arrow([]), CLIENTS_ARROW.empty_table())
    assert empty.num_rows == 0
    assert empty.schema == FLEET_ARROW


def test_support_rows_need_a_source_and_a_version() -> None:
    with pytest.raises(ConfigurationError, match="source URL"):
        parse_support(
            {"software": [{"name": "x", "telemetry": True, "reason": "r", "source": "mine"}]}
        )
    with pytest.raises(ConfigurationError, match="bad min"):
        parse_support({"software": [{"name": "x", "telemetry": True, "min": "new", "reason": "r",
                                     "source": "https://x"}]})  # fmt: skip
    assert support_for("librdkafka", "2.4.0") == (
        False,
        "older than the first version with KIP-714 (2.5)",
    )
    assert support_for("librdkafka", "2.16.0") == (True, "")
