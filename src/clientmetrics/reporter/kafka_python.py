"""kafka-python 3.x glue: its metrics registry, resource labels and broker connections.

kafka-python 3.0.12 knows api keys 71/72 but has no message classes for them,
so the telemetry requests are sent through its own connection manager as small
adapter objects that encode and decode with ``clientmetrics.wire`` (header v3
included, which kafka-python's header classes cannot write). The requests run
on the client's own event loop (its IO thread, or the producer's sender thread
that polls it) and go to the broker connection kafka-python already holds: the
KIP asks clients to reuse a connection rather than open one for telemetry.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections.abc import Callable
from typing import Any

from clientmetrics.errors import ClientMetricsError
from clientmetrics.reporter.collect import RawMetric
from clientmetrics.reporter.protocol import telemetry_version
from clientmetrics.wire import (
    RequestHeader,
    decode_response,
    encode_request,
    request_header_version,
)

__all__ = [
    "KafkaPythonClient",
    "TransportError",
]

_CUMULATIVE_STATS = frozenset({"Total", "CumulativeSum", "CumulativeCount"})


class TransportError(ClientMetricsError):
    """A telemetry request got no response; ``retriable`` says whether to try again."""

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


class _ResponseHeader:
    __slots__ = ("correlation_id",)

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id


class _ResponseType:
    """What kafka-python's parser wants from a response class, for one request."""

    def __init__(self, api_key: int, api_version: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self._frame = b""

    def parse_header(self, buffer: Any) -> _ResponseHeader:
        # The parser hands us the whole frame: keep it and decode it in one go.
        self._frame = bytes(buffer.read())
        if len(self._frame) < 4:
            raise ValueError("response shorter than its correlation id")
        return _ResponseHeader(struct.unpack_from(">i", self._frame)[0])

    def decode(self, _buffer: Any) -> Any:
        try:
            return decode_response(self.api_key, self.api_version, self._frame)[1]
        except ClientMetricsError as exc:
            raise ValueError(str(exc)) from exc  # the parser turns it into KafkaProtocolError


class _RequestHeaderView:
    """The attributes kafka-python reads from ``request.header``."""

    def __init__(self, correlation_id: int, client_id: str | None, request: _Request) -> None:
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.request_api_key = self.api_key = request.API_KEY
        self.request_api_version = self.api_version = request.API_VERSION
        self._response_type = request.response_type

    def get_response_class(self) -> _ResponseType:
        return self._response_type


class _Request:
    """A telemetry request in the shape ``kafka.net.KafkaConnection`` sends."""

    def __init__(self, api_key: int, api_version: int, body: Any, instance_id: uuid.UUID) -> None:
        self.API_KEY = api_key
        self.API_VERSION = api_version
        self.body = body
        self.instance_id = instance_id
        self.response_type = _ResponseType(api_key, api_version)
        self._header: _RequestHeaderView | None = None

    @property
    def header(self) -> _RequestHeaderView | None:
        return self._header

    def with_header(self, correlation_id: int = 0, client_id: str | None = None) -> None:
        self._header = _RequestHeaderView(correlation_id, client_id, self)

    def expect_response(self) -> bool:
        return True

    def encode(self, version: int | None = None, header: bool = True, framed: bool = True) -> bytes:
        # kafka-python's parser always asks for a framed request with its header.
        if not (header and framed) or self._header is None:
            raise ValueError("telemetry requests are only encoded framed, with a header")
        header_version = request_header_version(self.API_KEY, self.API_VERSION)
        wire_header = RequestHeader(
            self.API_KEY,
            self.API_VERSION,
            self._header.correlation_id,
            self._header.client_id,
            self.instance_id if header_version >= 3 else None,
            header_version,
        )
        return encode_request(wire_header, self.body)

    def __str__(self) -> str:
        return f"{type(self.body).__name__}(v{self.API_VERSION})"


class KafkaPythonClient:
    """The parts of a KafkaProducer, KafkaConsumer or KafkaAdminClient the reporter uses."""

    def __init__(self, client: Any) -> None:
        self.client = client
        manager = getattr(client, "_manager", None)
        if manager is None:  # KafkaProducer keeps it behind its sender
            manager = client._sender._client._manager
        self._manager = manager
        self._net = manager._net
        self._metrics = client._metrics
        self.config: dict[str, Any] = client.config
        self._node: int | None = None
        if self._metrics is None:
            raise ClientMetricsError("the client was built with metrics_enabled=False")

    @property
    def client_id(self) -> str:
        return str(self.config.get("client_id") or "")

    @property
    def kind(self) -> str:
        """producer, consumer or admin."""
        name = type(self.client).__name__
        return {"KafkaProducer": "producer", "KafkaConsumer": "consumer"}.get(name, "admin")

    def add_connection_total(self) -> None:
        """Register Java's ``connection-creation-total`` (a CumulativeSum) next to the rate.

        kafka-python only keeps the rate; the KIP's standard Sum needs the total.
        Connections made before this call are not counted.
        """
        # kafka-python is imported only when a kafka-python client is being wrapped.
        from kafka.metrics.stats import Total

        sensor = self._metrics.get_sensor("connections-created")
        if sensor is None:
            return
        group = next(
            (n.group for n in self._metrics.metrics if n.name == "connection-creation-rate"), None
        )
        if group is None:
            return
        name = self._metrics.metric_name(
            "connection-creation-total", group, "The total number of connections established."
        )
        if name not in self._metrics.metrics:
            sensor.add(name, Total())

    def read_metrics(self) -> list[RawMetric]:
        """A snapshot of the client's metrics registry."""
        for _ in range(3):
            try:
                items = list(self._metrics.metrics.items())
                break
            except RuntimeError:  # the IO thread added a metric while we copied
                continue
        else:
            return []
        out: list[RawMetric] = []
        for metric_name, metric in items:
            try:
                value = float(metric.value())
            except (TypeError, ValueError, ZeroDivisionError):
                continue
            out.append(
                RawMetric(
                    metric_name.group,
                    metric_name.name,
                    tuple(sorted((metric_name.tags or {}).items())),
                    value,
                    type(metric.measurable).__name__ in _CUMULATIVE_STATS,
                )
            )
        return out

    def resource_attributes(self) -> dict[str, str | int]:
        """KIP-714's standard client resource labels that apply to this client."""
        config = self.config
        out: dict[str, str | int] = {}
        if self.kind == "producer" and config.get("transactional_id"):
            out["transactional_id"] = str(config["transactional_id"])
        if self.kind == "consumer":
            if config.get("group_id"):
                out["group_id"] = str(config["group_id"])
            if config.get("group_instance_id"):
                out["group_instance_id"] = str(config["group_instance_id"])
            member = _member_id(self.client)
            if member:
                out["group_member_id"] = member
        if config.get("client_rack"):
            out["client_rack"] = str(config["client_rack"])
        return out

    def call(
        self,
        api_key: int,
        body_for: Callable[[int], Any],
        instance_id: uuid.UUID,
        timeout_s: float,
    ) -> tuple[int, Any]:
        """Send one telemetry request; return (version used, decoded response body).

        Raises ``TransportError``: retriable for connection trouble, not retriable
        when the broker does not offer the telemetry APIs.
        """
        done = threading.Event()
        try:
            future = self._net.call_soon_with_future(
                self._send, api_key, body_for, instance_id, timeout_s
            )
        except RuntimeError as exc:  # the client's event loop is closed
            raise TransportError(f"client network closed: {exc}", retriable=False) from exc
        future.add_both(lambda _result: done.set())
        if not done.wait(timeout_s + 1.0):
            raise TransportError("no response in time")
        if future.failed():
            error = future.exception
            if isinstance(error, TransportError):
                raise error
            self._node = None  # pick another broker next time
            raise TransportError(f"{type(error).__name__}: {error}") from error
        version, body = future.value
        return int(version), body

    async def _send(
        self, api_key: int, body_for: Callable[[int], Any], instance_id: uuid.UUID, timeout_s: float
    ) -> tuple[int, Any]:
        # Runs on kafka-python's event loop.
        manager = self._manager
        node = self._node if self._node is not None else manager.least_loaded_node()
        if node is None:
            raise TransportError("no broker known yet")
        self._node = node  # sticky, as the KIP asks
        connection = manager.get_connection(node)
        await connection
        versions = dict(connection.broker_version_data.api_versions or {})
        version = telemetry_version(versions)
        if version is None:
            raise TransportError("the broker does not offer KIP-714 telemetry", retriable=False)
        request = _Request(api_key, version, body_for(version), instance_id)
        body = await connection.send_request(request, request_timeout_ms=int(timeout_s * 1000))
        return version, body


def _member_id(client: Any) -> str | None:
    coordinator = getattr(client, "_coordinator", None)
    generation = getattr(coordinator, "_generation", None)
    member = getattr(generation, "member_id", None)
    return member if isinstance(member, str) and member else None
