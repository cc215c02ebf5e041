"""One TCP connection to an upstream broker, on behalf of one client connection.

Requests are written as they arrive (pipelined, as the client sent them) and a
Kafka broker answers a connection's requests in order, so responses are matched
to requests by position; the correlation id is checked, never looked up. That
lets client frames pass through with their own correlation ids, untouched, while
requests the gateway injects for itself (the upstream half of a split config
request, a Metadata probe) use ids from a range of their own.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from clientmetrics.client.sasl import (
    SaslAuthenticationError,
    SaslCredentials,
    SaslPlain,
    SaslScram,
    authenticate,
)
from clientmetrics.errors import ClientMetricsError
from clientmetrics.gateway.config import Address
from clientmetrics.gateway.transport import FrameProtocol
from clientmetrics.gateway.upstream_security import UpstreamLogin, UpstreamTls
from clientmetrics.wire import (
    ProtocolError,
    RequestHeader,
    decode_response,
    encode_request,
    request_header_version,
)
from clientmetrics.wire.framing import FrameReader

__all__ = ["Rewriter", "UpstreamError", "UpstreamLink", "UpstreamLoginFailed"]

log = structlog.get_logger("clientmetrics.gateway.proxy")

_CORRELATION = struct.Struct(">i")
#: Upstream responses can be as large as a fetch allows; the frame cap is int32.
_MAX_RESPONSE_BYTES = 2**31 - 1


#: Rewrites one upstream response frame (header included, no size prefix) before the
#: client sees it. Returns the new frame, or an awaitable of it when the rewrite must
#: first open a listener.
Rewriter = Callable[[bytes], bytes | Awaitable[bytes]]


class UpstreamError(ClientMetricsError):
    """The upstream broker could not be reached or went away."""


#: Gets the response frame to a forwarded request (a bytearray when large), or the
#: error that ended the link before it came.
Answered = Callable[[bytes | bytearray | UpstreamError], None]


def _settle(future: asyncio.Future[bytes], answer: bytes | bytearray | UpstreamError) -> None:
    if future.done():
        return
    if isinstance(answer, UpstreamError):
        future.set_exception(answer)
        future.exception()  # retrieved: a client gone first must not log it
    else:
        future.set_result(bytes(answer))


class UpstreamLoginFailed(UpstreamError):
    """The cluster refused the gateway's own SASL login (a configuration error)."""


