"""Pushes are decoded on the event loop when small and on the decode pool when not,
with the same answers either way: what fits ``telemetry.max.bytes`` lands whole,
what does not is TELEMETRY_TOO_LARGE, garbage is INVALID_RECORD."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import zstandard

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.gateway.telemetry_rpcs import INLINE_DECODE_BYTES
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.telemetry.manager import TelemetryConfig
from clientmetrics.wire import ErrorCode, request_type
from tests.gateway.test_retriable_errors import call, get

GOLDEN = (
    Path(__file__).parents[1] / "data" / "librdkafka-2.16" / "consumer-push.otlp.bin"
).read_bytes()
MAX_BYTES = 256 * 1024


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[Gateway, InMemoryExporter]]:
    exporter = InMemoryExporter()
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        telemetry=TelemetryConfig(max_bytes=MAX_BYTES),
    )
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[exporter])
    await gw.start()
    yield gw, exporter
    await gw.close()


async def push(port: int, codec: int, metrics: bytes) -> int:
    sub = await get(port)
    body = request_type(72, 0)(
        client_instance_id=sub.client_instance_id,
        subscription_id=sub.subscription_id,
        terminating=False,
        compression_type=codec,
        metrics=metrics,
    )
    return int((await call(port, 72, body)).error_code)


def copies(otlp: bytes, at_least: int) -> bytes:
    """Concatenated MetricsData messages merge into one valid message."""
    return otlp * (at_least // len(otlp) + 1)


@pytest.mark.parametrize(
    "otlp",
    [
        GOLDEN,
        copies(GOLDEN, INLINE_DECODE_BYTES + 1),
        GOLDEN * (MAX_BYTES // len(GOLDEN)),
    ],
    ids=["inline", "over-the-inline-bound", "just-under-max-bytes"],
)
@pytest.mark.parametrize("codec", [0, 4], ids=["none", "zstd"])
async def test_what_fits_lands_whole_wherever_it_is_decoded(
    gateway: tuple[Gateway, InMemoryExporter], otlp: bytes, codec: int
) -> None:
    gw, exporter = gateway
    assert len(otlp) <= MAX_BYTES
    metrics = zstandard.ZstdCompressor().compress(otlp) if codec == 4 else otlp
    assert await push(gw.port, codec, metrics) == ErrorCode.NONE
    assert exporter.pushes[-1].payload == otlp


async def test_over_max_bytes_decompressed_is_too_large(
    gateway: tuple[Gateway, InMemoryExporter],
) -> None:
    gw, exporter = gateway
    bomb = zstandard.ZstdCompressor().compress(copies(GOLDEN, MAX_BYTES + 1))
    assert len(bomb) < INLINE_DECODE_BYTES  # small on the wire: tried inline first
    assert await push(gw.port, 4, bomb) == ErrorCode.TELEMETRY_TOO_LARGE
    assert exporter.pushes == []


@pytest.mark.parametrize("size", [100, INLINE_DECODE_BYTES * 2])
async def test_garbage_is_an_invalid_record_inline_or_not(
    gateway: tuple[Gateway, InMemoryExporter], size: int
) -> None:
    gw, exporter = gateway
    garbage = uuid.uuid4().bytes * (size // 16)
    assert await push(gw.port, 4, garbage) == ErrorCode.INVALID_RECORD
    assert exporter.pushes == []
