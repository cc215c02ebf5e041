"""Every way a Get or a push can fail on the gateway's side is answered with a code
clients retry: THROTTLING_QUOTA_EXCEEDED (89). The Java client turns telemetry off
for the client's life on UNKNOWN_SERVER_ERROR or any code it does not list
(reference: kafka-4.4-peers.md, "The Java client")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from clientmetrics.exporters.base import ExportError
from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)

#: The codes the Java client (4.4) and the KIP retry after the push interval, or at once.
RETRIED = {
    ErrorCode.NONE,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    ErrorCode.TELEMETRY_TOO_LARGE,
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
}


class FullDisk(InMemoryExporter):
    """A gating exporter that cannot land anything (as the landing WAL on a full disk)."""

    async def export(self, push: AcceptedPush) -> None:
        raise ExportError("landing WAL write failed: [Errno 28] No space left on device")


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    config = GatewayConfig(data_dir=tmp_path, listeners=(Listener.parse("127.0.0.1:0"),))
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[FullDisk()])
    await gw.start()
    yield gw
    await gw.close()


async def call(port: int, api_key: int, body: Any) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_request(RequestHeader(api_key, 0, 1, "java-like"), body))
        size = int.from_bytes(await reader.readexactly(4), "big")
        _, answer = decode_response(api_key, 0, await reader.readexactly(size))
        return answer
    finally:
        writer.close()


async def get(port: int, instance: uuid.UUID | None = None) -> Any:
    body = request_type(71, 0)(client_instance_id=instance or uuid.UUID(int=0))
    return await call(port, 71, body)


async def push(port: int, instance: uuid.UUID, subscription_id: int) -> int:
    body = request_type(72, 0)(
        client_instance_id=instance,
        subscription_id=subscription_id,
        terminating=False,
        compression_type=0,
        metrics=b"",
    )
    return int((await call(port, 72, body)).error_code)


async def test_a_full_disk_is_answered_89_and_gets_go_on(gateway: Gateway) -> None:
    sub = await get(gateway.port)
    assert int(sub.error_code) == ErrorCode.NONE
    code = await push(gateway.port, sub.client_instance_id, sub.subscription_id)
    assert code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    # The next Get (a new client) is answered as usual; a too-early one gets 89 too.
    assert int((await get(gateway.port)).error_code) == ErrorCode.NONE
    again = await get(gateway.port, sub.client_instance_id)
    assert int(again.error_code) in RETRIED


async def test_a_failing_handler_answers_89_not_unknown_server_error(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = await get(gateway.port)

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a bug, or a resource gone")

    monkeypatch.setattr(gateway.manager, "get_telemetry_subscriptions", broken)
    monkeypatch.setattr(gateway.manager, "begin_push", broken)
    assert int((await get(gateway.port)).error_code) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    code = await push(gateway.port, sub.client_instance_id, sub.subscription_id)
    assert code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert ErrorCode.THROTTLING_QUOTA_EXCEEDED.retriable
