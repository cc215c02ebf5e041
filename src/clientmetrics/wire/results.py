"""What the connection core (``wire.server``) returns for each request.

The shells match on these: ``Serve`` (a local handler answers), ``Forward``
(proxy: send it upstream), ``Respond`` (the core answered), ``Close`` (write
what is ready, then close) and ``Verify`` (SASL needs a costly derivation first).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from clientmetrics.wire.errors import ErrorCode
from clientmetrics.wire.headers import RequestHeader

__all__ = [
    "NO_RESPONSE",
    "Close",
    "CloseReason",
    "Forward",
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


class CloseReason(enum.Enum):
    """Why the core closes a connection."""

    PROTOCOL_ERROR = "protocol_error"
    FRAME_TOO_LARGE = "frame_too_large"
    UNSUPPORTED_API = "unsupported_api"
    UNAUTHENTICATED = "unauthenticated"
    AUTHENTICATION_FAILED = "authentication_failed"
    SESSION_EXPIRED = "session_expired"
    IDLE = "idle"


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

    ``error``: the code a refused request got (the shell may log it).
    ``authenticated``: the answer completes a successful SASL authentication.
    """

    request_id: int
    error: ErrorCode = ErrorCode.NONE
    authenticated: bool = False


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
    frames ``receive_data`` already cut are held, in order.
    """

    request_id: int
    derive: Callable[[], bytes]


Result = Serve | Forward | Respond | Close | Verify
