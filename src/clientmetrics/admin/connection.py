"""One admin connection to a Kafka broker: transport, framing, correlation, versions.

Layers, each translating the errors of the one below once:

* ``Transport`` opens a ``Channel`` (bytes in, bytes out): TCP, optionally TLS.
  It is the one narrow seam tests can replace.
* ``BrokerConnection`` frames requests with ``clientmetrics.wire``, numbers them,
  checks each response's correlation id, and negotiates versions with ApiVersions
  (the highest version both sides support).

Nothing here lets an ``OSError`` or a ``TimeoutError`` escape: callers see
``AdminError`` and its subclasses only.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from clientmetrics.admin.errors import (
    AdminAuthenticationError,
    AdminConnectionError,
    AdminError,
    AdminTimeoutError,
)
from clientmetrics.admin.properties import AdminConfig
from clientmetrics.client.sasl import SaslAuthenticationError, authenticate
from clientmetrics.wire import (
    SERVED,
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    decode_response,
    request_type,
)
from clientmetrics.wire.client import ClientFraming, NotKafka

__all__ = ["BrokerConnection", "Channel", "TcpTransport", "Transport", "api_name"]

API_VERSIONS = ApiKey.API_VERSIONS
_SOFTWARE_NAME = "clientmetrics-admin"
_SOFTWARE_VERSION = "0.1.0"


def api_name(api_key: int) -> str:
    """Kafka's ``ApiKeys`` name of an api key (``API_KEY_<n>`` for keys we never send)."""
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API_KEY_{api_key}"


class Channel(Protocol):
    """A connected byte stream."""

    async def send(self, data: bytes) -> None:
        """Write all of ``data``."""

    async def receive(self) -> bytes:
        """Some bytes; ``b""`` once the peer has closed."""

    async def close(self) -> None:
        """Close; never raises."""


class Transport(Protocol):
    """Opens channels. Raises ``OSError`` / ``ssl.SSLError``; the connection translates them."""

    async def open(self, host: str, port: int) -> Channel:
        """A channel to ``host:port``."""


class _StreamChannel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def send(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def receive(self) -> bytes:
        return await self._reader.read(65536)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError, ssl.SSLError, asyncio.CancelledError):
            await self._writer.wait_closed()


