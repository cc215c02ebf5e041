"""ApiVersions and Metadata as the standalone gateway answers them."""

from __future__ import annotations

from collections.abc import Mapping

from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_body,
    encode_response,
    error_response,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.client_software import software_valid


class ClusterHandlers:
    """Answers ApiVersions and Metadata, naming the gateway as the only broker."""

    def __init__(
        self,
        *,
        node_id: int,
        host: str,
        port: int,
        cluster_id: str,
        advertised: Mapping[int, tuple[int, int]],
        listener_endpoints: Mapping[str, tuple[str, int]] | None = None,
    ) -> None:
        self._node_id = node_id
        self._host = host
        self._port = port
        #: Metadata names the address of the listener the client connected on.
        self._endpoints = dict(listener_endpoints or {})
        self._cluster_id = cluster_id
        self._advertised = dict(sorted(advertised.items()))

    async def api_versions(
        self, conn: ConnectionState, header: RequestHeader, frame: bytes, offset: int
    ) -> bytes:
        body = decode_body(header, frame, offset)
        name = getattr(body, "client_software_name", None)
        version = getattr(body, "client_software_version", None)
        if not software_valid(name, version):
            return error_response(header, ErrorCode.INVALID_REQUEST)
        if name is not None:
            conn.set_software(str(name), str(version or ""))
        values = {
            "error_code": ErrorCode.NONE,
            "api_keys": [
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, (lo, hi) in self._advertised.items()
            ],
            "throttle_time": 0,
        }
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, values))

    async def metadata(
        self, conn: ConnectionState, header: RequestHeader, frame: bytes, offset: int
    ) -> bytes:
        body = decode_body(header, frame, offset)
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
        return encode_response(header, build(cls, values))
