"""/healthz and /readyz on the admin port tell a load balancer the truth."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore


class SickExporter(InMemoryExporter):
    """An exporter that reports its own health and counters."""

    name = "sick"

    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def health(self) -> str | None:
        return self.reason

    def counters(self) -> dict[str, float]:
        return {"landing_wal_failures": 3.0}


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[Gateway, SickExporter]]:
    exporter = SickExporter()
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        admin_listen=Address("127.0.0.1", 0),
    )
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[exporter])
    await gw.start()
    yield gw, exporter
    await gw.close()


async def get(port: int | None, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def test_ready_follows_the_exporters_health(gateway: tuple[Gateway, SickExporter]) -> None:
    gw, exporter = gateway
    assert await get(gw.metrics_port, "/readyz") == (200, b"ready\n")
    exporter.reason = "landing WAL write failed: [Errno 28] No space left on device"
    assert await get(gw.metrics_port, "/readyz") == (
        503,
        b"sick: landing WAL write failed: [Errno 28] No space left on device\n",
    )
    assert await get(gw.metrics_port, "/healthz") == (200, b"ok\n"), "alive all the same"
    status, metrics = await get(gw.metrics_port, "/metrics")
    assert status == 200
    assert b"kafka_server_client_metrics_ready 0.0" in metrics
    assert b"kafka_server_client_metrics_landing_wal_failures_total 3.0" in metrics
    exporter.reason = None
    assert await get(gw.metrics_port, "/readyz") == (200, b"ready\n")
    assert (await get(gw.metrics_port, "/nope"))[0] == 404


async def test_not_ready_while_shutting_down(gateway: tuple[Gateway, SickExporter]) -> None:
    gw, _ = gateway
    assert gw.not_ready() is None
    closing = asyncio.create_task(gw.close())
    await asyncio.sleep(0)
    assert gw.not_ready() == "shutting down"
    await closing
