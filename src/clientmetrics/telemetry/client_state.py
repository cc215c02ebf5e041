"""The client half of KIP-714 as a sans-IO state machine.

States are Java's ``ClientTelemetryState``; transitions are a table keyed by
(state, event type), so the machine can be read and tested whole. The driver
(``clientmetrics.reporter``) asks :meth:`ClientTelemetry.poll` what to send,
sends it, and reports what happened as past-tense events. Time (epoch or
monotonic milliseconds, the driver's choice) and randomness are parameters.

Where this differs from Apache Kafka's client, on purpose:

* a transport failure is retried (after ``retry_backoff_ms``) unless the driver
  says it cannot be (KAFKA-19747: a disconnect disabled Java telemetry for good);
* a subscription that arrives while the client is closing is kept, so a close
  during the first handshake can still send its terminating push.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from clientmetrics.errors import ClientMetricsError
from clientmetrics.wire.codec import ZERO_UUID
from clientmetrics.wire.errors import ErrorCode

__all__ = [
    "DEFAULT_PUSH_INTERVAL_MS",
    "UNCOMPRESSED_BELOW_BYTES",
    "Action",
    "ClientState",
    "ClientTelemetry",
    "CloseRequested",
    "Closed",
    "Event",
    "PushAccepted",
    "PushFailed",
    "PushRequested",
    "ReceivedSubscription",
    "RequestFailed",
    "StateError",
    "SubscriptionFailed",
    "SubscriptionReceived",
    "SubscriptionRequested",
    "choose_compression_type",
    "error_interval_ms",
    "staggered_interval_ms",
]

DEFAULT_PUSH_INTERVAL_MS = 300000
#: Payloads smaller than this are sent uncompressed: codecs only add overhead.
UNCOMPRESSED_BELOW_BYTES = 1000
#: ``Integer.MAX_VALUE``: Java's "never" for a disabled client.
_NEVER = (1 << 31) - 1


class StateError(ClientMetricsError):
    """An event that is illegal in the machine's current state (a local bug)."""


class ClientState(enum.Enum):
    """Java's ``ClientTelemetryState``."""

    SUBSCRIPTION_NEEDED = "subscription_needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription_in_progress"
    PUSH_NEEDED = "push_needed"
    PUSH_IN_PROGRESS = "push_in_progress"
    TERMINATING_PUSH_NEEDED = "terminating_push_needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating_push_in_progress"
    TERMINATED = "terminated"


class Action(enum.Enum):
    """What the driver should send next."""

    GET_SUBSCRIPTIONS = "get_subscriptions"
    PUSH = "push"
    TERMINATING_PUSH = "terminating_push"


@dataclass(frozen=True, slots=True)
class ReceivedSubscription:
    """The useful part of a successful GetTelemetrySubscriptions response."""

    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: tuple[str, ...]
    #: v0 responses carry the (broker-assigned or echoed) id; v1 responses none.
    client_instance_id: uuid.UUID | None = None

    @property
    def wants_metrics(self) -> bool:
        """False for the KIP's "no metrics" subscription (an empty RequestedMetrics)."""
        return bool(self.requested_metrics)

    def selects(self, name: str) -> bool:
        """Whether the telemetry metric ``name`` is requested (reference §4.5)."""
        if self.requested_metrics == ("*",):
            return True
        return any(name.startswith(prefix) for prefix in self.requested_metrics)


@dataclass(frozen=True, slots=True)
class SubscriptionRequested:
    """The driver sent GetTelemetrySubscriptions."""


@dataclass(frozen=True, slots=True)
class SubscriptionReceived:
    """GetTelemetrySubscriptions answered NONE."""

    subscription: ReceivedSubscription


@dataclass(frozen=True, slots=True)
class SubscriptionFailed:
    """GetTelemetrySubscriptions answered an error code."""

    error_code: int


@dataclass(frozen=True, slots=True)
class PushRequested:
    """The driver sent PushTelemetry (terminating or not, as ``poll`` said)."""


@dataclass(frozen=True, slots=True)
class PushAccepted:
    """PushTelemetry answered NONE."""


@dataclass(frozen=True, slots=True)
class PushFailed:
    """PushTelemetry answered an error code."""

    error_code: int


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """The request got no response (disconnect, timeout, version not offered)."""

    retriable: bool = True


@dataclass(frozen=True, slots=True)
class CloseRequested:
    """The application is closing the client: send the terminating push if there is one."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The driver stopped (closed, or the bounded close wait ran out)."""


Event = (
    SubscriptionRequested
    | SubscriptionReceived
    | SubscriptionFailed
    | PushRequested
    | PushAccepted
    | PushFailed
    | RequestFailed
    | CloseRequested
    | Closed
)


def staggered_interval_ms(interval_ms: int, rng: random.Random) -> int:
    """``round(U[0.5, 1.5) x interval)``: spreads the first push of many clients."""
    return round(interval_ms * rng.uniform(0.5, 1.5)) if interval_ms > 0 else 0


