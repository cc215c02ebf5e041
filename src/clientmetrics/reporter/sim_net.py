"""The simulator's network side: one pipelined Kafka connection shared by many clients.

Each connection starts with ApiVersions (header v2, so KIP-1313's per-connection
instance-id rule does not pin it to one client) and then carries the
telemetry requests of every simulated client assigned to it, matched to their
responses by correlation id.
"""

from __future__ import annotations

import asyncio
import os
import typing
from collections.abc import Sequence
from typing import Any

from clientmetrics.client.properties import ClientSecurity
from clientmetrics.client.sasl import authenticate
from clientmetrics.errors import ClientMetricsError
from clientmetrics.wire import (
    AlterOp,
    ApiKey,
    ConfigResourceType,
    ProtocolError,
    RequestHeader,
    decode_response,
    request_type,
)
from clientmetrics.wire.client import ClientFraming

__all__ = [
    "SimConnection",
    "delete_subscription",
    "open_connection",
    "set_subscription",
]

_SOFTWARE = ("clientmetrics-simulator", "1.0")


class SimConnection(asyncio.Protocol):
    """A pipelined connection: ``call`` sends a request and awaits its response body."""

    def __init__(self, client_id: str, address: str = "") -> None:
        self.client_id = client_id
        self.address = address
        self.transport: asyncio.Transport | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._framing = ClientFraming()
        self._waiters: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._framing.feed(data)
        except ProtocolError as exc:
            # Not Kafka, or a broken stream: every waiter learns why, and the connection ends.
            self._fail(exc)
            if self.transport is not None:
                self.transport.close()
            return
        for correlation_id, frame in frames:
            waiter = self._waiters.pop(correlation_id, None)
            if waiter is None or waiter[0].done():
                continue
            future, api_key, version = waiter
            try:
                future.set_result(decode_response(api_key, version, frame)[1])
            except ClientMetricsError as exc:
                future.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError("connection closed"))

    def _fail(self, exc: Exception) -> None:
        if self._lost is None:
            self._lost = exc
        for future, _, _ in self._waiters.values():
            if not future.done():
                future.set_exception(exc)
        self._waiters.clear()

    @property
    def closed(self) -> bool:
        return self._lost is not None

    def next_correlation_id(self) -> int:
        return self._framing.next_correlation_id()

    def call(self, header: RequestHeader, body: Any) -> asyncio.Future[Any]:
        """Send ``body`` under ``header``; the future gets the decoded response body."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.transport is None or self._lost is not None:
            future.set_exception(ConnectionError("not connected"))
            return future
        self._waiters[header.correlation_id] = (future, header.api_key, header.api_version)
        self.transport.write(self._framing.request(header, body))
        return future

    async def sasl_request(self, api_key: int, version: int, body: Any, what: str) -> Any:
        """A SASL request at the version the exchange speaks (``client.sasl``)."""
        return await self.call(self._framing.header(api_key, version, self.client_id), body)

    async def handshake(self) -> None:
        """ApiVersions v3: learn which telemetry versions the broker offers."""
        header = self._framing.header(ApiKey.API_VERSIONS, 3, self.client_id)
        body = request_type(ApiKey.API_VERSIONS, 3)(
            client_software_name=_SOFTWARE[0], client_software_version=_SOFTWARE[1]
        )
        response = await self.call(header, body)
        self.api_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class SimulatorError(ClientMetricsError):
    """The simulator cannot reach its broker or gateway."""


async def open_connection(
    host: str,
    port: int,
    client_id: str,
    security: ClientSecurity | None = None,
    timeout_s: float = 30.0,
) -> SimConnection:
    """Connect (TLS when ``security`` says so), run ApiVersions, then SASL if configured.

    ``SimulatorError`` if the address refuses, answers with another protocol, or says
    nothing within ``timeout_s``.
    """
    loop = asyncio.get_running_loop()
    context = security.ssl_context if security is not None else None
    protocol: SimConnection | None = None
    try:
        async with asyncio.timeout(timeout_s):
            _, protocol = await loop.create_connection(
                lambda: SimConnection(client_id, f"{host}:{port}"),
                host,
                port,
                ssl=context,
                server_hostname=host if context is not None else None,
            )
            await protocol.handshake()
    except TimeoutError as exc:
        if protocol is not None:
            protocol.close()
        raise SimulatorError(
            f"cannot use {host}:{port}: no answer to ApiVersions within {timeout_s:g} s"
        ) from exc
    except ProtocolError as exc:
        raise SimulatorError(f"cannot use {host}:{port}: {exc}") from exc
    except (OSError, ConnectionError) as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise SimulatorError(f"cannot connect to {host}:{port}: {reason}") from exc
    if security is not None and security.sasl is not None:
        await authenticate(protocol, security.sasl)
    return protocol


#: The keys of a subscription: deleting all of them deletes it (``kafka-client-metrics --delete``).
SUBSCRIPTION_KEYS = ("metrics", "interval.ms", "match")


def _nested(cls: type, field_name: str) -> type:
    hinted: type = typing.get_args(typing.get_type_hints(cls)[field_name])[0]
    return hinted


async def set_subscription(
    host: str,
    port: int,
    name: str,
    configs: dict[str, str],
    security: ClientSecurity | None = None,
) -> None:
    """Create or update the client-metrics subscription ``name`` (IncrementalAlterConfigs).

    Raises ``ClientMetricsError`` if the broker rejects it.
    """
    ops = [(key, AlterOp.SET, value) for key, value in configs.items()]
    await _alter_subscription(host, port, name, ops, security)


async def delete_subscription(
    host: str, port: int, name: str, security: ClientSecurity | None = None
) -> None:
    """Delete the client-metrics subscription ``name``; ``ClientMetricsError`` if refused."""
    ops = [(key, AlterOp.DELETE, None) for key in SUBSCRIPTION_KEYS]
    await _alter_subscription(host, port, name, ops, security)


async def _alter_subscription(
    host: str,
    port: int,
    name: str,
    ops: Sequence[tuple[str, AlterOp, str | None]],
    security: ClientSecurity | None,
) -> None:
    conn = await open_connection(host, port, "clientmetrics-simulate-admin", security)
    try:
        request_cls = request_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
        resource_cls = _nested(request_cls, "resources")
        config_cls = _nested(resource_cls, "configs")
        body = request_cls(
            resources=(
                resource_cls(
                    resource_type=ConfigResourceType.CLIENT_METRICS,
                    resource_name=name,
                    configs=tuple(
                        config_cls(name=key, config_operation=int(op), value=value)
                        for key, op, value in ops
                    ),
                ),
            ),
            validate_only=False,
        )
        header = RequestHeader(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, conn.next_correlation_id(), conn.client_id
        )
        response = await conn.call(header, body)
        for result in response.responses:
            if int(result.error_code) != 0:
                code = int(result.error_code)
                raise ClientMetricsError(
                    f"subscription {name!r} rejected: {code} {result.error_message}"
                )
    finally:
        conn.close()
