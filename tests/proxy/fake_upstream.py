"""A scripted upstream for the proxy tests, in process.

The fake upstream is a real TCP server speaking Kafka framing: it answers the
gateway's Metadata probe, records every frame it receives byte for byte, and
answers other requests with the request's own bytes (header included) so the
test can see exactly what was forwarded.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from clientmetrics.wire import (
    ErrorCode,
    FrameDecoder,
    RequestHeader,
    decode_request,
    encode_response,
    parse_request_header,
    response_type,
)
from clientmetrics.wire.build import build

NODE = 7
SIZE = struct.Struct(">i")


@dataclass
class FakeUpstream:
    """Records requests; holds answers until ``hold`` requests are in (pipelining check)."""

    hold: int = 0
    #: The error code its SaslAuthenticate answers carry (SASL passthrough tests).
    sasl_error: int = 0
    #: Set: DescribeConfigs / IncrementalAlterConfigs get this error for every resource.
    config_error: int | None = None
    frames: list[bytes] = field(default_factory=list)
    server: asyncio.Server | None = None
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def start(self) -> FakeUpstream:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        decoder = FrameDecoder()
        held: list[bytes] = []
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                header, _ = parse_request_header(frame)
                if header.api_key in (3, 10, 18, 60, 74):
                    writer.write(self._cluster_answer(header))
                    continue
                if header.api_key in (17, 36):
                    self.frames.append(frame)
                    writer.write(self._sasl_answer(header))
                    continue
                if header.api_key in (32, 44) and self.config_error is not None:
                    self.frames.append(frame)
                    writer.write(self._config_answer(frame))
                    continue
                self.frames.append(frame)
                held.append(frame)
                if len(held) >= self.hold:
                    for request in held:
                        if request[:2] == b"\x00\x00" and request.endswith(b"ACKS0"):
                            continue  # a produce with acks=0 gets no answer
                        # Response: the request's correlation id, then its whole frame.
                        answer = request[4:8] + request
                        writer.write(SIZE.pack(len(answer)) + answer)
                    held.clear()
            await writer.drain()
        writer.close()

    def _cluster_answer(self, header: RequestHeader) -> bytes:
        """Metadata, FindCoordinator (both forms) and DescribeCluster naming this server."""
        me = {"host": "127.0.0.1", "port": self.port, "rack": None}
        values = {
            "throttle_time": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "brokers": [{"node_id": NODE, "broker_id": NODE, **me}],
            "cluster_id": "fake",
            "controller_id": NODE,
            "topics": [],
            "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
            "node_id": NODE,
            **me,
            "config_resources": [
                {"resource_name": "upstream-topic", "resource_type": 2},
                {"resource_name": "__client_metrics_subscriptions", "resource_type": 2},
                {"resource_name": "upstream-own-sub", "resource_type": 16},
            ],
            "coordinators": [
                {"key": "g", "node_id": NODE, "error_code": ErrorCode.NONE,
                 "error_message": None, **me},
                {"key": "gone", "node_id": -1, "host": "", "port": -1, "error_message": "x",
                 "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE},
            ],
        }  # fmt: skip
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, values))

    def _config_answer(self, frame: bytes) -> bytes:
        header, body = decode_request(frame)
        items = [
            {
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
                "error_code": ErrorCode(self.config_error or 0),
                "error_message": None,
                "configs": [],
            }
            for r in body.resources
        ]
        values = {"throttle_time": 0, "results": items, "responses": items}
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, values))

    def _sasl_answer(self, header: RequestHeader) -> bytes:
        values = {
            "error_code": ErrorCode(0 if header.api_key == 17 else self.sasl_error),
            "mechanisms": ["PLAIN"],
            "error_message": None if self.sasl_error == 0 else "Authentication failed",
            "auth_bytes": b"",
            "session_lifetime": 0,
        }
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, values))

    def drop_connections(self) -> None:
        for writer in self.writers:
            writer.transport.abort()


def raw_request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A v1-header request frame with an opaque body (the proxy must not look inside)."""
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test" + body
    return SIZE.pack(len(payload)) + payload
