"""The server side of one Kafka connection, without I/O (in the manner of h11).

Frames in, results out, bytes back. ``ServerConnection`` owns what both gateway
modes share: framing (its ``framer``, ``wire.framing.FrameReader``), request
headers, KIP-1313 admission, the authentication state (``wire.sasl``), the
response order and the rejection policy. The asyncio shell only moves buffers
and runs handlers:

* the shell receives into the buffers ``framer`` lends it; ``framer`` hands back
  complete frames (or raises, and ``framing_failed`` gives the ``Close``);
* ``receive_frame(frame, now_ms)``, the one entry, returns one result per
  request: ``Serve`` (a local handler answers), ``Forward`` (proxy: send it
  upstream), ``Respond`` (the core answered) or ``Close`` (write what is
  ready, then close), or ``Verify`` (SASL needs a costly derivation: run it
  off the event loop, holding the frames behind it, then ``verified(result)``
  returns the answer's result);
* ``complete(request_id, data)`` hands in an answer, in any order; ``fail``
  turns a handler's exception into the answer the policy gives it;
* ``data_to_send()`` returns the bytes to write, always in request order.

The core also records what a connection says about itself: its client id and
KIP-1313 instance id from the first request, and the client software from
ApiVersions v3+ (refused with INVALID_REQUEST, as Kafka refuses it, when the
name or version is not Kafka's pattern, forwarded or not).

Requests are numbered in arrival order; a request that gets no response
(Produce with acks=0) takes no number.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType

from clientmetrics.wire.api import ApiKey
from clientmetrics.wire.auth import AuthState, IllegalTransition
from clientmetrics.wire.client_software import software_valid
from clientmetrics.wire.codec import ZERO_UUID
from clientmetrics.wire.errors import ErrorCode, FrameTooLarge, ProtocolError, UnsupportedApi
from clientmetrics.wire.framing import DEFAULT_MAX_FRAME_BYTES, FrameReader, frame_bytes
from clientmetrics.wire.headers import RequestHeader, parse_request_header
from clientmetrics.wire.limits import RequestBudget
from clientmetrics.wire.messages import decode_body
from clientmetrics.wire.replies import error_response
from clientmetrics.wire.results import (
    NO_RESPONSE,
    Close,
    CloseReason,
    Forward,
    Request,
    Respond,
    Result,
    Serve,
    Verify,
)
from clientmetrics.wire.sasl import (
    ANONYMOUS,
    ListenerPolicy,
    SaslSession,
    SaslStep,
    expects_response,
)
from clientmetrics.wire.schemas import SERVED

__all__ = [
    "ANONYMOUS",
    "MAX_IN_FLIGHT",
    "NO_RESPONSE",
    "Close",
    "CloseReason",
    "Forward",
    "ListenerPolicy",
    "Request",
    "Respond",
    "Result",
    "Serve",
    "ServerConnection",
    "Verify",
]

#: Requests received and not yet answered before a connection stops being read.
MAX_IN_FLIGHT = 1024
#: ``connections.max.idle.ms``'s default in Kafka.
DEFAULT_IDLE_MS = 600_000


_ALWAYS_ALLOWED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_SASL_KEYS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_API_VERSIONS_MAX = SERVED[ApiKey.API_VERSIONS][1]
_TELEMETRY_KEYS = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


class ServerConnection:
    """One client connection's protocol state. Not thread-safe; one per connection.

    ``served``: api key -> (min, max) versions local handlers answer (``Serve``).
    ``forwarding``: proxy mode; requests for other keys become ``Forward``,
    otherwise they are refused as Kafka refuses them. ``advertised``: the api
    list an ApiVersions error carries. ``principal``: the identity the
    transport already proved (a TLS client certificate), else anonymous.
    """

    def __init__(
        self,
        *,
        served: Mapping[int, tuple[int, int]] = MappingProxyType({}),
        forwarding: bool = False,
        advertised: Mapping[int, tuple[int, int]] | None = None,
        policy: ListenerPolicy | None = None,
        principal: str = ANONYMOUS,
        max_request_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        budget: RequestBudget | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        idle_ms: int = DEFAULT_IDLE_MS,
        now_ms: int = 0,
    ) -> None:
        self._served = served
        self._forwarding = forwarding
        self._advertised = advertised
        self._max_request_bytes = max_request_bytes
        #: The one way bytes come in: the shell lends its buffers, gets frames back.
        self.framer = FrameReader(max_request_bytes, limit=self._frame_limit, budget=budget)
        self._max_in_flight = max_in_flight
        self._idle_ms = idle_ms
        self._last_request_ms = now_ms
        self._next_id = 0
        self._head = 0
        self._done: dict[int, list[bytes | bytearray]] = {}
        self._headers: dict[int, RequestHeader] = {}
        self._closed = False
        #: The SaslAuthenticate being verified (the shell holds the frames behind it).
        self._verifying: int | None = None
        self.sasl = SaslSession(policy or ListenerPolicy(), principal)
        self.requests = 0
        self.client_id: str | None = None
        #: KIP-1313: the instance id the connection's first (header v3) request carried.
        self.header_instance_id: uuid.UUID | None = None
        #: ApiVersions v3+: the client software's name and version, once sent.
        self.software: tuple[str, str] | None = None

    # -- state seen by the shell ----------------------------------------------
    @property
    def principal(self) -> str:
        """The authenticated principal (``User:ANONYMOUS`` until proven otherwise)."""
        return self.sasl.principal

    def set_transport_principal(self, principal: str) -> None:
        """The identity the transport proved (TLS client certificate), before any request.

        SASL, where the listener requires it, replaces it once authenticated.
        """
        if self.requests:
            raise IllegalTransition("the transport principal is set before the first request")
        self.sasl.principal = principal

    @property
    def state(self) -> AuthState:
        return self.sasl.state

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def verifying(self) -> bool:
        """A ``Verify`` was returned and ``verified`` not called yet."""
        return self._verifying is not None

    @property
    def in_flight(self) -> int:
        """Requests received that owe a response not yet written."""
        return self._next_id - self._head

    @property
    def advertised(self) -> Mapping[int, tuple[int, int]]:
        """The api versions this connection's server advertises (default: those it serves)."""
        return self._served if self._advertised is None else self._advertised

    @property
    def max_request_bytes(self) -> int:
        return self._max_request_bytes

    @property
    def frame_limit(self) -> int:
        """The largest frame taken now: ``max_request_bytes``, or less (Kafka's
        ``sasl.server.max.receive.size``) until a client that must authenticate has."""
        return self.framer.limit()

    def _frame_limit(self) -> int:
        sasl = self.sasl
        if sasl.policy.requires_sasl and not sasl.proven:
            return min(self._max_request_bytes, sasl.policy.max_receive_bytes)
        return self._max_request_bytes

    def should_pause(self) -> bool:
        """Stop reading: too many requests in flight, no budget for the next one, or a
        SASL derivation under way."""
        return (
            self.framer.starved
            or self._closed
            or self._verifying is not None
            or self.in_flight >= self._max_in_flight
        )

    def may_resume(self) -> bool:
        """Read again (with hysteresis, so a full pipeline does not flap)."""
        return (
            not self.framer.starved
            and not self._closed
            and self._verifying is None
            and self.in_flight <= self._max_in_flight // 2
        )

    def expired(self, now_ms: int) -> Close | None:
        """A ``Close`` if the connection idled too long or outlived its SASL session.

        Idle means no complete request for ``idle_ms`` and none in flight: bytes
        trickling in (slowloris) do not count as activity.
        """
        if self._closed:
            return None
        if self.sasl.session_expired(now_ms):
            return self._close(CloseReason.SESSION_EXPIRED, "not re-authenticated in time")
        if self.in_flight == 0 and now_ms - self._last_request_ms >= self._idle_ms:
            return self._close(CloseReason.IDLE, f"idle for {now_ms - self._last_request_ms} ms")
        return None

    # -- frames in -----------------------------------------------------------
    def framing_failed(self, error: ProtocolError) -> Close:
        """The ``Close`` for a stream ``framer`` refused (a bad or too large size prefix)."""
        if isinstance(error, FrameTooLarge):
            return self._close(CloseReason.FRAME_TOO_LARGE, str(error))
        return self._close(CloseReason.PROTOCOL_ERROR, str(error))

    def receive_frame(self, frame: bytes | bytearray, now_ms: int) -> Result:
        """The result for one request frame ``framer`` cut (without its size prefix).

        Not while ``verifying``: the shell holds the frames behind a ``Verify`` until
        ``verified``.
        """
        if self._closed:
            return Close(CloseReason.PROTOCOL_ERROR, "connection closed")
        if self._verifying is not None:
            raise IllegalTransition("a frame was handed in while SASL is verifying")
        self._last_request_ms = now_ms
        try:
            self.framer.taken(len(frame))
        except FrameTooLarge as exc:  # cut before the client authenticated: never parsed
            return self._close(CloseReason.FRAME_TOO_LARGE, str(exc))
        try:
            header, offset = parse_request_header(frame)  # type: ignore[arg-type]
        except (ProtocolError, UnsupportedApi) as exc:
            return self._close(CloseReason.PROTOCOL_ERROR, str(exc))
        key = header.api_key
        if self.sasl.session_expired(now_ms) and key not in _SASL_KEYS:
            return self._close(CloseReason.SESSION_EXPIRED, "not re-authenticated in time")
        if not self.sasl.proven and key not in _ALWAYS_ALLOWED:
            return self._close(CloseReason.UNAUTHENTICATED, f"api key {key} before authentication")
        try:
            wanted = expects_response(header, frame, offset)
        except ProtocolError as exc:
            return self._close(CloseReason.PROTOCOL_ERROR, str(exc))
        request = Request(self._number() if wanted else NO_RESPONSE, header, frame, offset)
        admitted = self._admit(header)
        if admitted is not ErrorCode.NONE:
            return self.reject(request, admitted, rejected="kip1313_instance_id")
        if key == ApiKey.API_VERSIONS:
            if header.api_version > _API_VERSIONS_MAX:
                # Forwarded or not, a newer ApiVersions than the codec reads is answered
                # as an older broker answers it; the client retries at the version listed.
                return self.reject(request, ErrorCode.UNSUPPORTED_VERSION)
            if not self._record_software(header, frame, offset):
                return self.reject(request, ErrorCode.INVALID_REQUEST, rejected="client_software")
        if key in _SASL_KEYS:
            return self._sasl(request, now_ms)
        versions = self._served.get(key)
        if versions is not None:
            if versions[0] <= header.api_version <= versions[1]:
                return Serve(request)
            return self.reject(request, ErrorCode.UNSUPPORTED_VERSION)
        if self._forwarding:
            return Forward(request)
        return self.reject(request, ErrorCode.UNSUPPORTED_VERSION)

    def _number(self) -> int:
        number = self._next_id
        self._next_id += 1
        return number

    def _admit(self, header: RequestHeader) -> ErrorCode:
        """KIP-1313's per-connection rules for a request header.

        The first request fixes the client id for the whole connection. If it used
        header v3 it fixes the instance id too: every later request (SaslHandshake
        excepted) must carry the same, non-zero id.
        """
        first = self.requests == 0
        self.requests += 1
        if first:
            self.client_id = header.client_id
            if header.header_version >= 3:
                if header.client_instance_id in (None, ZERO_UUID):
                    return ErrorCode.INVALID_REQUEST
                self.header_instance_id = header.client_instance_id
            return ErrorCode.NONE
        if self.header_instance_id is None or header.api_key == ApiKey.SASL_HANDSHAKE:
            return ErrorCode.NONE
        if header.header_version < 3 or header.client_instance_id != self.header_instance_id:
            return ErrorCode.INVALID_REQUEST
        return ErrorCode.NONE

    def _record_software(
        self, header: RequestHeader, frame: bytes | bytearray, offset: int
    ) -> bool:
        """Record ApiVersions v3+ client software; False if Kafka would refuse it.

        A body that does not decode is left to whoever answers the request.
        """
        if header.api_version < 3:
            return True
        try:
            body = decode_body(header, bytes(frame), offset)
        except (ProtocolError, UnsupportedApi):
            return True
        name = getattr(body, "client_software_name", None)
        version = getattr(body, "client_software_version", None)
        if not software_valid(name, version):
            return False
        if name is not None:
            self.software = (str(name), str(version or ""))
        return True

    def _sasl(self, request: Request, now_ms: int) -> Result:
        step = self.sasl.receive(request.header, request.frame, request.offset, now_ms)
        if step.forward:
            return Forward(request, sasl_verdict=step.verdict)
        if step.derive is not None:
            self._verifying = request.id
            return Verify(request.id, step.derive)
        return self._sasl_answered(request.id, step)

    def _sasl_answered(self, request_id: int, step: SaslStep) -> Respond | Close:
        if step.response is not None:
            self._answer(request_id, step.response)
        if step.close is not None:
            return self._close(CloseReason.AUTHENTICATION_FAILED, step.close)
        return Respond(request_id, authenticated=step.authenticated)

    def verified(self, derived: bytes, now_ms: int) -> list[Result]:
        """Finish the SASL exchange ``Verify`` asked for with its derivation's result.

        Returns the answer's ``Respond`` (authenticated, or a failure's ``Close``,
        with the same answer and message as a check done at once); the shell then
        hands in the frames it held meanwhile. Nothing if the connection was closed
        in between.
        """
        request_id, self._verifying = self._verifying, None
        if request_id is None:
            raise IllegalTransition("verified() without a Verify")
        if self._closed:
            return []
        self._last_request_ms = now_ms
        return [self._sasl_answered(request_id, self.sasl.verified(derived, now_ms))]

    # -- answers in -----------------------------------------------------------
    def reject(
        self, request: Request, code: ErrorCode, *, rejected: str | None = None
    ) -> Respond | Close:
        """Answer ``request`` with ``code``; close where Kafka cannot answer (unknown api).

        ``rejected``: the per-connection rule the request broke, for the driver's log.
        """
        try:
            data = error_response(request.header, code, api_keys=self._advertised)
        except UnsupportedApi:
            header = request.header
            return self._close(
                CloseReason.UNSUPPORTED_API,
                f"unsupported api key {header.api_key} version {header.api_version}",
            )
        self._answer(request.id, data)
        return Respond(request.id, code, rejected=rejected)

    def fail(self, request: Request, error: BaseException) -> Respond | Close:
        """The answer the policy gives a handler's exception (the one error policy).

        A malformed body closes the connection, an unsupported version gets
        UNSUPPORTED_VERSION, anything else UNKNOWN_SERVER_ERROR -- but for the two
        telemetry RPCs: a KIP-714 client (Java's, franz-go's) switches its telemetry
        off for good on an unlisted code, so a fault of ours there is
        THROTTLING_QUOTA_EXCEEDED, after which it asks again one interval later.
        """
        if isinstance(error, UnsupportedApi):
            return self.reject(request, ErrorCode.UNSUPPORTED_VERSION)
        if isinstance(error, ProtocolError):
            return self._close(CloseReason.PROTOCOL_ERROR, str(error))
        if request.header.api_key in _TELEMETRY_KEYS:
            return self.reject(request, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        return self.reject(request, ErrorCode.UNKNOWN_SERVER_ERROR)

    def complete(
        self, request_id: int, data: bytes | bytearray | None, *, framed: bool = True
    ) -> None:
        """Hand in the answer to ``request_id``: a response frame, ``None`` for none.

        ``framed``: ``data`` carries its 4-byte size prefix (local handlers);
        upstream responses come without it.
        """
        if request_id == NO_RESPONSE:
            return
        if not data:
            self._done[request_id] = []
        elif framed:
            self._done[request_id] = [data]
        else:  # large upstream responses are written without a copy
            self._done[request_id] = frame_bytes(data)

    def _answer(self, request_id: int, data: bytes) -> None:
        self.complete(request_id, data)

    def upstream_authenticated(self, error_code: int) -> Close | None:
        """Passthrough: the upstream answered a forwarded SaslAuthenticate with ``error_code``.

        None and ``state`` READY: the exchange is complete and the client authenticated.
        """
        detail = self.sasl.upstream_verdict(error_code)
        if detail is not None:
            return self._close(CloseReason.AUTHENTICATION_FAILED, detail)
        return None

    # -- bytes out ------------------------------------------------------------
    def data_to_send(self) -> list[bytes | bytearray]:
        """The response bytes now writable, in request order (possibly none)."""
        out: list[bytes | bytearray] = []
        done = self._done
        while self._head in done:
            out += done.pop(self._head)
            self._head += 1
        return out

    def close(self, reason: CloseReason, detail: str) -> Close:
        """Close for a reason the shell found (a handler's ``Close``, the idle sweep)."""
        return self._close(reason, detail)

    def _close(self, reason: CloseReason, detail: str) -> Close:
        if not self._closed:
            self._closed = True
            self.sasl.fail()
            self.framer.settle()
        return Close(reason, detail)

    def connection_lost(self) -> None:
        """The transport closed: return any reserved budget and drop what is buffered
        (a partial frame, answers not written) at once, not whenever a garbage
        collection gets to the connection's objects."""
        self._closed = True
        self.framer.clear()
        self._done.clear()
