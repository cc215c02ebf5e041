"""A closed connection gives back what it took: thousands of connections that each send
one malformed frame and are closed leave the gateway's memory where it was.

Each such connection used to leave about 5 KB behind (its objects formed reference
cycles, which gc.freeze moved out of the collector's reach): 10,000 of them, ~50 MiB.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import bad_connections
from tests.procs import MIN_DEADLINE_S, GatewayProcess, rss_mib, wait_for

pytestmark = pytest.mark.integration

CONNECTIONS = 10_000
#: What those connections may leave in all (the leak left ~5 KB each: ~50 MiB); RSS
#: also moves by a MiB or two on its own.
ALLOWED_MIB = 8.0


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data").start()
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def closed(gateway: GatewayProcess, count: int) -> None:
    """Until the gateway has counted ``count`` closed connections."""
    wait_for(
        lambda: gateway.metric("connections_closed_total") >= count,
        120,
        what=f"{count} connections closed",
    )


def send(gateway: GatewayProcess, kind: str, count: int) -> None:
    done = asyncio.run(bad_connections.run(gateway.port, kind, count, concurrency=32))
    assert done == count


def test_malformed_frame_connections_leave_nothing_behind(gateway: GatewayProcess) -> None:
    assert gateway.proc is not None
    pid = gateway.proc.pid
    kinds = ("garbage", "header", "unknown", "truncated")
    for kind in kinds:  # the first ones size the pools every connection reuses
        send(gateway, kind, 250)
    closed(gateway, 250 * len(kinds))
    baseline = rss_mib(pid)
    for kind in kinds:
        send(gateway, kind, CONNECTIONS // len(kinds))
    closed(gateway, 250 * len(kinds) + CONNECTIONS)
    assert gateway.metric("connections") == 0
    # Freed memory goes back to the OS within seconds (the heap trim); a leak stays.
    deadline = time.monotonic() + MIN_DEADLINE_S
    while (growth := rss_mib(pid) - baseline) >= ALLOWED_MIB:
        assert time.monotonic() < deadline, (
            f"RSS {growth:+.1f} MiB over {baseline:.1f} MiB after {CONNECTIONS} connections"
        )
        time.sleep(0.5)
