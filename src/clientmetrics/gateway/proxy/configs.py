"""Config RPCs in proxy mode: CLIENT_METRICS resources here, the rest upstream.

A DescribeConfigs, AlterConfigs or IncrementalAlterConfigs request naming only
other resource types is forwarded untouched. One naming only client-metrics
resources is answered by the gateway. A mixed one is split: the gateway sends the
upstream its part as a request of its own (own correlation id, same version and
client id), answers its part, and merges both in the request's resource order.
ListConfigResources merges the upstream's list with the gateway's subscriptions.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from clientmetrics.gateway.build import build
from clientmetrics.gateway.config_rpcs import CLIENT_METRICS, LISTABLE_TYPES, ConfigHandlers
from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.upstream import UpstreamLink
from clientmetrics.wire import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_type,
)

__all__ = ["Slot", "SplitConfigs"]

#: What a proxy handler hands the ordered writer: a framed response ready now,
#: a task producing one (``b""`` for none), or an upstream response still to
#: come (no size prefix) with an optional rewriter.
Slot = bytes | asyncio.Task[bytes] | tuple[asyncio.Future[bytes], Any]

_ITEMS: dict[int, str] = {
    ApiKey.DESCRIBE_CONFIGS: "results",
    ApiKey.ALTER_CONFIGS: "responses",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "responses",
}


def _injected_header(header: RequestHeader) -> RequestHeader:
    return dataclasses.replace(header, correlation_id=0)  # the link assigns its own id


class SplitConfigs:
    """Proxy handlers for api keys 32, 33, 44 and 74."""

    def __init__(self, configs: ConfigHandlers, cluster: ClusterMap) -> None:
        self._configs = configs
        self._cluster = cluster

    async def config_request(
        self, conn: ConnectionState, header: RequestHeader, frame: bytes, link: UpstreamLink
    ) -> Slot:
        """Route a DescribeConfigs / AlterConfigs / IncrementalAlterConfigs request."""
        _, body = decode_request(frame)
        resources = tuple(body.resources)
        mine = [int(r.resource_type) == CLIENT_METRICS for r in resources]
        supported = self._cluster.upstream_supports(header.api_key, header.api_version)
        if not any(mine) and supported:
            future = link.send(frame)
            assert future is not None
            return (future, None)
        others = tuple(r for r, m in zip(resources, mine, strict=True) if not m)
        upstream: asyncio.Future[bytes] | None = None
        if others and supported:
            request = dataclasses.replace(body, resources=others)
            upstream = link.inject(encode_request(_injected_header(header), request)[4:])
        own = tuple(r for r, m in zip(resources, mine, strict=True) if m)
        ours = await self._local(header, dataclasses.replace(body, resources=own), conn)
        if not others:
            return self._response(header, ours, 0)
        return asyncio.ensure_future(self._merge(header, resources, mine, ours, upstream))

    async def _local(self, header: RequestHeader, body: Any, conn: ConnectionState) -> list[Any]:
        if header.api_key == ApiKey.DESCRIBE_CONFIGS:
            return list(self._configs.describe_results(body, conn))
        incremental = header.api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
        return list(await self._configs.alter_results(body, incremental=incremental, conn=conn))

    async def _merge(
        self,
        header: RequestHeader,
        resources: tuple[Any, ...],
        mine: list[bool],
        ours: list[Any],
        upstream: asyncio.Future[bytes] | None,
    ) -> bytes:
        field = _ITEMS[header.api_key]
        throttle: Any = 0
        if upstream is not None:
            _, response = decode_response(header.api_key, header.api_version, await upstream)
            theirs = list(getattr(response, field))
            throttle = response.throttle_time
        else:
            theirs = [_unsupported(r) for r, m in zip(resources, mine, strict=True) if not m]
        merged = [ours.pop(0) if m else theirs.pop(0) for m in mine]
        return self._response(header, merged, throttle)

    @staticmethod
    def _response(header: RequestHeader, items: list[Any], throttle: Any) -> bytes:
        cls = response_type(header.api_key, header.api_version)
        return encode_response(
            header, build(cls, {"throttle_time": throttle, _ITEMS[header.api_key]: items})
        )

    async def list_config_resources(
        self,
        conn: ConnectionState,
        header: RequestHeader,
        frame: bytes,
        link: UpstreamLink,
        local: Callable[[], Awaitable[bytes]],
    ) -> Slot:
        """ListConfigResources: the upstream's resources plus the gateway's subscriptions."""
        _, body = decode_request(frame)
        types = {int(t) for t in getattr(body, "resource_types", (CLIENT_METRICS,)) or ()}
        wants_upstream = not types or bool(types - {CLIENT_METRICS})
        if (
            types - LISTABLE_TYPES
            or not wants_upstream
            or not self._cluster.upstream_supports(header.api_key, header.api_version)
        ):
            return await local()
        future = link.send(frame)
        assert future is not None
        listed = CLIENT_METRICS in types or not types
        ours = self._configs.client_metrics_resources(conn) if listed else []
        return asyncio.ensure_future(self._merge_lists(header, future, ours))

    @staticmethod
    async def _merge_lists(
        header: RequestHeader, upstream: asyncio.Future[bytes], ours: list[dict[str, Any]]
    ) -> bytes:
        _, response = decode_response(header.api_key, header.api_version, await upstream)
        code = int(response.error_code)
        theirs: list[Any] = []
        if code == ErrorCode.NONE:
            # The upstream's own client-metrics resources (if any) are not the ones in force.
            theirs = [
                r for r in response.config_resources if int(r.resource_type) != CLIENT_METRICS
            ]
        values = {
            "throttle_time": response.throttle_time,
            "error_code": ErrorCode.NONE if ours or code == ErrorCode.NONE else response.error_code,
            "config_resources": [*theirs, *ours],
        }
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, values))


def _unsupported(resource: Any) -> dict[str, Any]:
    return {
        "resource_type": int(resource.resource_type),
        "resource_name": str(resource.resource_name),
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "error_message": "The upstream cluster does not support this request version",
        "configs": [],
    }
