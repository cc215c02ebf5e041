"""The lifecycle of one client connection's driver, as data (as ``wire.auth`` is SASL's).

Phases are an enum; transitions are a table keyed by (phase, event), so the
lifecycle can be read whole. ``gateway.driver`` is the only user. An event the
table has no entry for leaves the phase as it is (the connection's task
draining its inbox once the connection is closing, say): every change of phase
is a line below.

Two things are not phases, because they hold beside any of them: reading paused
for back-pressure (the core's pipeline is full, or the client does not read),
and the answers under way (derived from the work outstanding, never counted).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["Event", "Phase", "advance"]


class Phase(enum.Enum):
    """Where a connection's driver stands."""

    #: Accepted; the connection's task is starting (proxy: connecting upstream).
    #: Frames wait in the inbox.
    STARTING = "starting"
    #: Too many new connections from its address: never read, aborted after a delay.
    THROTTLED = "throttled"
    #: The task waits: a frame goes to the core from the transport's callback (the
    #: proxy's hot path), and to the task only if it must be awaited.
    IDLE = "idle"
    #: The task handles the inbox (a handler, a SASL check); frames behind it wait.
    BUSY = "busy"
    #: The core closed: nothing more is read, answers under way are written, then
    #: the transport closes (or is aborted after a grace).
    CLOSING = "closing"
    #: Closing after a failed login: its answer waits for the source's delay.
    HOLDING = "holding"
    #: The transport is lost: the task winds down.
    GONE = "gone"


class Event(enum.Enum):
    """What happened to the connection."""

    THROTTLED = "throttled"  # accepted over the address's rate of new connections
    DRAINED = "drained"  # the task emptied its inbox and waits
    WOKEN = "woken"  # a frame for the task
    CLOSED = "closed"  # the core closed; answers under way are written at once
    LOGIN_FAILED = "login_failed"  # the core closed on a failed login; its answer waits
    HOLD_ENDED = "hold_ended"  # the failed login's delay is over
    LOST = "lost"  # the transport closed


_P, _E = Phase, Event
TRANSITIONS: Mapping[tuple[Phase, Event], Phase] = MappingProxyType(
    {
        (_P.STARTING, _E.THROTTLED): _P.THROTTLED,
        (_P.STARTING, _E.DRAINED): _P.IDLE,
        (_P.BUSY, _E.DRAINED): _P.IDLE,
        (_P.IDLE, _E.WOKEN): _P.BUSY,
        **{(p, _E.CLOSED): _P.CLOSING for p in (_P.STARTING, _P.IDLE, _P.BUSY)},
        **{(p, _E.LOGIN_FAILED): _P.HOLDING for p in (_P.STARTING, _P.IDLE, _P.BUSY)},
        (_P.HOLDING, _E.HOLD_ENDED): _P.CLOSING,
        **{(p, _E.LOST): _P.GONE for p in _P if p is not _P.GONE},
    }
)


def advance(phase: Phase, event: Event) -> Phase:
    """The phase after ``event`` (the same phase where the table has no entry)."""
    return TRANSITIONS.get((phase, event), phase)