def error_interval_ms(error_code: int, push_interval_ms: int | None) -> int | None:
    """KIP-714's error table (reference §4.4): ms until the next Get, ``None`` = disable.

    117 and 76 re-fetch at once; 118 and 89 after the interval (300000 if none is
    known); 42, 87, 35 and every other code stop telemetry.
    """
    code = ErrorCode.for_code(error_code)
    if code in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
        return 0
    if code in (ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED):
        return push_interval_ms if push_interval_ms else DEFAULT_PUSH_INTERVAL_MS
    return None


def choose_compression_type(
    accepted: tuple[int, ...], supported: frozenset[int], payload_size: int
) -> int:
    """The first broker-accepted codec we support; NONE for small payloads or no match."""
    if payload_size < UNCOMPRESSED_BELOW_BYTES:
        return 0
    for codec in accepted:
        if codec == 0 or codec in supported:  # NONE listed first means "send uncompressed"
            return codec
    return 0


_Handler = Callable[["ClientTelemetry", object, int], ClientState]
S = ClientState


class ClientTelemetry:
    """One client's telemetry state: subscription, schedule and error handling."""

    def __init__(
        self,
        *,
        rng: random.Random,
        client_instance_id: uuid.UUID | None = None,
        retry_backoff_ms: int = 5000,
    ) -> None:
        self._rng = rng
        self._retry_backoff_ms = retry_backoff_ms
        self.state = ClientState.SUBSCRIPTION_NEEDED
        #: KIP-1313: generated by the client; under v0 a broker may assign it instead.
        self.client_instance_id = client_instance_id
        self.subscription: ReceivedSubscription | None = None
        self.enabled = True
        #: Set once, when telemetry is disabled: the code that did it (-1 for transport).
        self.disabled_by: int | None = None
        self.last_request_ms = 0
        self.interval_ms = 0

    # -- scheduling ---------------------------------------------------------

    def poll(self, now_ms: int) -> Action | None:
        """What to send now, or ``None`` (nothing is due, or telemetry is off)."""
        if self.state is S.TERMINATING_PUSH_NEEDED:
            return Action.TERMINATING_PUSH
        if not self.enabled or now_ms < self.last_request_ms + self.interval_ms:
            return None
        if self.state is S.SUBSCRIPTION_NEEDED:
            return Action.GET_SUBSCRIPTIONS
        if self.state is S.PUSH_NEEDED:
            return Action.PUSH
        return None

    def time_to_next_ms(self, now_ms: int) -> int | None:
        """Milliseconds until ``poll`` may return an action; ``None`` = only an event can."""
        if self.state is S.TERMINATING_PUSH_NEEDED:
            return 0
        if not self.enabled or self.state not in (S.SUBSCRIPTION_NEEDED, S.PUSH_NEEDED):
            return None
        return max(0, self.last_request_ms + self.interval_ms - now_ms)

    # -- events -------------------------------------------------------------

    def handle(self, event: Event, now_ms: int) -> ClientState:
        """Apply ``event``; return the new state. Raises ``StateError`` if illegal here."""
        handler = _TRANSITIONS.get((self.state, type(event)))
        if handler is None:
            raise StateError(f"{type(event).__name__} is not allowed in state {self.state.name}")
        self.state = handler(self, event, now_ms)
        return self.state

    def _disable(self, code: int) -> ClientState:
        if self.enabled:
            self.enabled = False
            self.disabled_by = code
        self.interval_ms = _NEVER
        return S.SUBSCRIPTION_NEEDED

    def _interval(self) -> int | None:
        return self.subscription.push_interval_ms if self.subscription else None

    def _sent(self, _event: object, now_ms: int) -> ClientState:
        self.last_request_ms = now_ms
        return {
            S.SUBSCRIPTION_NEEDED: S.SUBSCRIPTION_IN_PROGRESS,
            S.PUSH_NEEDED: S.PUSH_IN_PROGRESS,
            S.TERMINATING_PUSH_NEEDED: S.TERMINATING_PUSH_IN_PROGRESS,
        }[self.state]

    def _subscribed(self, event: object, now_ms: int) -> ClientState:
        assert isinstance(event, SubscriptionReceived)
        sub = event.subscription
        if sub.push_interval_ms <= 0:  # Java's validateIntervalMs
            sub = _with_interval(sub, DEFAULT_PUSH_INTERVAL_MS)
        if sub.client_instance_id not in (None, ZERO_UUID):
            self.client_instance_id = sub.client_instance_id
        self.subscription = sub
        self.last_request_ms = now_ms
        if self.state is S.TERMINATING_PUSH_NEEDED:
            return S.TERMINATING_PUSH_NEEDED if sub.wants_metrics else S.TERMINATED
        if not sub.wants_metrics:
            self.interval_ms = sub.push_interval_ms  # re-fetch, without jitter
            return S.SUBSCRIPTION_NEEDED
        self.interval_ms = staggered_interval_ms(sub.push_interval_ms, self._rng)
        return S.PUSH_NEEDED

    def _failed(self, event: object, now_ms: int) -> ClientState:
        assert isinstance(event, SubscriptionFailed | PushFailed)
        self.last_request_ms = now_ms
        interval = error_interval_ms(event.error_code, self._interval())
        if interval is None:
            return self._disable(event.error_code)
        self.interval_ms = interval
        return S.SUBSCRIPTION_NEEDED

    def _pushed(self, _event: object, now_ms: int) -> ClientState:
        assert self.subscription is not None
        self.last_request_ms = now_ms
        self.interval_ms = self.subscription.push_interval_ms  # no jitter after a push
        return S.PUSH_NEEDED

    def _lost(self, event: object, now_ms: int) -> ClientState:
        assert isinstance(event, RequestFailed)
        self.last_request_ms = now_ms
        if not event.retriable:
            return self._disable(-1)
        self.interval_ms = self._retry_backoff_ms
        return S.SUBSCRIPTION_NEEDED

    def _closing(self, _event: object, _now_ms: int) -> ClientState:
        if self.state is S.SUBSCRIPTION_NEEDED or not self.enabled:
            return S.TERMINATED  # nothing subscribed to push (Java: initiateClose no-op)
        return S.TERMINATING_PUSH_NEEDED

    def _closing_answered(self, event: object, now_ms: int) -> ClientState:
        # A response to the request that was in flight when close was asked for.
        if isinstance(event, SubscriptionReceived):
            return self._subscribed(event, now_ms)
        sub = self.subscription
        return S.TERMINATING_PUSH_NEEDED if sub is not None and sub.wants_metrics else S.TERMINATED

    def _stay(self, _event: object, _now_ms: int) -> ClientState:
        return self.state

    def _terminated(self, _event: object, _now_ms: int) -> ClientState:
        return S.TERMINATED


