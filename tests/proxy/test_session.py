"""The proxy's connection handling against a scripted upstream (tests/proxy/fake_upstream.py)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from peers.free_ports import free_port_block

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.proxy import merged_versions
from clientmetrics.gateway.proxy.kip951 import FETCH_MAX, PRODUCE_MAX
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import (
    SERVED,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    parse_request_header,
    request_type,
)
from clientmetrics.wire.build import build
from tests.frames import answer_frame
from tests.procs import MIN_DEADLINE_S
from tests.proxy.fake_upstream import NODE, FakeUpstream, raw_request


@pytest.fixture
async def gateway(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[Gateway]:
    base = free_port_block(NODE + 1)
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        upstream=(Address("127.0.0.1", upstream.port),),
        broker_port_base=base,
    )
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()])
    await gw.start()
    yield gw
    await gw.close()


async def test_pipelined_requests_pass_through_byte_exact_in_order(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    upstream.hold = 20  # answers nothing until 20 requests are in: only a pipelining proxy passes
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    # ListOffsets v1 (not a flexible version): header v1, bodies the proxy never decodes.
    frames = [raw_request(2, 1, 1000 + i, f"opaque-{i}".encode() * (i + 1)) for i in range(20)]
    writer.write(b"".join(frames))
    answers = [await answer_frame(reader) for _ in frames]
    assert [a[:4] for a in answers] == [f[8:12] for f in frames], "correlation ids, in order"
    assert [a[4:] for a in answers] == [f[4:] for f in frames], "forwarded byte for byte"
    assert upstream.frames == [f[4:] for f in frames]
    writer.close()


async def test_acks_zero_produce_gets_no_response_and_keeps_order(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    # Produce v3: transactional_id (null), acks=0, then an opaque tail.
    produce = raw_request(0, 3, 1, struct.pack(">hh", -1, 0) + b"ACKS0")
    after = raw_request(2, 1, 2, b"after")
    writer.write(produce + after)
    answer = await answer_frame(reader)
    assert answer[:4] == struct.pack(">i", 2)
    assert len(upstream.frames) == 2
    writer.close()


async def test_upstream_going_away_closes_the_client_connection(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    writer.write(raw_request(2, 1, 5, b"x"))
    await answer_frame(reader)
    other_reader, other_writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    await asyncio.sleep(0.1)  # let the second session reach the upstream
    upstream.drop_connections()
    assert await asyncio.wait_for(reader.read(), MIN_DEADLINE_S) == b""
    assert await asyncio.wait_for(other_reader.read(), MIN_DEADLINE_S) == b"", (
        "idle clients closed too"
    )
    # A new connection gets a new upstream link: nothing else is blocked.
    fresh_reader, fresh_writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    fresh_writer.write(raw_request(2, 1, 6, b"y"))
    assert (await answer_frame(fresh_reader))[:4] == struct.pack(">i", 6)
    for w in (writer, other_writer, fresh_writer):
        w.close()


async def test_metadata_names_broker_ports_and_they_lead_to_that_broker(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    header = RequestHeader(3, 12, 9, "t", None, 2)
    writer.write(
        encode_request(
            header,
            build(
                request_type(3, 12),
                {
                    "topics": None,
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                },
            ),
        )
    )
    _, body = decode_response(3, 12, await answer_frame(reader))
    [broker] = body.brokers
    assert (broker.node_id, broker.host) == (NODE, "127.0.0.1")
    assert broker.port == gateway.config.broker_port(NODE)
    b_reader, b_writer = await asyncio.open_connection("127.0.0.1", broker.port)
    b_writer.write(raw_request(2, 1, 77, b"via-broker-port"))
    assert (await answer_frame(b_reader)).endswith(b"via-broker-port")
    for w in (writer, b_writer):
        w.close()


async def test_mixed_describe_configs_upstream_part_uses_injected_correlation_id(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    from kio.schema.describe_configs.v4.request import DescribeConfigsResource
    from kio.static.primitive import i8

    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    resources = tuple(
        DescribeConfigsResource(resource_type=i8(t), resource_name=n, configuration_keys=None)
        for t, n in [(16, "sub"), (2, "topic-a")]
    )
    body = request_type(32, 4)(
        resources=resources, include_synonyms=False, include_documentation=False
    )
    writer.write(encode_request(RequestHeader(32, 4, 31, "t", None, 2), body))
    # The fake echoes requests, which is not a valid DescribeConfigs response, so the
    # merge fails and the client gets a closed connection; what matters here is
    # what reached the upstream: only the topic, under the gateway's own id.
    await asyncio.wait_for(reader.read(), MIN_DEADLINE_S)
    [forwarded] = upstream.frames
    header, _ = parse_request_header(forwarded)
    assert header.correlation_id < 0
    assert b"topic-a" in forwarded
    assert b"sub" not in forwarded[8:]
    writer.close()


@pytest.mark.parametrize(
    ("api_key", "version", "request_values"),
    [
        (10, 3, {"key": "g", "key_type": 0}),
        (10, 4, {"key_type": 0, "coordinator_keys": ("g", "gone")}),
        (60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}),
    ],
)
async def test_coordinator_and_cluster_addresses_are_rewritten(
    upstream: FakeUpstream,
    gateway: Gateway,
    api_key: int,
    version: int,
    request_values: dict[str, object],
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    body: Any = build(request_type(api_key, version), request_values)
    writer.write(encode_request(RequestHeader(api_key, version, 3, "t", None, 2), body))
    _, response = decode_response(api_key, version, await answer_frame(reader))
    port = gateway.config.broker_port(NODE)
    if api_key == 60:
        assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
            (NODE, "127.0.0.1", port)
        ]
    elif version >= 4:
        assert [(c.key, c.node_id, c.port) for c in response.coordinators] == [
            ("g", NODE, port),
            ("gone", -1, -1),  # an error entry is left as the upstream wrote it
        ]
    else:
        assert (response.node_id, response.host, response.port) == (NODE, "127.0.0.1", port)
    writer.close()


def test_api_versions_adds_gateway_apis_and_caps_what_it_rewrites() -> None:
    upstream = {0: (0, 13), 1: (4, 18), 3: (0, 13), 19: (0, 7), 71: (0, 0), 32: (0, 4)}
    own = {key: SERVED[key] for key in (71, 72, 74, 32, 33, 44)}  # the proxy's handler table
    merged = merged_versions(upstream, own)
    assert merged[0] == (0, PRODUCE_MAX)  # Produce: capped at what the KIP-951 walker knows
    assert merged[1] == (4, FETCH_MAX)
    assert merged[3] == (0, SERVED[3][1])  # Metadata: decoded to be rewritten
    assert merged[19] == (0, 7)  # untouched pass-through API
    for key in own:  # served by the gateway, upstream has them or not
        assert merged[key] == SERVED[key]
    # A table without telemetry (the cluster takes it): the upstream's own versions stand.
    assert merged_versions(upstream, {})[71] == (0, 0)
    assert 72 not in merged_versions(upstream, {})


async def test_advertised_host_is_separate_from_the_bind_address(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        advertised_host="kafka-gw.example",
        upstream=(Address("127.0.0.1", upstream.port),),
        broker_port_base=free_port_block(NODE + 1),
    )
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()])
    await gw.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
        body: Any = build(
            request_type(3, 9),
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
        writer.write(encode_request(RequestHeader(3, 9, 1, "t", None, 2), body))
        _, response = decode_response(3, 9, await answer_frame(reader))
        assert [(b.host, b.port) for b in response.brokers] == [
            ("kafka-gw.example", config.broker_port(NODE))
        ]
        writer.close()
    finally:
        await gw.close()


async def test_list_config_resources_merges_upstream_and_gateway(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    alter: Any = build(
        request_type(44, 1),
        {
            "resources": [
                {
                    "resource_type": 16,
                    "resource_name": "gw-sub",
                    "configs": [{"name": "metrics", "config_operation": 0, "value": "org."}],
                }
            ],
            "validate_only": False,
        },
    )
    writer.write(encode_request(RequestHeader(44, 1, 1, "t", None, 2), alter))
    await answer_frame(reader)
    assert upstream.frames == [], "a client-metrics-only alter never reaches the upstream"
    listing: Any = build(request_type(74, 1), {"resource_types": ()})
    writer.write(encode_request(RequestHeader(74, 1, 2, "t", None, 2), listing))
    _, response = decode_response(74, 1, await answer_frame(reader))
    assert [(r.resource_type, r.resource_name) for r in response.config_resources] == [
        (2, "upstream-topic"),  # not the store's topic: hidden, as Metadata hides it
        (16, "gw-sub"),  # the upstream's own client-metrics entry is not the one in force
    ]
    writer.close()


async def test_api_versions_with_a_bad_software_name_is_answered_invalid_request(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    """Kafka's rule holds even when the upstream does not check it (Tansu does not)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    bad = request_type(18, 3)(client_software_name="<html>", client_software_version="1")
    writer.write(encode_request(RequestHeader(18, 3, 41, "sw"), bad))
    correlation, body = decode_response(18, 3, await answer_frame(reader))
    assert (correlation, int(body.error_code)) == (41, ErrorCode.INVALID_REQUEST)
    assert body.api_keys == ()
    assert upstream.frames == [], "not forwarded"
    writer.close()
