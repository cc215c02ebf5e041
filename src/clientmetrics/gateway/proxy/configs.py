"""Config RPCs in proxy mode: CLIENT_METRICS resources here, the rest upstream.

A DescribeConfigs, AlterConfigs or IncrementalAlterConfigs request naming only
other resource types is forwarded untouched. One naming only client-metrics
resources is answered by the gateway. A mixed one is split: the gateway sends the
upstream its part as a request of its own (own correlation id, same version and
client id), answers its part, and merges both in the request's resource order.
ListConfigResources merges the upstream's list with the gateway's subscriptions.

When the cluster authenticated the client (SASL passthrough), the cluster stays
the authority on who may describe or alter client-metrics configs. Before the
gateway answers such a request it asks the upstream, on the client's own link and
so as the client's own principal, a question that needs the same permission and
changes nothing (KIP-714 puts both on the CLUSTER resource, as Kafka does for
BROKER configs): DESCRIBE_CONFIGS with a DescribeConfigs of the cluster-wide
BROKER defaults, ALTER_CONFIGS with a validate-only
IncrementalAlterConfigs of those defaults changing nothing. CLUSTER_AUTHORIZATION_FAILED
refuses the client's resources; any other answer (success, or a cluster that
does not implement the request) leaves the decision to ``[authorization]``, or
allows. The answer is kept for the connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from clientmetrics.gateway.config_rpcs import CLIENT_METRICS, LISTABLE_TYPES, ConfigHandlers
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.guard import StoreTopicGuard
from clientmetrics.gateway.upstream import UpstreamLink
from clientmetrics.security.base import Operation
from clientmetrics.wire import (
    ApiKey,
    ConfigResourceType,
    ErrorCode,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_type,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.headers import request_header_version
from clientmetrics.wire.results import Answer, AnswerLater, Forward, Reply, Request

__all__ = ["SplitConfigs"]

_ITEMS: dict[int, str] = {
    ApiKey.DESCRIBE_CONFIGS: "results",
    ApiKey.ALTER_CONFIGS: "responses",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "responses",
}


#: The BROKER resource (type 4) named "": the cluster-wide defaults, checked on CLUSTER.
_CLUSTER_DEFAULTS: dict[str, Any] = {"resource_type": 4, "resource_name": ""}
#: Per operation: the request that needs it and changes nothing, the versions to
#: try (newest first), and the response field holding the per-resource errors.
_PROBES: dict[Operation, tuple[ApiKey, tuple[int, ...], dict[str, Any], str]] = {
    Operation.DESCRIBE_CONFIGS: (
        ApiKey.DESCRIBE_CONFIGS,
        (4, 3, 2, 1, 0),
        {
            # All keys: the cluster-wide dynamic defaults are few (often none), and
            # some brokers (Tansu 0.6) cannot read a key list here.
            "resources": [{**_CLUSTER_DEFAULTS, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
        "results",
    ),
    Operation.ALTER_CONFIGS: (
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        (1, 0),
        {"resources": [{**_CLUSTER_DEFAULTS, "configs": []}], "validate_only": True},
        "responses",
    ),
}


def _injected_header(header: RequestHeader) -> RequestHeader:
    return dataclasses.replace(header, correlation_id=0)  # the link assigns its own id


class SplitConfigs:
    """Proxy handlers for api keys 32, 33, 44 and 74."""

    def __init__(
        self, configs: ConfigHandlers, cluster: ClusterMap, guard: StoreTopicGuard | None = None
    ) -> None:
        self._configs = configs
        self._cluster = cluster
        self._guard = guard

    async def config_request(self, conn: ConnectionState, request: Request) -> Reply:
        """Route a DescribeConfigs / AlterConfigs / IncrementalAlterConfigs request."""
        # The upstream half of a split request is the gateway's own: the store's
        # topic is refused before any of it goes.
        refusal = None if self._guard is None else self._guard.refuse(conn, request)
        if refusal is not None:
            return refusal
        header, link = request.header, _link(conn)
        _, body = decode_request(bytes(request.frame))
        resources = tuple(body.resources)
        mine = [int(r.resource_type) == CLIENT_METRICS for r in resources]
        supported = self._cluster.upstream_supports(header.api_key, header.api_version)
        if not any(mine) and supported:
            return Forward(request)
        others = tuple(r for r, m in zip(resources, mine, strict=True) if not m)
        upstream: asyncio.Future[bytes] | None = None
        if others and supported:
            request = dataclasses.replace(body, resources=others)
            upstream = link.inject(encode_request(_injected_header(header), request)[4:])
        own = tuple(r for r, m in zip(resources, mine, strict=True) if m)
        if own:
            describe = header.api_key == ApiKey.DESCRIBE_CONFIGS
            operation = Operation.DESCRIBE_CONFIGS if describe else Operation.ALTER_CONFIGS
            await self.ask_cluster(conn, header, link, operation)
        ours = await self._local(header, dataclasses.replace(body, resources=own), conn)
        if not others:
            return Answer(self._response(header, ours, 0))
        return AnswerLater(self._merge(header, resources, mine, ours, upstream))

    async def ask_cluster(
        self, conn: ConnectionState, header: RequestHeader, link: UpstreamLink, op: Operation
    ) -> None:
        """Learn (once per connection) whether the cluster refuses ``op`` to the client."""
        if not conn.authenticated_by_cluster or op in conn.cluster_refuses:
            return
        key, versions, values, field = _PROBES[op]
        version = next((v for v in versions if self._cluster.upstream_supports(key, v)), None)
        if version is None:  # the cluster does not serve it: no verdict
            conn.cluster_refuses[op] = False
            return
        probe = RequestHeader(
            key,
            version,
            0,  # the link assigns its own correlation id
            header.client_id,
            header.client_instance_id,
            request_header_version(key, version),
        )
        frame = encode_request(probe, build(request_type(key, version), values))[4:]
        _, response = decode_response(key, version, await link.inject(frame))
        codes = [int(item.error_code) for item in getattr(response, field)]
        conn.cluster_refuses[op] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED in codes

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

    async def list_config_resources(self, conn: ConnectionState, request: Request) -> Reply:
        """ListConfigResources: the upstream's resources plus the gateway's subscriptions."""
        header, link = request.header, _link(conn)
        frame = bytes(request.frame)
        _, body = decode_request(frame)
        types = {int(t) for t in getattr(body, "resource_types", (CLIENT_METRICS,)) or ()}
        wants_upstream = not types or bool(types - {CLIENT_METRICS})
        if not types or CLIENT_METRICS in types:
            await self.ask_cluster(conn, header, link, Operation.DESCRIBE_CONFIGS)
        if (
            types - LISTABLE_TYPES
            or not wants_upstream
            or not self._cluster.upstream_supports(header.api_key, header.api_version)
        ):
            return await self._configs.list_config_resources(conn, request)
        future = link.send(frame)
        listed = CLIENT_METRICS in types or not types
        ours = self._configs.client_metrics_resources(conn) if listed else []
        return AnswerLater(self._merge_lists(header, future, ours))

    async def _merge_lists(
        self, header: RequestHeader, upstream: asyncio.Future[bytes], ours: list[dict[str, Any]]
    ) -> bytes:
        _, response = decode_response(header.api_key, header.api_version, await upstream)
        code = int(response.error_code)
        theirs: list[Any] = []
        if code == ErrorCode.NONE:
            # The upstream's own client-metrics resources (if any) are not the ones in force.
            # Nor is the store's topic listed, as Metadata does not list it.
            hidden = {(int(ConfigResourceType.TOPIC), self._guard.topic)} if self._guard else set()
            theirs = [
                r
                for r in response.config_resources
                if int(r.resource_type) != CLIENT_METRICS
                and (int(r.resource_type), str(r.resource_name)) not in hidden
            ]
        values = {
            "throttle_time": response.throttle_time,
            "error_code": ErrorCode.NONE if ours or code == ErrorCode.NONE else response.error_code,
            "config_resources": [*theirs, *ours],
        }
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, values))


def _link(conn: ConnectionState) -> UpstreamLink:
    if conn.upstream is None:
        raise RuntimeError("a proxy handler ran without an upstream link")
    return conn.upstream


def _unsupported(resource: Any) -> dict[str, Any]:
    return {
        "resource_type": int(resource.resource_type),
        "resource_name": str(resource.resource_name),
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "error_message": "The upstream cluster does not support this request version",
        "configs": [],
    }
