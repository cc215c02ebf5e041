"""A real full disk under the landing zone: 89 while full, healed without a restart.

The landing directory is a small tmpfs (tests/disk.py mounts it; the test is skipped,
with the reason, where mounting is not allowed; tests/exporters/test_landing_faults.py
injects the same fault everywhere). tests/peers/test_java_disk_full.py runs the real
Java client through the same fault.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from clientmetrics.wire import (
    ErrorCode,
)
from tests.disk import fill, heal
from tests.frames import get_then_push
from tests.landed import landed_rows
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for

pytestmark = pytest.mark.integration

PAYLOAD = (
    Path(__file__).parents[1] / "data" / "librdkafka-2.16" / "consumer-push.otlp.bin"
).read_bytes()
CONFIG = """
[exporters.landing]
roll_seconds = 0.3
"""


def push(port: int, client_id: str) -> int:
    """Get then push the golden payload on a new connection; the push's error code."""
    return get_then_push(port, client_id, PAYLOAD)


def http(port: int | None, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{path}", timeout=MIN_DEADLINE_S
        ) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_full_disk_answers_89_reports_not_ready_and_heals_by_itself(small_disk: Path) -> None:
    gw = GatewayProcess(small_disk.parent, config_text=CONFIG).start()
    try:
        assert http(gw.metrics_port, "/readyz") == (200, "ready\n")
        acked = {f"before{i}" for i in range(5) if push(gw.port, f"before{i}") == ErrorCode.NONE}
        assert len(acked) == 5
        filler = fill(small_disk)
        codes = [push(gw.port, f"full{i}") for i in range(60)]
        acked |= {f"full{i}" for i, code in enumerate(codes) if code == ErrorCode.NONE}
        # What still fit in a segment's last page was acknowledged; then 89, never -1.
        assert ErrorCode.THROTTLING_QUOTA_EXCEEDED in codes
        assert set(codes) <= {ErrorCode.NONE, ErrorCode.THROTTLING_QUOTA_EXCEEDED}
        status, reason = http(gw.metrics_port, "/readyz")
        assert status == 503
        assert "No space left" in reason
        assert http(gw.metrics_port, "/healthz") == (200, "ok\n")

        heal(small_disk, filler)
        wait_for(lambda: http(gw.metrics_port, "/readyz")[0] == 200, 15, what="ready again")
        after = {f"after{i}" for i in range(5) if push(gw.port, f"after{i}") == ErrorCode.NONE}
        assert len(after) == 5
        acked |= after

        def landed() -> list[str]:
            return sorted(str(r["client_id"]) for r in landed_rows(small_disk.parent))

        wait_for(lambda: len(landed()) >= len(acked), 15, what="acknowledged rows to land")
        assert landed() == sorted(acked), "every acknowledged push exactly once, no other"
        metrics = http(gw.metrics_port, "/metrics")[1]
        assert "kafka_server_client_metrics_landing_wal_failures_total" in metrics
        assert "kafka_server_client_metrics_ready 1.0" in metrics
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []
