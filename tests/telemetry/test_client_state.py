"""The client telemetry state machine: every (state, event) pair, timing, the error table."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clientmetrics.telemetry.client_state import (
    Action,
    ClientState,
    ClientTelemetry,
    Closed,
    CloseRequested,
    Event,
    PushAccepted,
    PushFailed,
    PushRequested,
    ReceivedSubscription,
    RequestFailed,
    StateError,
    SubscriptionFailed,
    SubscriptionReceived,
    SubscriptionRequested,
    choose_compression_type,
    staggered_interval_ms,
)

S = ClientState
INTERVAL = 10_000


def subscription(
    metrics: tuple[str, ...] = ("org.apache.kafka.",),
    interval: int = INTERVAL,
    delta: bool = True,
    instance_id: uuid.UUID | None = None,
) -> ReceivedSubscription:
    return ReceivedSubscription(
        subscription_id=7,
        accepted_compression_types=(4, 3, 1, 2),
        push_interval_ms=interval,
        telemetry_max_bytes=1 << 20,
        delta_temporality=delta,
        requested_metrics=metrics,
        client_instance_id=instance_id,
    )


class FixedRandom(random.Random):
    """uniform() always lands at the given fraction of its range."""

    def __init__(self, fraction: float) -> None:
        super().__init__(0)
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction


def machine(rng: random.Random | None = None) -> ClientTelemetry:
    return ClientTelemetry(rng=rng or random.Random(1), client_instance_id=uuid.uuid4())


PATHS: dict[ClientState, list[Event]] = {
    S.SUBSCRIPTION_NEEDED: [],
    S.SUBSCRIPTION_IN_PROGRESS: [SubscriptionRequested()],
    S.PUSH_NEEDED: [SubscriptionRequested(), SubscriptionReceived(subscription())],
    S.PUSH_IN_PROGRESS: [
        SubscriptionRequested(),
        SubscriptionReceived(subscription()),
        PushRequested(),
    ],
    S.TERMINATING_PUSH_NEEDED: [
        SubscriptionRequested(),
        SubscriptionReceived(subscription()),
        CloseRequested(),
    ],
    S.TERMINATING_PUSH_IN_PROGRESS: [
        SubscriptionRequested(),
        SubscriptionReceived(subscription()),
        CloseRequested(),
        PushRequested(),
    ],
    S.TERMINATED: [
        SubscriptionRequested(),
        SubscriptionReceived(subscription()),
        CloseRequested(),
        PushRequested(),
        PushAccepted(),
    ],
}


def in_state(state: ClientState) -> ClientTelemetry:
    m = machine()
    for event in PATHS[state]:
        m.handle(event, 1000)
    assert m.state is state
    return m


EVENTS: dict[str, Event] = {
    "get_sent": SubscriptionRequested(),
    "get_ok": SubscriptionReceived(subscription()),
    "get_err": SubscriptionFailed(89),
    "push_sent": PushRequested(),
    "push_ok": PushAccepted(),
    "push_err": PushFailed(89),
    "lost": RequestFailed(),
    "close": CloseRequested(),
    "closed": Closed(),
}
X = None  # illegal: StateError
T = S.TERMINATED
# Written out by hand from KIP-714 and Java's ClientTelemetryState, not from the table.
TPN, TPIP = S.TERMINATING_PUSH_NEEDED, S.TERMINATING_PUSH_IN_PROGRESS
SN, SIP, PN, PIP = (
    S.SUBSCRIPTION_NEEDED,
    S.SUBSCRIPTION_IN_PROGRESS,
    S.PUSH_NEEDED,
    S.PUSH_IN_PROGRESS,
)
# Columns in EVENTS order: get_sent get_ok get_err push_sent push_ok push_err lost close closed
ROWS: dict[ClientState, tuple[ClientState | None, ...]] = {
    SN:   (SIP, X,   X,   X,    X,   X,   X,   T,    T),
    SIP:  (X,   PN,  SN,  X,    X,   X,   SN,  TPN,  T),
    PN:   (X,   X,   X,   PIP,  X,   X,   X,   TPN,  T),
    PIP:  (X,   X,   X,   X,    PN,  SN,  SN,  TPN,  T),
    TPN:  (X,   TPN, TPN, TPIP, TPN, TPN, TPN, TPN,  T),
    TPIP: (X,   X,   X,   X,    T,   T,   T,   TPIP, T),
    T:    (X,   X,   X,   X,    X,   X,   X,   T,    T),
}  # fmt: skip
EXPECTED = {state: dict(zip(EVENTS, row, strict=True)) for state, row in ROWS.items()}


@pytest.mark.parametrize("state", list(ClientState), ids=lambda s: s.name)
@pytest.mark.parametrize("event_name", list(EVENTS))
def test_every_state_event_pair(state: ClientState, event_name: str) -> None:
    m = in_state(state)
    expected = EXPECTED[state][event_name]
    if expected is None:
        with pytest.raises(StateError):
            m.handle(EVENTS[event_name], 2000)
        assert m.state is state  # an illegal event changes nothing
    else:
        assert m.handle(EVENTS[event_name], 2000) is expected
        assert m.state is expected


def test_expected_table_covers_every_pair() -> None:
    assert set(EXPECTED) == set(ClientState)
    assert all(set(row) == set(EVENTS) for row in EXPECTED.values())


# -- time-driven ------------------------------------------------------------


def test_first_get_is_immediate_and_then_nothing_until_answered() -> None:
    m = machine()
    assert m.poll(0) is Action.GET_SUBSCRIPTIONS
    assert m.time_to_next_ms(0) == 0
    m.handle(SubscriptionRequested(), 0)
    assert m.poll(10**9) is None
    assert m.time_to_next_ms(0) is None


def test_first_push_after_jittered_interval_then_exact_interval() -> None:
    m = machine(FixedRandom(0.7))  # 0.5 + 0.7 = 1.2 x interval
    m.handle(SubscriptionRequested(), 1000)
    m.handle(SubscriptionReceived(subscription()), 1000)
    due = 1000 + 12_000
    assert m.poll(due - 1) is None
    assert m.time_to_next_ms(due - 1) == 1
    assert m.poll(due) is Action.PUSH
    m.handle(PushRequested(), due)
    m.handle(PushAccepted(), due + 5)
    assert m.poll(due + 5 + INTERVAL - 1) is None
    assert m.poll(due + 5 + INTERVAL) is Action.PUSH


def test_jitter_applies_after_every_subscription_with_metrics() -> None:
    m = machine(FixedRandom(0.0))  # 0.5 x interval
    for start in (0, 50_000):
        m.state = S.SUBSCRIPTION_NEEDED
        m.interval_ms = 0
        m.handle(SubscriptionRequested(), start)
        m.handle(SubscriptionReceived(subscription()), start)
        assert m.poll(start + INTERVAL // 2 - 1) is None
        assert m.poll(start + INTERVAL // 2) is Action.PUSH


def test_no_metrics_subscription_refetches_after_exactly_the_interval() -> None:
    m = machine(FixedRandom(0.9))
    m.handle(SubscriptionRequested(), 0)
    assert m.handle(SubscriptionReceived(subscription(metrics=())), 0) is S.SUBSCRIPTION_NEEDED
    assert m.poll(INTERVAL - 1) is None
    assert m.poll(INTERVAL) is Action.GET_SUBSCRIPTIONS


@pytest.mark.parametrize("interval", [0, -1])
def test_non_positive_interval_means_the_default(interval: int) -> None:
    m = machine()
    m.handle(SubscriptionRequested(), 0)
    m.handle(SubscriptionReceived(subscription(interval=interval, metrics=())), 0)
    assert m.subscription is not None
    assert m.subscription.push_interval_ms == 300_000
    assert m.poll(299_999) is None
    assert m.poll(300_000) is Action.GET_SUBSCRIPTIONS


@given(
    interval=st.integers(min_value=0, max_value=3_600_000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_jitter_bounds(interval: int, seed: int) -> None:
    value = staggered_interval_ms(interval, random.Random(seed))
    assert interval * 0.5 - 0.5 <= value <= interval * 1.5 + 0.5
    m = machine(random.Random(seed))
    m.handle(SubscriptionRequested(), 0)
    m.handle(SubscriptionReceived(subscription(interval=max(interval, 1))), 0)
    assert max(interval, 1) * 0.5 - 0.5 <= m.interval_ms <= max(interval, 1) * 1.5 + 0.5


# -- the error table ----------------------------------------------------------


def pushing(rng: random.Random | None = None) -> ClientTelemetry:
    m = machine(rng)
    m.handle(SubscriptionRequested(), 0)
    m.handle(SubscriptionReceived(subscription()), 0)
    m.handle(PushRequested(), 20_000)
    return m


@pytest.mark.parametrize("code", [117, 76])
def test_push_error_refetches_now(code: int) -> None:
    m = pushing()
    assert m.handle(PushFailed(code), 20_010) is S.SUBSCRIPTION_NEEDED
    assert m.poll(20_010) is Action.GET_SUBSCRIPTIONS
    assert m.enabled


@pytest.mark.parametrize("code", [118, 89])
def test_push_error_refetches_after_the_interval(code: int) -> None:
    m = pushing()
    m.handle(PushFailed(code), 20_010)
    assert m.poll(20_010 + INTERVAL - 1) is None
    assert m.poll(20_010 + INTERVAL) is Action.GET_SUBSCRIPTIONS
    assert m.enabled


@pytest.mark.parametrize("code", [42, 87, 35, -1, 999])
@pytest.mark.parametrize("during", ["get", "push"])
def test_fatal_errors_disable_for_good(code: int, during: str) -> None:
    m = pushing()
    if during == "get":
        m = machine()
        m.handle(SubscriptionRequested(), 0)
        m.handle(SubscriptionFailed(code), 10)
    else:
        m.handle(PushFailed(code), 20_010)
    assert not m.enabled
    assert m.disabled_by == code
    assert m.poll(10**12) is None
    assert m.time_to_next_ms(0) is None
    assert m.handle(CloseRequested(), 10**12) is S.TERMINATED  # nothing to push


def test_throttled_first_get_waits_the_default_interval() -> None:
    m = machine()
    m.handle(SubscriptionRequested(), 0)
    m.handle(SubscriptionFailed(89), 0)
    assert m.enabled
    assert m.poll(299_999) is None
    assert m.poll(300_000) is Action.GET_SUBSCRIPTIONS


def test_transport_failure_retries_unless_told_it_cannot() -> None:
    m = pushing()
    m.handle(RequestFailed(retriable=True), 20_000)
    assert m.poll(20_000 + 5000) is Action.GET_SUBSCRIPTIONS
    m.handle(SubscriptionRequested(), 30_000)
    m.handle(RequestFailed(retriable=False), 30_001)
    assert not m.enabled
    assert m.poll(10**12) is None


# -- close ------------------------------------------------------------------------


def test_close_with_a_subscription_asks_for_a_terminating_push_at_once() -> None:
    m = machine()
    m.handle(SubscriptionRequested(), 0)
    m.handle(SubscriptionReceived(subscription()), 0)
    m.handle(CloseRequested(), 1)
    assert m.poll(1) is Action.TERMINATING_PUSH  # not waiting for the interval
    m.handle(PushRequested(), 1)
    assert m.poll(1) is None
    assert m.handle(PushFailed(117), 2) is S.TERMINATED  # the final push may be abandoned


def test_close_during_first_handshake_pushes_once_the_subscription_arrives() -> None:
    m = machine()
    m.handle(SubscriptionRequested(), 0)
    m.handle(CloseRequested(), 1)
    assert m.poll(1) is Action.TERMINATING_PUSH  # but the driver waits for the in-flight Get
    assert m.handle(SubscriptionReceived(subscription()), 2) is S.TERMINATING_PUSH_NEEDED


def test_close_during_first_handshake_ends_if_nothing_is_subscribed() -> None:
    m = machine()
    m.handle(SubscriptionRequested(), 0)
    m.handle(CloseRequested(), 1)
    assert m.handle(SubscriptionReceived(subscription(metrics=())), 2) is S.TERMINATED
    m2 = machine()
    m2.handle(SubscriptionRequested(), 0)
    m2.handle(CloseRequested(), 1)
    assert m2.handle(SubscriptionFailed(89), 2) is S.TERMINATED


def test_close_before_any_subscription_is_immediate() -> None:
    m = machine()
    assert m.handle(CloseRequested(), 0) is S.TERMINATED


# -- subscriptions, ids, codecs -----------------------------------------------------


def test_v0_broker_assigned_id_is_adopted_and_zero_is_not() -> None:
    own = uuid.uuid4()
    m = ClientTelemetry(rng=random.Random(0), client_instance_id=own)
    m.handle(SubscriptionRequested(), 0)
    m.handle(SubscriptionReceived(subscription(instance_id=uuid.UUID(int=0))), 0)
    assert m.client_instance_id == own
    assigned = uuid.uuid4()
    m.handle(CloseRequested(), 1)
    m2 = ClientTelemetry(rng=random.Random(0))
    m2.handle(SubscriptionRequested(), 0)
    m2.handle(SubscriptionReceived(subscription(instance_id=assigned)), 0)
    assert m2.client_instance_id == assigned


def test_selector_semantics() -> None:
    prefixes = subscription(metrics=("org.apache.kafka.producer",))
    assert prefixes.selects("org.apache.kafka.producerabc")
    assert not prefixes.selects("org.apache.kafka.produce")
    assert subscription(metrics=("*",)).selects("anything")
    assert not subscription(metrics=("*", "x")).selects("anything")  # "*" is literal here
    assert not subscription(metrics=()).wants_metrics
    assert subscription(metrics=("",)).selects("org.apache.kafka.x")


def test_compression_choice() -> None:
    supported = frozenset({1, 2, 3, 4})
    assert choose_compression_type((4, 3, 1, 2), supported, 5000) == 4
    assert choose_compression_type((5, 3), supported, 5000) == 3  # unknown ids skipped
    assert choose_compression_type((0, 1), supported, 5000) == 0  # the first entry wins
    assert choose_compression_type((4,), supported, 999) == 0  # too small to be worth it
    assert choose_compression_type((4,), frozenset({1}), 5000) == 0
    assert choose_compression_type((), supported, 5000) == 0
