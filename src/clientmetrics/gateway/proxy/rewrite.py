"""Upstream responses the proxy must change before a client sees them.

Broker addresses become gateway addresses (Metadata, FindCoordinator old and new
forms, DescribeCluster, KIP-951 endpoints) so clients never leave the gateway,
and ApiVersions gains the APIs the gateway serves itself. Every other response
passes through as the upstream wrote it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from clientmetrics.gateway.config import Address
from clientmetrics.gateway.proxy import kip951
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.wire import (
    SERVED,
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_response,
    parse_response_header,
    response_header_version,
)

__all__ = ["GATEWAY_APIS", "Rewriter", "rewriter_for", "unreadable_api_versions"]

PRODUCE, FETCH, METADATA = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA
FIND_COORDINATOR, API_VERSIONS = ApiKey.FIND_COORDINATOR, ApiKey.API_VERSIONS
DESCRIBE_CLUSTER = ApiKey.DESCRIBE_CLUSTER
#: APIs the gateway answers itself (wholly or for CLIENT_METRICS resources).
GATEWAY_APIS = (
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    ApiKey.PUSH_TELEMETRY,
    ApiKey.LIST_CONFIG_RESOURCES,
)
#: Forwarded APIs whose responses the proxy decodes or walks: capped at what it knows.
_CAPPED: Mapping[int, int] = {
    PRODUCE: kip951.PRODUCE_MAX,
    FETCH: kip951.FETCH_MAX,
    METADATA: SERVED[METADATA][1],
    FIND_COORDINATOR: SERVED[FIND_COORDINATOR][1],
    DESCRIBE_CLUSTER: SERVED[DESCRIBE_CLUSTER][1],
    API_VERSIONS: SERVED[API_VERSIONS][1],
}

#: Rewrites one response frame (header included, no size prefix). Returns the new
#: frame, or an awaitable of it when the rewrite must first open a listener.
Rewriter = Callable[[bytes], bytes | Awaitable[bytes]]


def _reencode(header: RequestHeader, body: Any) -> bytes:
    return encode_response(header, body)[4:]


async def _broker_list(cluster: ClusterMap, brokers: Any, id_field: str) -> tuple[Any, ...]:
    out = []
    for broker in brokers:
        node_id = int(getattr(broker, id_field))
        await cluster.learn(node_id, str(broker.host), int(broker.port))
        host, port = cluster.gateway_endpoint(node_id)
        out.append(dataclasses.replace(broker, host=host, port=port))
    return tuple(out)


def _metadata(header: RequestHeader, cluster: ClusterMap) -> Rewriter:
    # Metadata names brokers by node_id, DescribeCluster by broker_id.
    id_field = "node_id" if header.api_key == METADATA else "broker_id"

    async def rewrite(frame: bytes) -> bytes:
        _, body = decode_response(header.api_key, header.api_version, bytes(frame))
        brokers = await _broker_list(cluster, body.brokers, id_field)
        return _reencode(header, dataclasses.replace(body, brokers=brokers))

    return rewrite


async def _coordinator(cluster: ClusterMap, item: Any) -> Any:
    if int(item.node_id) < 0 or int(item.error_code) != 0:
        return item
    await cluster.learn(int(item.node_id), str(item.host), int(item.port))
    host, port = cluster.gateway_endpoint(int(item.node_id))
    return dataclasses.replace(item, host=host, port=port)


def _find_coordinator(header: RequestHeader, cluster: ClusterMap) -> Rewriter:
    async def rewrite(frame: bytes) -> bytes:
        _, body = decode_response(header.api_key, header.api_version, bytes(frame))
        if hasattr(body, "coordinators"):  # v4+: one entry per key (KIP-699)
            items = tuple([await _coordinator(cluster, c) for c in body.coordinators])
            body = dataclasses.replace(body, coordinators=items)
        else:
            body = await _coordinator(cluster, body)
        return _reencode(header, body)

    return rewrite


def _api_versions(header: RequestHeader, cluster: ClusterMap) -> Rewriter:
    async def rewrite(frame: bytes) -> bytes:
        _, body = decode_response(header.api_key, header.api_version, bytes(frame))
        if int(body.error_code) != ErrorCode.NONE:
            return frame  # the client retries with a version from the upstream's list
        upstream = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        cluster.record_versions(upstream)
        advertised = merged_versions(upstream)
        item = type(body.api_keys[0]) if body.api_keys else None
        if item is None:
            return frame
        keys = tuple(
            item(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(advertised.items())
        )
        return _reencode(header, dataclasses.replace(body, api_keys=keys))

    return rewrite


def merged_versions(upstream: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The ApiVersions a proxy advertises: upstream's, capped, plus the gateway's own.

    Not an intersection: the gateway serves 71, 72, 74 and the config APIs itself,
    whether or not the upstream has them (a Kroxylicious lesson).
    """
    out: dict[int, tuple[int, int]] = {}
    for key, (low, high) in upstream.items():
        lo, hi = low, high
        cap = _CAPPED.get(key)
        if cap is not None:
            hi = min(hi, cap)
            if key in SERVED:
                lo = max(lo, SERVED[key][0])
        if lo <= hi:
            out[key] = (lo, hi)
    for key in GATEWAY_APIS:
        out[key] = SERVED[key]
    return out


def _node_endpoints(header: RequestHeader, cluster: ClusterMap) -> Rewriter:
    # The hot path: synchronous (no task per response) unless a node is new.
    body_version = response_header_version(header.api_key, header.api_version)

    def rewrite(frame: bytes) -> bytes | Awaitable[bytes]:
        _, offset = parse_response_header(frame, body_version)
        out, nodes = kip951.rewrite_node_endpoints(
            header.api_key, frame, offset, cluster.gateway_endpoint
        )
        if all(cluster.address(n) == Address(host, port) for n, host, port in nodes):
            return out
        return _learn_all(cluster, nodes, out)

    return rewrite


async def _learn_all(cluster: ClusterMap, nodes: list[tuple[int, str, int]], out: bytes) -> bytes:
    for node_id, host, port in nodes:
        await cluster.learn(node_id, host, port)
    return out


def unreadable_api_versions(header: RequestHeader) -> bool:
    """An ApiVersions request newer than the proxy can read the answer of (and so rewrite).

    Kafka 4.4 serves ApiVersions v5; its Java client and franz-go ask for it. The
    proxy refuses it as Kafka refuses a version it does not know (KIP-511:
    UNSUPPORTED_VERSION with the range it takes), and the client asks again lower.
    """
    return header.api_key == API_VERSIONS and header.api_version > _CAPPED[API_VERSIONS]


def rewriter_for(header: RequestHeader, cluster: ClusterMap) -> Rewriter | None:
    """The rewriter for the response to ``header``'s request, ``None`` to pass it through."""
    key, version = header.api_key, header.api_version
    if (key == PRODUCE and version >= 10) or (key == FETCH and version >= 16):
        return _node_endpoints(header, cluster)
    if key in (METADATA, DESCRIBE_CLUSTER):
        return _metadata(header, cluster)
    if key == FIND_COORDINATOR:
        return _find_coordinator(header, cluster)
    if key == API_VERSIONS:
        return _api_versions(header, cluster)
    return None
