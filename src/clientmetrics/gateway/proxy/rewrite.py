"""Upstream responses the proxy must change before a client sees them.

Broker addresses become gateway addresses (Metadata, FindCoordinator old and new
forms, DescribeCluster, KIP-951 endpoints in Produce and Fetch, KIP-932's in
ShareFetch and ShareAcknowledge) so clients never leave the gateway,
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
from clientmetrics.gateway.upstream import Rewriter
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

__all__ = ["merged_versions", "rewriter_for"]

PRODUCE, FETCH, METADATA = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA
FIND_COORDINATOR, API_VERSIONS = ApiKey.FIND_COORDINATOR, ApiKey.API_VERSIONS
DESCRIBE_CLUSTER = ApiKey.DESCRIBE_CLUSTER
SHARE_APIS = (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE)
#: Forwarded APIs whose responses the proxy decodes or walks: capped at what it knows.
_CAPPED: Mapping[int, int] = {
    PRODUCE: kip951.PRODUCE_MAX,
    FETCH: kip951.FETCH_MAX,
    METADATA: SERVED[METADATA][1],
    FIND_COORDINATOR: SERVED[FIND_COORDINATOR][1],
    DESCRIBE_CLUSTER: SERVED[DESCRIBE_CLUSTER][1],
    API_VERSIONS: SERVED[API_VERSIONS][1],
    **{key: SERVED[key][1] for key in SHARE_APIS},
}


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


#: Changes a decoded Metadata answer (the store topic's guard hides its topic there).
Screen = Callable[[Any], Any]


def _metadata(header: RequestHeader, cluster: ClusterMap, screen: Screen | None) -> Rewriter:
    # Metadata names brokers by node_id, DescribeCluster by broker_id.
    id_field = "node_id" if header.api_key == METADATA else "broker_id"

    async def rewrite(frame: bytes) -> bytes:
        _, body = decode_response(header.api_key, header.api_version, bytes(frame))
        brokers = await _broker_list(cluster, body.brokers, id_field)
        body = dataclasses.replace(body, brokers=brokers)
        if screen is not None and header.api_key == METADATA:
            body = screen(body)
        return _reencode(header, body)

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


def _api_versions(
    header: RequestHeader, cluster: ClusterMap, own: Mapping[int, tuple[int, int]]
) -> Rewriter:
    async def rewrite(frame: bytes) -> bytes:
        _, body = decode_response(header.api_key, header.api_version, bytes(frame))
        if int(body.error_code) != ErrorCode.NONE:
            return frame  # the client retries with a version from the upstream's list
        upstream = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        cluster.record_versions(upstream)
        advertised = merged_versions(upstream, own)
        item = type(body.api_keys[0]) if body.api_keys else None
        if item is None:
            return frame
        keys = tuple(
            item(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(advertised.items())
        )
        return _reencode(header, dataclasses.replace(body, api_keys=keys))

    return rewrite


def merged_versions(
    upstream: Mapping[int, tuple[int, int]], own: Mapping[int, tuple[int, int]]
) -> dict[int, tuple[int, int]]:
    """The ApiVersions a proxy advertises: upstream's, capped, plus the gateway's own.

    ``own``: what the proxy's handlers serve (71, 72, 74 and the config APIs unless
    the cluster takes telemetry itself). Not an intersection: the gateway serves
    them whether or not the upstream has them (a Kroxylicious lesson).
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
    out.update(own)
    return out


def _share(header: RequestHeader, cluster: ClusterMap) -> Rewriter:
    # ShareFetch and ShareAcknowledge carry NodeEndpoints as a plain field; they
    # are decoded (records stay opaque bytes) and re-encoded only when it is set.
    def rewrite(frame: bytes) -> bytes | Awaitable[bytes]:
        _, body = decode_response(header.api_key, header.api_version, bytes(frame))
        if not body.node_endpoints:
            return frame
        return _share_rewritten(header, cluster, body)

    return rewrite


async def _share_rewritten(header: RequestHeader, cluster: ClusterMap, body: Any) -> bytes:
    endpoints = await _broker_list(cluster, body.node_endpoints, "node_id")
    return _reencode(header, dataclasses.replace(body, node_endpoints=endpoints))


def _node_endpoints(header: RequestHeader, cluster: ClusterMap) -> Rewriter:
    # The hot path: synchronous (no task per response) unless a node is new.
    body_version = response_header_version(header.api_key, header.api_version)

    def rewrite(frame: bytes) -> bytes | Awaitable[bytes]:
        _, offset = parse_response_header(frame, body_version)
        out, nodes = kip951.rewrite_node_endpoints(
            header.api_key, header.api_version, frame, offset, cluster.gateway_endpoint
        )
        if all(cluster.address(n) == Address(host, port) for n, host, port in nodes):
            return out
        return _learn_all(cluster, nodes, out)

    return rewrite


async def _learn_all(cluster: ClusterMap, nodes: list[tuple[int, str, int]], out: bytes) -> bytes:
    for node_id, host, port in nodes:
        await cluster.learn(node_id, host, port)
    return out


def rewriter_for(
    header: RequestHeader,
    cluster: ClusterMap,
    own: Mapping[int, tuple[int, int]],
    screen: Screen | None = None,
) -> Rewriter | None:
    """The rewriter for the response to ``header``'s request, ``None`` to pass it through.

    ``own``: the versions the proxy's handlers serve, added to ApiVersions;
    ``screen``: what else a Metadata answer needs (hiding the store's topic).
    """
    key, version = header.api_key, header.api_version
    if (key == PRODUCE and version >= 10) or (key == FETCH and version >= 16):
        return _node_endpoints(header, cluster)
    if key in (METADATA, DESCRIBE_CLUSTER):
        return _metadata(header, cluster, screen)
    if key == FIND_COORDINATOR:
        return _find_coordinator(header, cluster)
    if key == API_VERSIONS:
        return _api_versions(header, cluster, own)
    if key in SHARE_APIS:
        return _share(header, cluster)
    return None
