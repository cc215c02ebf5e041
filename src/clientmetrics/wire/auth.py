"""The authentication state of one server connection, as data.

States are an enum; transitions are a table keyed by (state, event), so the
machine can be read whole. ``wire.server`` drives it; nothing here does I/O.

A listener that does not require SASL starts ``READY``; a SASL listener starts
``AWAITING_HANDSHAKE`` and serves nothing but ApiVersions, SaslHandshake and
SaslAuthenticate until ``READY``. Re-authentication (KIP-368) is a new
handshake on a ``READY`` connection: requests keep being served meanwhile,
under the principal already proven.

A mechanism whose check is costly (PLAIN's PBKDF2) sends the connection to
``VERIFYING`` while the shell runs the derivation off its event loop; the
connection reads nothing meanwhile and the answer decides.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from clientmetrics.errors import ClientMetricsError

__all__ = ["AuthEvent", "AuthState", "IllegalTransition", "transition"]


class AuthState(enum.Enum):
    """Where a connection stands in its SASL exchange."""

    #: SASL listener, nothing proven yet: only ApiVersions and SaslHandshake.
    AWAITING_HANDSHAKE = "awaiting_handshake"
    #: A mechanism was accepted; the first SaslAuthenticate is due.
    AWAITING_AUTHENTICATE = "awaiting_authenticate"
    #: A multi-round exchange (SCRAM) is under way.
    AUTHENTICATING = "authenticating"
    #: The shell runs the exchange's costly derivation (PLAIN's PBKDF2); its result decides.
    VERIFYING = "verifying"
    #: Passthrough: a SaslAuthenticate went upstream; its answer decides.
    AWAITING_VERDICT = "awaiting_verdict"
    #: Serving requests (authenticated, or no authentication required).
    READY = "ready"
    #: Authentication failed or the peer broke the protocol: nothing more is served.
    CLOSED = "closed"


class AuthEvent(enum.Enum):
    """What happened to the exchange."""

    HANDSHAKE_ACCEPTED = "handshake_accepted"
    TOKEN_EXCHANGED = "token_exchanged"  # a round that does not finish the exchange
    AUTHENTICATED = "authenticated"
    DERIVATION_STARTED = "derivation_started"  # the costly step went to the shell
    FORWARDED = "forwarded"  # passthrough: a SaslAuthenticate sent upstream
    UPSTREAM_CONTINUED = "upstream_continued"
    UPSTREAM_SUCCEEDED = "upstream_succeeded"
    FAILED = "failed"


class IllegalTransition(ClientMetricsError):
    """A local action the authentication state does not allow (a bug in the caller)."""


_S, _E = AuthState, AuthEvent
TRANSITIONS: Mapping[tuple[AuthState, AuthEvent], AuthState] = MappingProxyType(
    {
        (_S.AWAITING_HANDSHAKE, _E.HANDSHAKE_ACCEPTED): _S.AWAITING_AUTHENTICATE,
        (_S.READY, _E.HANDSHAKE_ACCEPTED): _S.AWAITING_AUTHENTICATE,  # KIP-368
        (_S.AWAITING_AUTHENTICATE, _E.TOKEN_EXCHANGED): _S.AUTHENTICATING,
        (_S.AUTHENTICATING, _E.TOKEN_EXCHANGED): _S.AUTHENTICATING,
        (_S.AWAITING_AUTHENTICATE, _E.AUTHENTICATED): _S.READY,
        (_S.AUTHENTICATING, _E.AUTHENTICATED): _S.READY,
        (_S.AWAITING_AUTHENTICATE, _E.DERIVATION_STARTED): _S.VERIFYING,
        (_S.AUTHENTICATING, _E.DERIVATION_STARTED): _S.VERIFYING,
        (_S.VERIFYING, _E.TOKEN_EXCHANGED): _S.AUTHENTICATING,
        (_S.VERIFYING, _E.AUTHENTICATED): _S.READY,
        (_S.AWAITING_AUTHENTICATE, _E.FORWARDED): _S.AWAITING_VERDICT,
        (_S.AUTHENTICATING, _E.FORWARDED): _S.AWAITING_VERDICT,
        (_S.AWAITING_VERDICT, _E.UPSTREAM_CONTINUED): _S.AUTHENTICATING,
        (_S.AWAITING_VERDICT, _E.UPSTREAM_SUCCEEDED): _S.READY,
        **{(state, _E.FAILED): _S.CLOSED for state in AuthState},
    }
)
"""(state, event) -> next state. Anything missing is illegal."""


def transition(state: AuthState, event: AuthEvent) -> AuthState:
    """The state after ``event``; raises ``IllegalTransition`` if the table has no entry."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise IllegalTransition(f"{event.value} is not allowed in state {state.value}") from None
