"""A scriptable telemetry broker for reporter tests, built from the gateway's own parts.

ApiVersions and Metadata are the gateway's handlers (so real clients bootstrap
against it); GetTelemetrySubscriptions and PushTelemetry answer from a script,
which is how the tests make "a gateway that answers each error code". Every
telemetry request is recorded with its header and decoded body.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.gateway.cluster import ClusterHandlers
from clientmetrics.gateway.config import Listener
from clientmetrics.gateway.driver import Connection
from clientmetrics.gateway.handlers import ConnectionState, Handler, Services, served_versions
from clientmetrics.gateway.limits import ConnectionLimits
from clientmetrics.telemetry.compression import decompress
from clientmetrics.telemetry.otlp import parse_metrics_data
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    encode_response,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.results import Answer, Reply, Request
from clientmetrics.wire.sasl import ListenerPolicy
from tests.procs import MIN_DEADLINE_S

GET, PUSH = 71, 72


@dataclass
class Seen:
    """One telemetry request as the broker received it."""

    api_key: int
    api_version: int
    header_version: int
    client_id: str | None
    instance_id: uuid.UUID | None
    body: Any
    at: float

    def metrics_data(self) -> Any:
        raw = bytes(self.body.metrics or b"")
        codec = int(self.body.compression_type)
        return parse_metrics_data(decompress(codec, raw, 1 << 24) if codec else raw)

    def points(self) -> Iterator[Any]:
        """(metric, data point) for every point in a push."""
        for rm in self.metrics_data().resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        yield metric, point


@dataclass
class FakeBroker:
    """Answers 71/72 from ``get_script`` / ``push_script`` (the last entry repeats)."""

    telemetry_versions: tuple[int, int] | None = (0, 1)
    interval_ms: int = 400
    delta: bool = True
    requested: tuple[str, ...] = ("org.apache.kafka.",)
    max_bytes: int = 1 << 20
    get_script: list[int] = field(default_factory=lambda: [0])
    push_script: list[int] = field(default_factory=lambda: [0])
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self, api_key: int | None = None) -> list[Seen]:
        return [s for s in list(self.seen) if api_key is None or s.api_key == api_key]

    def start(self) -> FakeBroker:
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                self._loop.create_server(self._protocol, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._server is None:
            return
        loop, server = self._loop, self._server

        async def shutdown() -> None:
            server.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(MIN_DEADLINE_S)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        loop.close()
        self._loop = None

    def _protocol(self) -> asyncio.BaseProtocol:
        advertised = {18: (0, 4), 3: (0, 12)}
        if self.telemetry_versions is not None:
            advertised |= {GET: self.telemetry_versions, PUSH: self.telemetry_versions}
        cluster = ClusterHandlers(node_id=1, host="127.0.0.1", port=self.port, cluster_id="fake")
        handlers: dict[int, Handler] = {
            18: cluster.api_versions,
            3: cluster.metadata,
            GET: self._get,
            PUSH: self._push,
        }
        limits = ConnectionLimits(1 << 24, 1 << 28, 600_000, 1000)
        services = Services(
            handlers,
            served_versions(handlers),
            limits,
            asyncio.ensure_future,
            lambda _c: None,
            lambda _c: None,
            advertised=advertised,
        )
        listener = Listener.parse("127.0.0.1:0")
        return Connection(services, listener, ListenerPolicy(), node_id=1).protocol

    def _record(self, header: RequestHeader, body: Any) -> None:
        instance = header.client_instance_id if header.header_version >= 3 else None
        if instance is None:
            instance = getattr(body, "client_instance_id", None)
        self.seen.append(
            Seen(
                header.api_key,
                header.api_version,
                header.header_version,
                header.client_id,
                instance,
                body,
                time.monotonic(),
            )
        )

    @staticmethod
    def _next(script: list[int]) -> int:
        return script.pop(0) if len(script) > 1 else script[0]

    async def _get(self, conn: ConnectionState, request: Request) -> Reply:
        header, body = request.header, request.body()
        self._record(header, body)
        code = self._next(self.get_script)
        values = {
            "throttle_time": 0,
            "error_code": ErrorCode(code),
            "client_instance_id": getattr(body, "client_instance_id", uuid.UUID(int=0)),
            "subscription_id": 1234 if code == 0 else 0,
            "accepted_compression_types": [4, 3, 1, 2] if code == 0 else [],
            "push_interval": self.interval_ms if code == 0 else 0,
            "telemetry_max_bytes": self.max_bytes if code == 0 else 0,
            "delta_temporality": self.delta and code == 0,
            "requested_metrics": list(self.requested) if code == 0 else [],
        }
        return Answer(
            encode_response(header, build(response_type(GET, header.api_version), values))
        )

    async def _push(self, conn: ConnectionState, request: Request) -> Reply:
        header, body = request.header, request.body()
        self._record(header, body)
        code = self._next(self.push_script)
        values = {"throttle_time": 0, "error_code": ErrorCode(code)}
        return Answer(
            encode_response(header, build(response_type(PUSH, header.api_version), values))
        )
