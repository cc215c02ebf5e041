"""ApiVersions and Metadata as the standalone gateway answers them."""

from __future__ import annotations

from collections.abc import Mapping

from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.wire import (
    ErrorCode,
    encode_response,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.codec import write_entity
from clientmetrics.wire.messages import frame_response
from clientmetrics.wire.results import Answer, Reply, Request

#: ApiVersions bodies kept: a few versions times the tables a process serves.
_CACHED_VERSIONS = 64


class ClusterHandlers:
    """Answers ApiVersions and Metadata, naming the gateway as the only broker."""

    def __init__(
        self,
        *,
        node_id: int,
        host: str,
        port: int,
        cluster_id: str,
        listener_endpoints: Mapping[str, tuple[str, int]] | None = None,
    ) -> None:
        self._node_id = node_id
        self._host = host
        self._port = port
        #: Metadata names the address of the listener the client connected on.
        self._endpoints = dict(listener_endpoints or {})
        self._cluster_id = cluster_id
        #: ApiVersions bodies by version and what is advertised: every client's
        #: first request, the same for all (encoding it was most of a short
        #: connection's cost: ~1 ms of a connection storm's ~1.5 ms).
        self._versions: dict[tuple[int, tuple[tuple[int, tuple[int, int]], ...]], bytes] = {}

    async def api_versions(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        # The core recorded (or refused) the client software already; what is
        # advertised is read off the handler table the connection serves.
        advertised = tuple(sorted(conn.core.advertised.items()))
        key = (header.api_version, advertised)
        body = self._versions.get(key)
        if body is None:
            values = {
                "error_code": ErrorCode.NONE,
                "api_keys": [
                    {"api_key": api_key, "min_version": lo, "max_version": hi}
                    for api_key, (lo, hi) in advertised
                ],
                "throttle_time": 0,
            }
            cls = response_type(header.api_key, header.api_version)
            body = write_entity(build(cls, values))
            if len(self._versions) < _CACHED_VERSIONS:
                self._versions[key] = body
        return Answer(frame_response(header, body))

    async def metadata(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        body = request.body()
        topics = []
        for topic in getattr(body, "topics", None) or ():
            topics.append(
                {
                    "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "name": topic.name,
                    "topic_id": topic.topic_id if hasattr(topic, "topic_id") else None,
                    "is_internal": False,
                    "partitions": [],
                }
            )
        host, port = self._endpoints.get(conn.listener, (self._host, self._port))
        values = {
            "throttle_time": 0,
            "brokers": [{"node_id": self._node_id, "host": host, "port": port, "rack": None}],
            "cluster_id": self._cluster_id,
            "controller_id": self._node_id,
            "topics": topics,
        }
        cls = response_type(header.api_key, header.api_version)
        return Answer(encode_response(header, build(cls, values)))