class UpstreamLink:
    """A pipelined request/response channel to one upstream broker."""

    def __init__(
        self,
        address: Address,
        connect_timeout_s: float,
        *,
        tls: UpstreamTls | None = None,
        login: UpstreamLogin | None = None,
    ) -> None:
        self.address = address
        self._timeout = connect_timeout_s
        self._tls = tls
        self._login = login
        self._protocol: FrameProtocol | None = None
        self._pending: deque[tuple[int, Answered]] = deque()
        self._injected_ids = itertools.count(-2, -1)  # clients count up from 0
        self._failure: UpstreamError | None = None
        #: Called once when the link fails or closes.
        self.on_closed: Callable[[], None] | None = None

    async def connect(self) -> None:
        """Open the connection; raises ``UpstreamError`` if the broker cannot be reached."""
        loop = asyncio.get_running_loop()
        protocol = FrameProtocol(FrameReader(_MAX_RESPONSE_BYTES), self._on_frame, self._on_lost)
        tls = self._tls
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: protocol,
                    self.address.host,
                    self.address.port,
                    ssl=tls.context if tls is not None else None,
                    server_hostname=(tls.server_hostname or self.address.host) if tls else None,
                ),
                self._timeout,
            )
        except (TimeoutError, OSError) as exc:  # ssl.SSLError is an OSError
            raise UpstreamError(f"cannot connect to upstream {self.address}: {exc}") from exc
        self._protocol = protocol
        if self._login is not None:
            try:
                await asyncio.wait_for(self._log_in(self._login), self._timeout)
            except TimeoutError as exc:
                await self.close()
                raise UpstreamError(f"upstream {self.address}: SASL login timed out") from exc
            except UpstreamError:
                await self.close()
                raise

    async def _log_in(self, login: UpstreamLogin) -> None:
        """SaslHandshake, then SaslAuthenticate rounds as the gateway (the clients' exchange)."""
        credentials: SaslCredentials = (
            SaslPlain(login.username, login.password)
            if login.mechanism == "PLAIN"
            else SaslScram(login.mechanism, login.username, login.password)
        )
        try:
            await authenticate(self, credentials)
        except SaslAuthenticationError as exc:
            raise UpstreamLoginFailed(
                f"upstream {self.address} refused the gateway's SASL login as "
                f"{login.username}: {exc.message}"
            ) from exc

    async def sasl_request(self, api_key: int, version: int, body: Any, what: str) -> Any:
        """A request of the gateway's own on this link, its response decoded (``what``
        names it in errors); ``client.sasl.authenticate`` drives the login with it."""
        header = RequestHeader(
            api_key,
            version,
            0,  # replaced by inject's own id
            "clientmetrics-gateway",
            None,
            request_header_version(api_key, version),
        )
        try:
            frame = await self.inject(encode_request(header, body)[4:])
            return decode_response(api_key, version, frame)[1]
        except ProtocolError as exc:
            raise UpstreamError(f"upstream {self.address}, {what}: {exc}") from exc

    def forward(self, frame: bytes | bytearray, on_answer: Answered | None) -> None:
        """Write a request frame (no size prefix); ``on_answer`` gets its response frame,
        or the ``UpstreamError`` that ended the link, from the link's own callback (no
        future, no task switch: the proxy's hot path). None: no response is owed."""
        failure = self._failure
        if failure is not None:
            # A fresh one each time: the stored error would collect every raiser's frames
            # in its traceback, a cycle through this link and its client's connection.
            raise type(failure)(*failure.args)
        assert self._protocol is not None, "send before connect"
        self._protocol.write_frame(frame)
        if on_answer is not None:
            (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
            self._pending.append((correlation_id, on_answer))

    def send(self, frame: bytes | bytearray) -> asyncio.Future[bytes]:
        """Write a request frame (no size prefix); the future gets the response frame."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.forward(frame, functools.partial(_settle, future))
        return future

    def inject(self, frame_without_id: bytes) -> asyncio.Future[bytes]:
        """Send a gateway-made request; its correlation id (bytes 4-8) is overwritten."""
        correlation_id = next(self._injected_ids)
        frame = frame_without_id[:4] + _CORRELATION.pack(correlation_id) + frame_without_id[8:]
        return self.send(frame)

    async def drain(self) -> None:
        """Wait while the upstream socket's send buffer is full (back-pressure)."""
        if self._protocol is not None:
            await self._protocol.drain()

    def _on_frame(self, frame: bytes | bytearray) -> None:
        try:
            self._resolve(frame)
        except ProtocolError as exc:
            self._fail(UpstreamError(f"upstream {self.address}: {exc}"))

    def _on_lost(self, exc: Exception | None) -> None:
        reason = str(exc) if exc is not None else "closed by upstream"
        self._fail(UpstreamError(f"upstream {self.address}: {reason}"))

    def _resolve(self, frame: bytes | bytearray) -> None:
        if not self._pending:
            raise ProtocolError("upstream sent a response to no request")
        expected, on_answer = self._pending.popleft()
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        if correlation_id != expected:
            raise ProtocolError(
                f"upstream answered correlation id {correlation_id}, expected {expected}"
            )
        on_answer(frame)

    def _fail(self, error: UpstreamError) -> None:
        if self._failure is None:
            self._failure = error
            log.debug("upstream_link_closed", upstream=str(self.address), reason=str(error))
        while self._pending:
            _, on_answer = self._pending.popleft()
            on_answer(error)
        if self._protocol is not None:
            self._protocol.abort()
        on_closed, self.on_closed = self.on_closed, None
        if on_closed is not None:
            on_closed()

    async def close(self) -> None:
        """Close the connection and fail what is still pending."""
        self._fail(UpstreamError(f"upstream link to {self.address} closed"))
