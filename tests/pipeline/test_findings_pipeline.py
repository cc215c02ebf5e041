"""Findings through the real pipeline job: landed pushes in, incidents in a real Alertmanager."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from clientmetrics.pipeline.core.incidents import GROUP_BY, INHIBIT
from tests.alertmanager_server import AlertmanagerServer, alertmanager_binary
from tests.synthetic import Push, land, producer_payload

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        alertmanager_binary() is None, reason="needs Debian's prometheus-alertmanager package"
    ),
]
BIN = Path(sys.executable).parent


def _names(server: AlertmanagerServer, alertname: str) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = server.get("/alerts")
    return [a for a in alerts if a["labels"].get("alertname") == alertname]


def test_a_broker_slow_for_three_producers_reaches_alertmanager_as_findings(
    tmp_path: Path,
) -> None:
    data = tmp_path / "cm-data"
    # Near the wall clock: Alertmanager drops incidents whose endsAt has passed.
    start_us = (int(time.time()) - 600) * 1_000_000
    instances = [str(uuid.UUID(int=n + 1)) for n in range(3)]
    pushes = [
        Push(
            start_us + step * 60_000_000,
            instance,
            # Every broker (1, 2, 3, and -1: the coordinator) answers in 9 s.
            producer_payload((start_us + step * 60_000_000) * 1000, step, latency=9000.0),
            client_id=f"app-{n}",
            push_interval_ms=60_000,
        )
        for step in range(4)
        for n, instance in enumerate(instances)
    ]
    land(data, pushes)
    rules = tmp_path / "rules.toml"
    rules.write_text("findings = true\n")
    server = AlertmanagerServer(tmp_path / "am", GROUP_BY, (INHIBIT,)).start()
    try:
        done = subprocess.run(
            [
                str(BIN / "clientmetrics"), "pipeline", "run", "--data-dir", str(data),
                "--rules", str(rules), "--alertmanager", server.url(), "--flush-windows",
            ],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        # Held for 120 s from the first push: each producer's finding fires on the third,
        # for each of the four nodes it reports.
        per_client = _names(server, "slow-broker-requests")
        assert sorted(
            (a["labels"]["client_id"], a["labels"]["node_id"]) for a in per_client
        ) == sorted((f"app-{n}", node) for n in range(3) for node in ("-1", "1", "2", "3"))
        assert {a["labels"]["client_software_name"] for a in per_client} == {"librdkafka"}
        # One incident per broker; -1 is no one broker. They inhibit their clients' alerts.
        brokers = _names(server, "slow-broker")
        assert sorted(b["labels"]["node_id"] for b in brokers) == ["1", "2", "3"]
        # And each producer is slow to every broker it uses: its host or network, one
        # incident each, with its labels and no one node.
        hosts = _names(server, "slow-client-host")
        assert sorted(h["labels"]["client_id"] for h in hosts) == ["app-0", "app-1", "app-2"]
        # Fired as soon as two brokers' findings were open: it names those two.
        assert all(
            len(set(h["annotations"]["node_ids"].split(", ")) & {"1", "2", "3"}) == 2 for h in hosts
        )
        assert not any("node_id" in h["labels"] for h in hosts)
        states = {(a["labels"]["node_id"], a["status"]["state"]) for a in per_client}
        assert states == {("-1", "active"), ("1", "suppressed"), ("2", "suppressed"),
                          ("3", "suppressed")}  # fmt: skip
    finally:
        server.stop()
