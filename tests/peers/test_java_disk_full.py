"""The real Java client (kafka-clients 4.4.0) through a full landing disk: it keeps pushing.

The gateway's landing directory is a 4 MiB tmpfs (tests/disk.py; skipped, with the
reason, where mounting is not allowed). While it is full every push is answered
THROTTLING_QUOTA_EXCEEDED (89), which the Java client retries after the push interval
(``ClientTelemetryUtils.maybeFetchErrorIntervalMs``); UNKNOWN_SERVER_ERROR or any code
it does not list would switch its telemetry off for the client's life, and nothing would
land after the disk heals (reference: kafka-4.4-peers.md, "The Java client").
tests/gateway/test_disk_full.py checks the same fault with raw frames.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from peers.java_client import JavaClient, debug_log

from tests.disk import fill, heal
from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.peers.clients import java
from tests.procs import GatewayProcess, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

Row = dict[str, object]

CONFIG = "[exporters.landing]\nroll_seconds = 0.3\n"
INTERVAL_MS = 500
#: What kafka-clients 4.4.0 logs at DEBUG for a push answered 89: the next Get comes
#: after the push interval (ClientTelemetryUtils.maybeFetchErrorIntervalMs), and then
#: the state it moves to (ClientTelemetryReporter): a Get is due, telemetry goes on.
RETRIED = re.compile(rf"Error code: 89, reason: .*\. Push interval update to {INTERVAL_MS} ms\.")
GET_AGAIN = "Setting telemetry state from PUSH_IN_PROGRESS to SUBSCRIPTION_NEEDED"
PUSHED = "Setting telemetry state from PUSH_IN_PROGRESS to PUSH_NEEDED"
#: What it logs when it switches telemetry off (an unlisted code, INVALID_REQUEST...:
#: "... disable telemetry", "disabling telemetry", the interval Integer.MAX_VALUE, the
#: state TERMINATED).
DISABLED = re.compile(r"disabl|2147483647|TERMINATED", re.IGNORECASE)
TELEMETRY_LOGGER = " org.apache.kafka.common.telemetry."


def telemetry_log(client: JavaClient) -> list[str]:
    """The messages of the client's telemetry loggers in its log (stderr), oldest first."""
    assert client.log_path is not None
    lines = client.log_path.read_text(errors="replace").splitlines()
    return [line.split(" - ", 1)[1] for line in lines if TELEMETRY_LOGGER in line and " - " in line]


def retried(log: list[str]) -> list[int]:
    """Where in ``telemetry_log`` the client logged a push answered 89."""
    return [i for i, message in enumerate(log) if RETRIED.fullmatch(message)]


def still_on(client: JavaClient) -> None:
    """Fail at once if the client logged that it switched its telemetry off."""
    off = [message for message in telemetry_log(client) if DISABLED.search(message)]
    assert not off, f"the Java client switched its telemetry off: {off}"


def landed(gw: GatewayProcess, instance: str, since: datetime | None = None) -> list[Row]:
    """``instance``'s landed pushes with metrics (received after ``since``)."""
    return [
        row
        for row in landed_rows(gw.data_dir)
        if row["client_instance_id"] == instance
        and row["payload"]
        and (since is None or row["received_at"] > since)  # type: ignore[operator]
    ]


def refused(gw: GatewayProcess, instance: str) -> list[Row]:
    """The gateway's own log lines for ``instance``'s pushes it could not land (answered 89)."""
    return [e for e in gw.events("export_failed") if e["client_instance_id"] == instance]


def test_java_client_retries_89_through_a_full_disk_and_lands_again_as_the_same_instance(
    small_disk: Path, tmp_path: Path
) -> None:
    gw = GatewayProcess(small_disk.parent, CONFIG).start()
    try:
        subscription = {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": str(INTERVAL_MS),
            "match": "client_id=disk-.*",
        }
        set_subscription(gw.bootstrap, "disk", subscription)
        debug = [debug_log("org.apache.kafka.common.telemetry")]
        with java(gw.bootstrap, tmp_path, "--client-id", "disk", "--role", "producer",
                  "--messages", "0", jvm_options=debug) as client:  # fmt: skip
            instance = client.instance_ids()["producer"]
            wait_for(lambda: len(landed(gw, instance)) >= 2, 60, what="two pushes landed")
            filler = fill(small_disk)

            def refused_twice() -> bool:
                still_on(client)
                return len(refused(gw, instance)) >= 2

            wait_for(refused_twice, 20, what="two of its pushes answered 89")
            wait_for(
                lambda: len(retried(telemetry_log(client))) >= 2, 10, what="the client's log of 89"
            )
            assert all("No space left" in str(e["error"]) for e in refused(gw, instance))
            assert gw.metric("landing_wal_failures_total") >= 1
            assert gw.metric("plugin_error_total") >= len(refused(gw, instance))

            healed = datetime.now(UTC)
            heal(small_disk, filler)
            wait_for(
                lambda: len(landed(gw, instance, since=healed)) >= 2,
                30,
                what="two pushes landed after healing",
            )
            after = landed(gw, instance, since=healed)
        log = telemetry_log(client)
        still_on(client)
        # After each 89 a Get is due (after the interval); after the last one, pushes
        # succeeded again (PUSH_IN_PROGRESS back to PUSH_NEEDED), as the rows show.
        assert {log[i + 1] for i in retried(log)} == {GET_AGAIN}
        assert PUSHED in log[retried(log)[-1] :]
        assert {r["client_id"] for r in after} == {"disk-producer"}
        assert {r["client_software_name"] for r in after} == {"apache-kafka-java"}
        assert not any(r["terminating"] for r in landed(gw, instance))
        assert not client.events("no_instance")
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []
