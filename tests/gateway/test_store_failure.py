"""A failing subscription store: every resource of an alter gets an error and a message."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import pytest

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.base import StoreError
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)
from clientmetrics.wire.build import build
from tests.frames import read_frame


class FailingStore(MemorySubscriptionStore):
    """Starts fine, then every write fails the way a full or locked disk does."""

    async def update(self, name: str, change: Callable[..., Mapping[str, str]]) -> dict[str, str]:
        raise StoreError("subscription store /data/subscriptions.db: database or disk is full")

    async def put(self, name: str, configs: Mapping[str, str]) -> None:
        await self.update(name, lambda _stored: configs)


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    config = GatewayConfig(data_dir=tmp_path, listeners=(Listener.parse("127.0.0.1:0"),))
    gw = Gateway(config, store=FailingStore(), exporters=[InMemoryExporter()])
    await gw.start()
    yield gw
    await gw.close()


async def roundtrip(port: int, frame: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame)
    answer = await read_frame(reader)
    writer.close()
    return answer


@pytest.mark.parametrize(("api_key", "version"), [(44, 1), (33, 2)])
async def test_every_resource_gets_unknown_server_error_and_the_reason(
    gateway: Gateway, api_key: int, version: int
) -> None:
    config = {"name": "metrics", "config_operation": 0, "value": "org.apache.kafka."}
    request = build(
        request_type(api_key, version),
        {
            "resources": [
                {"resource_type": 16, "resource_name": name, "configs": [config]}
                for name in ("a", "b")
            ],
            "validate_only": False,
        },
    )
    header = RequestHeader(api_key, version, 5, "admin")
    _, body = decode_response(
        api_key, version, await roundtrip(gateway.port, encode_request(header, request))
    )
    assert [(r.resource_name, int(r.error_code)) for r in body.responses] == [
        ("a", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("b", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]
    assert all("disk is full" in str(r.error_message) for r in body.responses)


async def test_an_invalid_stored_subscription_is_listed_but_matches_nothing(tmp_path: Path) -> None:
    """Written by another tool or an older version: the gateway starts and serves anyway."""
    store = MemorySubscriptionStore(
        {"bad": {"metrics": "org.apache.kafka.", "interval.ms": "soon"}, "good": {"metrics": "x."}}
    )
    config = GatewayConfig(data_dir=tmp_path, listeners=(Listener.parse("127.0.0.1:0"),))
    gw = Gateway(config, store=store, exporters=[InMemoryExporter()])
    await gw.start()
    try:
        listed = build(request_type(74, 0), {})
        _, names = decode_response(
            74, 0, await roundtrip(gw.port, encode_request(RequestHeader(74, 0, 1, "a"), listed))
        )
        assert sorted(r.resource_name for r in names.config_resources) == ["bad", "good"]
        get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
        _, sub = decode_response(
            71, 0, await roundtrip(gw.port, encode_request(RequestHeader(71, 0, 2, "c"), get))
        )
        assert tuple(sub.requested_metrics) == ("x.",), "only the valid one matches"
    finally:
        await gw.close()