@dataclass(frozen=True)
class TcpTransport:
    """PLAINTEXT, or SSL when ``ssl_context`` is set."""

    ssl_context: ssl.SSLContext | None = None

    async def open(self, host: str, port: int) -> Channel:
        """A TCP (TLS) stream to ``host:port``."""
        server_hostname = host if self.ssl_context is not None else None
        reader, writer = await asyncio.open_connection(
            host, port, ssl=self.ssl_context, server_hostname=server_hostname
        )
        return _StreamChannel(reader, writer)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return f"SSL handshake failed: {exc.reason or exc}"
    if isinstance(exc, OSError) and not isinstance(exc, socket.gaierror) and exc.errno:
        # asyncio's connect errors carry "Connect call failed (...)" as strerror.
        return os.strerror(exc.errno)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class BrokerConnection:
    """A negotiated connection to one broker; use ``connect`` to make one."""

    def __init__(self, channel: Channel, address: str, config: AdminConfig) -> None:
        self.address = address
        self._channel = channel
        self._config = config
        self._framing = ClientFraming()
        self._versions: dict[int, tuple[int, int]] = {API_VERSIONS: SERVED[API_VERSIONS]}
        # One request in flight at a time: responses are matched by arrival order.
        self._lock = asyncio.Lock()
        self.broken = False
        """Set once the stream can no longer be trusted (timeout, I/O error, bad frame)."""

    @classmethod
    async def connect(
        cls, config: AdminConfig, transport: Transport | None = None
    ) -> BrokerConnection:
        """Connect to the first bootstrap address that answers ApiVersions.

        Addresses are tried in turn, sharing one deadline of ``config.timeout_s``.
        """
        transport = transport or TcpTransport(config.ssl_context)
        deadline = time.monotonic() + config.timeout_s
        failures: list[tuple[str, str]] = []
        servers = config.bootstrap_servers
        for index, (host, port) in enumerate(servers):
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            # Each server gets an equal share of what is left; a timeout names that share
            # (the time spent on this server), whichever step used it up.
            budget = max(deadline - time.monotonic(), 0.0) / (len(servers) - index)
            server_deadline = time.monotonic() + budget
            try:
                async with asyncio.timeout(budget):
                    channel = await transport.open(host, port)
            except TimeoutError:
                failures.append(
                    (address, f"connection timed out after {math.ceil(budget * 1000)} ms")
                )
                continue
            except (OSError, ssl.SSLError) as exc:
                failures.append((address, _reason(exc)))
                continue
            except UnicodeError:
                # getaddrinfo's IDNA encoding rejects names such as "a..b".
                failures.append((address, "invalid host name"))
                continue
            conn = cls(channel, address, config)
            try:
                try:
                    await conn._negotiate(max(server_deadline - time.monotonic(), 0.0))
                except AdminTimeoutError as exc:
                    raise AdminTimeoutError(address, exc.what, budget) from exc
                if config.sasl is not None:
                    try:
                        await authenticate(conn, config.sasl)
                    except SaslAuthenticationError as exc:
                        raise AdminAuthenticationError(exc.error_code, exc.message) from exc
            except AdminAuthenticationError:
                # Wrong credentials are wrong everywhere: say so rather than try on.
                await conn.close()
                raise
            except AdminError as exc:
                await conn.close()
                failures.append((address, exc.reason))
                continue
            return conn
        raise AdminConnectionError(tuple(failures))

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both this client and the broker support."""
        ours = SERVED.get(api_key)
        theirs = self._versions.get(api_key)
        if ours is not None and theirs is not None:
            low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
            if low <= high:
                return high
        raise AdminError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"The broker at {self.address} does not support {api_name(api_key)}",
        )

    def broker_versions(self, api_key: int) -> tuple[int, int] | None:
        """(min, max) the broker advertised for ``api_key``, ``None`` if absent."""
        return self._versions.get(api_key)

    async def _negotiate(self, timeout_s: float) -> None:
        version = SERVED[API_VERSIONS][1]
        for _attempt in range(2):
            fields = (
                {
                    "client_software_name": _SOFTWARE_NAME,
                    "client_software_version": _SOFTWARE_VERSION,
                }
                if version >= 3
                else {}
            )
            header = self._header(API_VERSIONS, version)
            payload = self._framing.request(header, request_type(API_VERSIONS, version)(**fields))
            frame = await self._exchange(
                payload, header.correlation_id, timeout_s, "the ApiVersions response"
            )
            # ErrorCode leads every version's body (after the v0 response header); a broker
            # that does not know our version answers UNSUPPORTED_VERSION in the v0 layout.
            raw_code = int.from_bytes(frame[4:6], "big", signed=True) if len(frame) >= 6 else 0
            code = ErrorCode.for_code(raw_code)
            layout = 0 if code is ErrorCode.UNSUPPORTED_VERSION else version
            response = self._decode_or_fail(API_VERSIONS, layout, frame)
            advertised = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
            }
            if code is ErrorCode.UNSUPPORTED_VERSION and API_VERSIONS in advertised:
                version = min(version, advertised[API_VERSIONS][1])
                continue
            if code is not ErrorCode.NONE:
                raise AdminError(code)
            self._versions = advertised
            return
        raise AdminError(ErrorCode.UNSUPPORTED_VERSION, "ApiVersions negotiation failed")

    async def request(self, api_key: int, make_body: Callable[[int], Any]) -> Any:
        """Send ``make_body(version)`` at the negotiated version; the decoded response body."""
        version = self.version_for(api_key)
        return await self._round_trip(
            api_key,
            version,
            make_body(version),
            self._config.timeout_s,
            f"the {api_name(api_key)} response",
        )

    async def _round_trip(
        self, api_key: int, version: int, body: Any, timeout_s: float, what: str
    ) -> Any:
        header = self._header(api_key, version)
        frame = await self._exchange(
            self._framing.request(header, body), header.correlation_id, timeout_s, what
        )
        return self._decode_or_fail(api_key, version, frame)

    async def sasl_request(self, api_key: int, version: int, body: Any, what: str) -> Any:
        """A SASL request at the version the exchange speaks (``client.sasl``)."""
        return await self._round_trip(api_key, version, body, self._config.timeout_s, what)

    def _header(self, api_key: int, version: int) -> RequestHeader:
        return self._framing.header(api_key, version, self._config.client_id)

    async def _exchange(
        self, payload: bytes, correlation_id: int, timeout_s: float, what: str
    ) -> bytes:
        async with self._lock:
            if self.broken:
                raise AdminError(
                    ErrorCode.NETWORK_EXCEPTION, f"The connection to {self.address} is broken"
                )
            try:
                return await self._send_and_receive(payload, correlation_id, timeout_s, what)
            except AdminError:
                # A late or stray response would now be read as the next one's.
                self.broken = True
                raise

    async def _send_and_receive(
        self, payload: bytes, correlation_id: int, timeout_s: float, what: str
    ) -> bytes:
        try:
            async with asyncio.timeout(timeout_s):
                await self._channel.send(payload)
                got, frame = await self._next_frame()
        except TimeoutError as exc:
            raise AdminTimeoutError(self.address, what, timeout_s) from exc
        except (OSError, ssl.SSLError) as exc:
            reason = _reason(exc)
            raise AdminError(
                ErrorCode.NETWORK_EXCEPTION,
                f"Connection to {self.address} failed: {reason}",
                reason=reason,
            ) from exc
        # Checked before decoding: a stray frame would not even decode as this API.
        if got != correlation_id:
            raise AdminError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Correlation id mismatch from {self.address}: sent {correlation_id}, got {got}",
            )
        return frame

    def _decode_or_fail(self, api_key: int, version: int, frame: bytes) -> Any:
        try:
            _correlation_id, response = decode_response(api_key, version, frame)
        except ProtocolError as exc:
            raise AdminError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Malformed response from {self.address}: {exc}"
            ) from exc
        return response

    async def _next_frame(self) -> tuple[int, bytes]:
        while True:
            data = await self._channel.receive()
            if not data:
                reason = "disconnected before a response was received"
                raise AdminError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"The server at {self.address} {reason}",
                    reason=reason,
                )
            try:
                frames = self._framing.feed(data)
            except NotKafka as exc:
                raise AdminError(
                    ErrorCode.NETWORK_EXCEPTION, f"{self.address} is {exc}", reason=str(exc)
                ) from exc
            except ProtocolError as exc:
                raise AdminError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"Malformed response from {self.address}: {exc}"
                ) from exc
            if frames:
                # Requests are sent one at a time, so at most one frame is outstanding.
                return frames[0]
