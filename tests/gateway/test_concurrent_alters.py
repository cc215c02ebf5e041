"""Every alter answered 0 is in the final state, with several workers and connections.

Alters are read-modify-write inside the store; a worker's mirror lags the store
by up to its poll interval, so reading the mirror would lose concurrent alters.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.admin.api import AsyncAdmin
from clientmetrics.admin.properties import AdminConfig
from tests.procs import GatewayProcess, free_port, wait_for

pytestmark = pytest.mark.integration

OP_SET, OP_APPEND = 0, 2


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(
        Path(tmp_path_factory.mktemp("gw")) / "data",
        port=free_port(),
        extra_args=("--workers", "2"),
    )
    gw.start()
    wait_for(lambda: len(gw.events("gateway_started")) == 2, 30, what="both workers")
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def admin(gw: GatewayProcess) -> AsyncAdmin:
    return AsyncAdmin(AdminConfig(bootstrap_servers=(("127.0.0.1", gw.port),), timeout_s=30))


async def stored(gw: GatewayProcess, name: str) -> dict[str, str | None]:
    async with admin(gw) as client:
        resource = await client.describe(name)
    return {e.name: e.value for e in resource.configs if not e.is_default}


async def eventually(gw: GatewayProcess, name: str, want: dict[str, str]) -> dict[str, str | None]:
    """The configs once every worker has caught up (its mirror polls the store each second)."""
    got: dict[str, str | None] = {}
    deadline = time.monotonic() + 60  # generous: the workers poll late on a busy machine
    while time.monotonic() < deadline:
        got = await stored(gw, name)
        if all(got.get(key) == value for key, value in want.items()):
            break
        await asyncio.sleep(0.2)
    return got


async def test_concurrent_appends_over_ten_connections_all_land(gateway: GatewayProcess) -> None:
    async def appender(worker: int) -> None:
        async with admin(gateway) as client:
            for i in range(20):
                await client.incremental_alter(
                    "shared", [("metrics", OP_APPEND, f"org.apache.kafka.c{worker}.m{i}")]
                )

    await asyncio.gather(*(appender(w) for w in range(10)))
    expected = {f"org.apache.kafka.c{w}.m{i}" for w in range(10) for i in range(20)}
    deadline = time.monotonic() + 60  # generous: the workers poll late on a busy machine
    while time.monotonic() < deadline:
        metrics = str((await stored(gateway, "shared")).get("metrics") or "")
        if set(metrics.split(",")) >= expected:
            break
        await asyncio.sleep(0.2)
    assert set(metrics.split(",")) == expected


async def test_concurrent_sets_of_different_keys_keep_both(gateway: GatewayProcess) -> None:
    for round_ in range(10):
        name = f"pair{round_}"
        async with admin(gateway) as first, admin(gateway) as second:
            await asyncio.gather(
                first.incremental_alter(name, [("metrics", OP_SET, "org.apache.kafka.")]),
                second.incremental_alter(name, [("interval.ms", OP_SET, "2000")]),
            )
        want = {"metrics": "org.apache.kafka.", "interval.ms": "2000"}
        assert await eventually(gateway, name, want) == want


async def test_sequential_alters_through_new_connections_keep_earlier_keys(
    gateway: GatewayProcess,
) -> None:
    """Connections land on either worker; the later alter must not read a stale mirror."""
    for round_ in range(10):
        name = f"seq{round_}"
        async with admin(gateway) as client:
            await client.incremental_alter(name, [("metrics", OP_SET, "org.apache.kafka.")])
        async with admin(gateway) as client:
            await client.incremental_alter(name, [("interval.ms", OP_SET, "3000")])
        want = {"metrics": "org.apache.kafka.", "interval.ms": "3000"}
        assert await eventually(gateway, name, want) == want
