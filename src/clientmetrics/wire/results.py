"""What the connection core (``wire.server``) and the gateway's handlers return.

The core returns one of these per request: ``Serve`` (a local handler answers),
``Forward`` (send it upstream), ``Respond`` (the core answered), ``Close``
(write what is ready, then close) and ``Verify`` (SASL needs a costly
derivation first).

A handler (``gateway.handlers``) returns a ``Reply``, in the manner of
Kroxylicious' filter results: ``Answer`` (the response, now), ``AnswerLater``
(the response when an awaitable resolves; the connection's next request starts
meanwhile), ``Forward`` (send the request upstream as it came; the upstream's
answer is the answer) or ``Close``.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from clientmetrics.wire.errors import ErrorCode
from clientmetrics.wire.headers import RequestHeader
from clientmetrics.wire.messages import decode_body

__all__ = [
    "NO_RESPONSE",
    "Answer",
    "AnswerLater",
    "Close",
    "CloseReason",
    "Forward",
    "Reply",
    "Request",
    "Respond",
    "Result",
    "Serve",
    "Verify",
]

#: The id of a request that gets no response (Produce with acks=0).
NO_RESPONSE = -1


@dataclass(frozen=True, slots=True)
class Request:
    """One request: ``id`` numbers its response slot (``NO_RESPONSE`` if none is owed)."""

    id: int
    header: RequestHeader
    frame: bytes | bytearray
    #: Where the body starts in ``frame``.
    offset: int

    def body(self) -> Any:
        """The decoded body (``ProtocolError``, ``UnsupportedApi`` as ``decode_body``).

        Large frames arrive as a ``bytearray`` (zero-copy receive) and are copied
        once here; ``bytes(b)`` of a ``bytes`` object is that object.
        """
        return decode_body(self.header, bytes(self.frame), self.offset)


class CloseReason(enum.Enum):
    """Why the core closes a connection."""

    PROTOCOL_ERROR = "protocol_error"
    FRAME_TOO_LARGE = "frame_too_large"
    UNSUPPORTED_API = "unsupported_api"
    UNAUTHENTICATED = "unauthenticated"
    AUTHENTICATION_FAILED = "authentication_failed"
    SESSION_EXPIRED = "session_expired"
    IDLE = "idle"
    #: The upstream broker went away or answered garbage (proxy mode).
    UPSTREAM_FAILED = "upstream_failed"
    #: A request the client may not send that cannot be answered with an error (proxy
    #: mode: Produce with acks=0 naming a protected topic; Kafka closes there too).
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Serve:
    """A local handler must answer ``request`` and hand the bytes to ``complete``."""

    request: Request


@dataclass(frozen=True, slots=True)
class Forward:
    """Proxy mode: send ``request.frame`` upstream; its response goes to ``complete``.

    ``sasl_verdict``: the response is the upstream's SaslAuthenticate answer, to
    be reported with ``upstream_authenticated`` before it is completed.
    """

    request: Request
    sasl_verdict: bool = False


@dataclass(frozen=True, slots=True)
class Respond:
    """The core answered request ``request_id`` itself (errors, SASL).

    ``error``: the code a refused request got; ``rejected``: why, when the
    request broke a per-connection rule the driver logs (KIP-1313's instance
    id, the client software's name). ``authenticated``: the answer completes a
    successful SASL authentication.
    """

    request_id: int
    error: ErrorCode = ErrorCode.NONE
    authenticated: bool = False
    rejected: str | None = None


@dataclass(frozen=True, slots=True)
class Close:
    """Write what ``data_to_send`` returns, then close the connection."""

    reason: CloseReason
    detail: str


@dataclass(frozen=True, slots=True)
class Verify:
    """SASL needs costly work (PLAIN's PBKDF2) before request ``request_id`` is answered.

    Run ``derive`` (pure: it may run on any thread) and hand what it returns to
    ``verified``. Until then the connection is not read (``should_pause``) and the
    shell holds the frames already cut, in order, to hand them in after.
    """

    request_id: int
    derive: Callable[[], bytes]


Result = Serve | Forward | Respond | Close | Verify


@dataclass(frozen=True, slots=True)
class Answer:
    """A handler's response to its request, now: one frame with its size prefix."""

    data: bytes


@dataclass(frozen=True, slots=True)
class AnswerLater:
    """A handler's response comes when ``pending`` resolves (a framed response).

    The connection starts its next request meanwhile; responses still leave in
    request order. For waits that must not hold up a pipelining client: a push
    waiting for its durable group commit, the upstream half of a split request.
    """

    pending: Awaitable[bytes]


#: What a handler returns. ``Forward`` and ``Close`` are the core's own results:
#: a handler may pass its request upstream untouched, or end the connection.
Reply = Answer | AnswerLater | Forward | Close