def _with_interval(sub: ReceivedSubscription, interval_ms: int) -> ReceivedSubscription:
    return ReceivedSubscription(
        subscription_id=sub.subscription_id,
        accepted_compression_types=sub.accepted_compression_types,
        push_interval_ms=interval_ms,
        telemetry_max_bytes=sub.telemetry_max_bytes,
        delta_temporality=sub.delta_temporality,
        requested_metrics=sub.requested_metrics,
        client_instance_id=sub.client_instance_id,
    )


_C = ClientTelemetry
_ANSWERS = (SubscriptionReceived, SubscriptionFailed, PushAccepted, PushFailed, RequestFailed)

_TRANSITIONS: Mapping[tuple[ClientState, type], _Handler] = MappingProxyType(
    {
        (S.SUBSCRIPTION_NEEDED, SubscriptionRequested): _C._sent,
        (S.SUBSCRIPTION_NEEDED, CloseRequested): _C._closing,
        (S.SUBSCRIPTION_NEEDED, Closed): _C._terminated,
        (S.SUBSCRIPTION_IN_PROGRESS, SubscriptionReceived): _C._subscribed,
        (S.SUBSCRIPTION_IN_PROGRESS, SubscriptionFailed): _C._failed,
        (S.SUBSCRIPTION_IN_PROGRESS, RequestFailed): _C._lost,
        (S.SUBSCRIPTION_IN_PROGRESS, CloseRequested): _C._closing,
        (S.SUBSCRIPTION_IN_PROGRESS, Closed): _C._terminated,
        (S.PUSH_NEEDED, PushRequested): _C._sent,
        (S.PUSH_NEEDED, CloseRequested): _C._closing,
        (S.PUSH_NEEDED, Closed): _C._terminated,
        (S.PUSH_IN_PROGRESS, PushAccepted): _C._pushed,
        (S.PUSH_IN_PROGRESS, PushFailed): _C._failed,
        (S.PUSH_IN_PROGRESS, RequestFailed): _C._lost,
        (S.PUSH_IN_PROGRESS, CloseRequested): _C._closing,
        (S.PUSH_IN_PROGRESS, Closed): _C._terminated,
        (S.TERMINATING_PUSH_NEEDED, PushRequested): _C._sent,
        **{(S.TERMINATING_PUSH_NEEDED, answer): _C._closing_answered for answer in _ANSWERS},
        (S.TERMINATING_PUSH_NEEDED, CloseRequested): _C._stay,
        (S.TERMINATING_PUSH_NEEDED, Closed): _C._terminated,
        # Whatever the terminating push's answer, the client is done (KIP-714 lets it
        # abandon the final push after UNKNOWN_SUBSCRIPTION_ID).
        **{
            (S.TERMINATING_PUSH_IN_PROGRESS, answer): _C._terminated
            for answer in (PushAccepted, PushFailed, RequestFailed)
        },
        (S.TERMINATING_PUSH_IN_PROGRESS, CloseRequested): _C._stay,
        (S.TERMINATING_PUSH_IN_PROGRESS, Closed): _C._terminated,
        (S.TERMINATED, CloseRequested): _C._stay,
        (S.TERMINATED, Closed): _C._stay,
    }
)
"""(state, event type) -> handler returning the next state. Missing pairs are illegal."""
