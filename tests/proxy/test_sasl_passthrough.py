"""SASL passthrough in proxy mode: the cluster authenticates, the gateway learns who.

The fake upstream answers SaslHandshake and SaslAuthenticate; the identity the
client claims in its PLAIN token becomes the connection's principal only once
the upstream said success.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest
from peers.free_ports import free_port_block

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.security.authorizer import Acl, AuthorizationConfig, Permission
from clientmetrics.security.base import Operation
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    request_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.headers import request_header_version
from clientmetrics.wire.server import ListenerPolicy
from tests.frames import answer_frame, read_frame
from tests.procs import MIN_DEADLINE_S
from tests.proxy.fake_upstream import NODE, FakeUpstream, raw_request


def plain_identity(mechanism: str, token: bytes) -> str | None:
    return "User:" + token.split(b"\x00")[1].decode() if mechanism == "PLAIN" else None


async def start(
    upstream: FakeUpstream, tmp_path: Path, authorization: AuthorizationConfig | None = None
) -> Gateway:
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        upstream=(Address("127.0.0.1", upstream.port),),
        broker_port_base=free_port_block(NODE + 1),
        authorization=authorization,
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
        assert (await answer_frame(reader))[:4] == struct.pack(">i", 3)
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
        assert await asyncio.wait_for(reader.read(), MIN_DEADLINE_S) == b""
        assert upstream.frames == []
        upstream.sasl_error = ErrorCode.SASL_AUTHENTICATION_FAILED
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        code = await authenticate(reader, writer, b"\x00mallory\x00bad")
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert await asyncio.wait_for(reader.read(), MIN_DEADLINE_S) == b""
    finally:
        await gw.close()


# -- the cluster stays the authority on the client-metrics config RPCs ---------------

SUB = "s1"


async def call(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    key: int,
    version: int,
    values: dict[str, Any],
    cid: int,
) -> Any:
    header = RequestHeader(key, version, cid, "c", None, request_header_version(key, version))
    writer.write(encode_request(header, build(request_type(key, version), values)))
    return decode_response(key, version, await answer_frame(reader))[1]


async def config_calls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> list[int]:
    """Alter, describe and list client-metrics configs; the error codes, in that order."""
    resource = {"resource_type": 16, "resource_name": SUB}
    set_metrics = {"name": "metrics", "config_operation": 0, "value": "org.apache.kafka."}
    alter_values = {"resources": [{**resource, "configs": [set_metrics]}], "validate_only": False}
    altered = await call(reader, writer, 44, 1, alter_values, 10)
    described = await call(
        reader,
        writer,
        32,
        4,
        {
            "resources": [{**resource, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
        11,
    )
    listed = await call(reader, writer, 74, 1, {"resource_types": [16]}, 12)
    return [
        int(altered.responses[0].error_code),
        int(described.results[0].error_code),
        int(listed.error_code),
    ]


def probes(upstream: FakeUpstream) -> list[tuple[int, Any]]:
    """The config requests the gateway sent the cluster, decoded."""
    out = []
    for frame in upstream.frames:
        if frame[:2] in (b"\x00\x20", b"\x00\x2c"):
            header, body = decode_request(frame)
            out.append((header.api_key, body))
    return out


def stored(gw: Gateway) -> dict[str, str]:
    assert gw._subscriptions is not None
    return dict(gw._subscriptions.get(SUB) or {})


async def session(gw: Gateway) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    assert await authenticate(reader, writer, b"\x00alice\x00pw") == 0
    return reader, writer


async def test_the_clusters_refusal_refuses_each_client_metrics_resource(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.config_error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    gw = await start(upstream, tmp_path)
    try:
        reader, writer = await session(gw)
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert await config_calls(reader, writer) == [refused] * 3
        assert stored(gw) == {}
        # One question per operation, about the cluster-wide BROKER defaults, changing nothing.
        (alter_key, alter_probe), (describe_key, describe_probe) = probes(upstream)
        assert (alter_key, describe_key) == (44, 32)
        assert alter_probe.validate_only is True
        ((kind, name, configs),) = [
            (r.resource_type, r.resource_name, r.configs) for r in alter_probe.resources
        ]
        assert (kind, name, configs) == (4, "", ())
        ((kind, name, keys),) = [
            (r.resource_type, r.resource_name, r.configuration_keys)
            for r in describe_probe.resources
        ]
        assert (kind, name, keys) == (4, "", None)
        # The answers are kept for the connection: asking again costs the cluster nothing.
        assert await config_calls(reader, writer) == [refused] * 3
        assert len(probes(upstream)) == 2
        writer.close()
    finally:
        await gw.close()


@pytest.mark.parametrize("answer", [ErrorCode.NONE, ErrorCode.INVALID_REQUEST])
async def test_without_a_refusal_authorization_decides_else_allowed(
    upstream: FakeUpstream, tmp_path: Path, answer: ErrorCode
) -> None:
    upstream.config_error = answer  # success, or a cluster that does not implement it
    gw = await start(upstream, tmp_path)
    try:
        reader, writer = await session(gw)
        assert await config_calls(reader, writer) == [0, 0, 0]
        assert stored(gw) == {"metrics": "org.apache.kafka."}
        writer.close()
    finally:
        await gw.close()
    # [authorization] present: it decides for the cluster that did not refuse.
    only_describe = AuthorizationConfig(
        acls=(Acl("User:alice", Operation.DESCRIBE_CONFIGS, Permission.ALLOW),)
    )
    gw = await start(upstream, tmp_path / "authz", only_describe)
    try:
        reader, writer = await session(gw)
        assert await config_calls(reader, writer) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 0, 0]
        writer.close()
    finally:
        await gw.close()
