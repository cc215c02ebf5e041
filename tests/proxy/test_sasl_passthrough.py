"""SASL passthrough in proxy mode: the cluster authenticates, the gateway learns who.

The fake upstream answers SaslHandshake and SaslAuthenticate; the identity the
client claims in its PLAIN token becomes the connection's principal only once
the upstream said success.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)
from clientmetrics.wire.server import ListenerPolicy
from tests.procs import free_port_block

from .test_session import NODE, FakeUpstream, raw_request, read_frame


def plain_identity(mechanism: str, token: bytes) -> str | None:
    return "User:" + token.split(b"\x00")[1].decode() if mechanism == "PLAIN" else None


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    yield fake
    assert fake.server is not None
    fake.server.close()


async def start(upstream: FakeUpstream, tmp_path: Path) -> Gateway:
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        upstream=(Address("127.0.0.1", upstream.port),),
        broker_port_base=free_port_block(NODE + 1),
    )
    policy = ListenerPolicy(requires_sasl=True, passthrough=True, identity_of=plain_identity)
    gw = Gateway(
        config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()], policy=policy
    )
    await gw.start()
    return gw


async def authenticate(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: bytes
) -> int:
    handshake = RequestHeader(17, 1, 1, "c", None, 1)
    writer.write(encode_request(handshake, request_type(17, 1)(mechanism="PLAIN")))
    assert int(decode_response(17, 1, await read_frame(reader))[1].error_code) == 0
    header = RequestHeader(36, 2, 2, "c", None, 2)
    writer.write(encode_request(header, request_type(36, 2)(auth_bytes=token)))
    return int(decode_response(36, 2, await read_frame(reader))[1].error_code)


async def test_the_principal_is_the_claimed_user_after_upstream_success(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    gw = await start(upstream, tmp_path)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        assert await authenticate(reader, writer, b"\x00alice\x00pw") == 0
        (conn,) = gw._connections.values()
        assert conn.principal == "User:alice"
        assert conn.context().principal == "User:alice"
        writer.write(raw_request(2, 1, 3, b"after"))
        assert (await asyncio.wait_for(read_frame(reader), 5))[:4] == struct.pack(">i", 3)
        # The SASL requests went to the cluster, byte for byte.
        assert [f[:2] for f in upstream.frames[:2]] == [b"\x00\x11", b"\x00\x24"]
        writer.close()
    finally:
        await gw.close()


async def test_nothing_is_forwarded_before_authentication_and_failure_closes(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    gw = await start(upstream, tmp_path)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        writer.write(raw_request(2, 1, 1, b"too early"))
        assert await asyncio.wait_for(reader.read(), 5) == b""
        assert upstream.frames == []
        upstream.sasl_error = ErrorCode.SASL_AUTHENTICATION_FAILED
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        code = await authenticate(reader, writer, b"\x00mallory\x00bad")
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert await asyncio.wait_for(reader.read(), 5) == b""
    finally:
        await gw.close()
