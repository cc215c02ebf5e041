"""The contract between the connection core and the SASL mechanisms.

Sans-IO: nothing here reads a clock or touches a socket; times are epoch
milliseconds passed in. The connection core (``wire.server``, ``wire.sasl``)
drives a ``SaslServer`` through SaslHandshake / SaslAuthenticate without knowing
any mechanism; ``clientmetrics.security`` implements them (PLAIN, SCRAM,
OAUTHBEARER). The contract lives here, below both, so that ``wire`` needs nothing
from ``security``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from clientmetrics.errors import ClientMetricsError

__all__ = [
    "ANONYMOUS",
    "MAX_RECEIVE_BYTES",
    "Authenticated",
    "AuthenticationFailed",
    "DeferringExchange",
    "Derivation",
    "SaslExchange",
    "SaslServer",
    "UnsupportedMechanism",
    "max_message_bytes",
]

#: Kafka's principal for a connection that did not authenticate.
ANONYMOUS = "User:ANONYMOUS"

#: Kafka's ``sasl.server.max.receive.size`` default: the largest request a client
#: may send before it is authenticated (a larger size prefix closes the connection
#: before a byte of the body is buffered).
MAX_RECEIVE_BYTES = 512 * 1024

#: The largest client message each mechanism takes, step by step (the last entry
#: holds for every later step), checked before the message is parsed. Parsing is
#: linear but not free: scramp runs SASLprep over a SCRAM user name at several
#: microseconds a character, and a JWT is base64- and JSON-decoded and hashed whole,
#: all on the event loop. Real messages are far below these: a SCRAM client-first
#: message is a GS2 header, the user name and a nonce; a client-final one a nonce
#: and a proof; a PLAIN message a user name and a password; an OAUTHBEARER one a
#: JWT (identity providers' tokens stay within a few KiB, 16 KiB allows for large
#: group claims).
_MESSAGE_LIMITS: dict[str, tuple[int, ...]] = {
    "PLAIN": (8 * 1024, 1024),
    "SCRAM-SHA-256": (512, 1024),
    "SCRAM-SHA-512": (512, 1024),
    "OAUTHBEARER": (16 * 1024, 1024),
}


def max_message_bytes(mechanism: str, step: int) -> int:
    """The largest ``step``-th (from 0) client message ``mechanism`` takes.

    Mechanisms not listed here (passed through to a cluster in proxy mode) are
    bounded by ``MAX_RECEIVE_BYTES`` alone.
    """
    limits = _MESSAGE_LIMITS.get(mechanism)
    if limits is None:
        return MAX_RECEIVE_BYTES
    return limits[min(step, len(limits) - 1)]


class AuthenticationFailed(ClientMetricsError):
    """The client's credentials were refused; ``str(exc)`` is the message sent back.

    The message never says whether the user exists (no user enumeration).
    """


class UnsupportedMechanism(ClientMetricsError):
    """A SaslHandshake named a mechanism the listener does not enable."""


@dataclass(frozen=True, slots=True)
class Authenticated:
    """The outcome of a successful SASL exchange (or of a verified client certificate)."""

    principal: str
    #: When the credential stops being valid (OAUTHBEARER token ``exp``), epoch ms.
    expires_at_ms: int | None = None


class SaslExchange(Protocol):
    """One mechanism's server side of one authentication, fed the client's tokens."""

    @property
    def mechanism(self) -> str: ...

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        """The server's next token; raises ``AuthenticationFailed``."""
        ...

    @property
    def outcome(self) -> Authenticated | None:
        """Set once the exchange has completed successfully."""
        ...


@dataclass(frozen=True, slots=True)
class Derivation:
    """Costly work an exchange needs done before it can answer (PLAIN's PBKDF2).

    ``compute`` takes no argument and touches no shared state, so the caller may
    run it on another thread; what it returns goes to the exchange's ``finish``.
    """

    compute: Callable[[], bytes]


@runtime_checkable
class DeferringExchange(SaslExchange, Protocol):
    """An exchange that can hand its costly step to the caller instead of running it.

    ``respond`` still does everything at once; the connection core uses ``begin``
    and ``finish`` so that the derivation runs off the event loop.
    """

    def begin(self, client_message: bytes, *, now_ms: int) -> bytes | Derivation:
        """The server's next token, or the work to do first; raises ``AuthenticationFailed``."""
        ...

    def finish(self, derived: bytes) -> bytes:
        """The token once ``begin``'s derivation returned ``derived``; raises
        ``AuthenticationFailed``."""
        ...


class SaslServer(Protocol):
    """The mechanisms one listener enables, and a fresh exchange per authentication."""

    @property
    def mechanisms(self) -> tuple[str, ...]: ...

    def start(self, mechanism: str) -> SaslExchange:
        """A new exchange; raises ``UnsupportedMechanism``."""
        ...
