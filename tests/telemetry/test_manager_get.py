"""GetTelemetrySubscriptions: conformance checklist items 12-21 and our differences."""

from __future__ import annotations

import random
import uuid

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.telemetry import (
    ONE_UUID,
    ZERO_UUID,
    ClientMetricsManager,
    TelemetryConfig,
    kafka_uuid_text,
    subscription_id,
)
from clientmetrics.wire.errors import ErrorCode

from .conftest import (
    CONSUMER_PREFIX,
    PRODUCER_PREFIX,
    make_ctx,
    manager,
    push_telemetry,
    sub,
    subscribe,
)

NOW = 1_000_000


def test_first_get_assigns_an_id_and_returns_the_subscription() -> None:
    """Checklist 12: zero id → new id; prefixes, interval, codecs, max bytes, delta."""
    mgr = manager(sub(metrics=(PRODUCER_PREFIX, CONSUMER_PREFIX), interval_ms=30000), max_bytes=100)
    result = mgr.get_telemetry_subscriptions(ZERO_UUID, make_ctx(), NOW)
    assert result.error_code is ErrorCode.NONE
    assert result.client_instance_id not in (ZERO_UUID, ONE_UUID)
    assert result.subscription_id != 0
    # Kafka 4.4.0 sends these two in this order (its HashSet's; observed on the wire).
    assert result.requested_metrics == (PRODUCER_PREFIX, CONSUMER_PREFIX)
    assert result.accepted_compression_types == (4, 3, 1, 2)
    assert result.push_interval_ms == 30000
    assert result.telemetry_max_bytes == 100
    assert result.delta_temporality is True
    assert result.throttle_time_ms == 0


def test_none_id_is_treated_like_zero() -> None:
    """Checklist 12: a null id also gets a fresh id."""
    result = subscribe(manager(sub()), NOW, None)
    assert result.client_instance_id.int > 1


def test_no_subscriptions_gives_empty_metrics_and_default_interval() -> None:
    """Checklist 13: no subscription → [] and 300000, subscriptionId still non-zero."""
    result = subscribe(manager(), NOW)
    assert result.requested_metrics == ()
    assert result.push_interval_ms == 300000
    assert result.subscription_id != 0


def test_star_collapses_to_all_metrics_said_the_kip_way() -> None:
    """Checklist 14: prefixes plus "*" from another matching subscription → all metrics.

    Kafka sends ``["*"]``; we send KIP-714's wire form ``[""]`` (franz-go takes only that;
    Java, librdkafka and our reporter take it as the prefix of every name). The
    SubscriptionId stays Kafka's: CRC32C of ``[*]`` and the interval, XOR the id's hash.
    """
    mgr = manager(sub("a", (PRODUCER_PREFIX,), 5000), sub("b", ("*",), 5000))
    result = subscribe(mgr, NOW)
    assert result.requested_metrics == ("",)
    assert result.subscription_id == subscription_id(["*"], 5000, result.client_instance_id)


def test_metrics_are_deduplicated_in_java_hash_set_order() -> None:
    """Checklist 14 (derived): the union of matched metric sets, each once, in the order
    Kafka's HashSet iterates: String.hashCode of "a." is 97*31+46 = 3053, bucket 3053 & 15
    = 13; "b." 3084 -> 12; "c." 3115 -> 11."""
    mgr = manager(sub("a", ("b.", "a.")), sub("b", ("a.", "c.")))
    assert subscribe(mgr, NOW).requested_metrics == ("c.", "b.", "a.")


def test_immediate_second_get_is_throttled() -> None:
    """Checklist 15: a second Get at once → 89; throttle count 1; the id is echoed."""
    mgr = manager(sub())
    first = subscribe(mgr, NOW)
    second = mgr.get_telemetry_subscriptions(first.client_instance_id, make_ctx(), NOW + 10)
    assert second.error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert second.client_instance_id == first.client_instance_id
    assert second.requested_metrics == ()
    assert mgr.stats.throttles == 1


def test_get_after_the_interval_is_accepted() -> None:
    """Checklist 16: Get, wait the push interval, Get → NONE."""
    mgr = manager(sub(interval_ms=30000))
    first = subscribe(mgr, NOW)
    again = subscribe(mgr, NOW + 30000, first.client_instance_id)
    assert again.subscription_id == first.subscription_id


def test_subscription_change_lifts_the_throttle_and_changes_the_id() -> None:
    """Checklist 17: Get, subscription change, immediate Get → NONE with a new id."""
    mgr = manager(sub(metrics=(PRODUCER_PREFIX,)))
    first = subscribe(mgr, NOW)
    mgr.update_subscription("s1", sub(metrics=(CONSUMER_PREFIX,)))
    again = subscribe(mgr, NOW + 1, first.client_instance_id)
    assert again.requested_metrics == (CONSUMER_PREFIX,)
    assert again.subscription_id != first.subscription_id


def test_push_on_a_fresh_manager_then_get_is_throttled(producer_payload: bytes) -> None:
    """Checklist 18: a push creates the instance and counts as the last request."""
    origin = manager(sub())
    first = subscribe(origin, NOW)
    other = manager(sub())
    pushed = push_telemetry(
        other,
        first.client_instance_id,
        first.subscription_id,
        False,
        0,
        producer_payload,
        make_ctx(),
        NOW,
    )
    assert pushed.error_code is ErrorCode.NONE
    got = other.get_telemetry_subscriptions(first.client_instance_id, make_ctx(), NOW + 1)
    assert got.error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_repeated_gets_create_one_instance() -> None:
    """Checklist 19: several Gets for one id create exactly one instance."""
    mgr = manager(sub())
    first = subscribe(mgr, NOW)
    for i in range(1, 4):
        mgr.get_telemetry_subscriptions(first.client_instance_id, make_ctx(), NOW + i)
    assert mgr.stats.instance_count == 1
    assert mgr.stats.instances_created == 1


def test_non_matching_subscription_gives_nothing() -> None:
    """Checklist 20: client_software_version=3.5.* against 2.16.0 → [] and 300000."""
    mgr = manager(sub(match=(("client_software_version", "3.5.*"),)))
    result = subscribe(mgr, NOW)
    assert result.requested_metrics == ()
    assert result.push_interval_ms == 300000


@pytest.mark.parametrize("interval", [600000, 3600000])
def test_interval_above_the_default_is_honoured(interval: int) -> None:
    """Checklist 21, deliberately different: Kafka caps at 300000, we honour interval.ms."""
    assert subscribe(manager(sub(interval_ms=interval)), NOW).push_interval_ms == interval


def test_interval_is_the_minimum_of_matched_subscriptions() -> None:
    """Checklist 21 (derived): min over matched subscriptions; unmatched ones do not count."""
    mgr = manager(
        sub("a", interval_ms=600000),
        sub("b", interval_ms=120000),
        sub("c", interval_ms=1000, match=(("client_id", "nobody"),)),
    )
    assert subscribe(mgr, NOW).push_interval_ms == 120000


def test_unknown_non_zero_id_is_adopted() -> None:
    """Reference §2.7 step 1 / KIP-1313: a client-chosen or foreign id is kept."""
    chosen = uuid.UUID("2f1c4ab3-9f3e-4d53-8a8a-0c6f2d3a9b10")
    result = subscribe(manager(sub()), NOW, chosen)
    assert result.client_instance_id == chosen
    assert result.subscription_id == subscription_id((PRODUCER_PREFIX,), 30000, chosen)


def test_one_uuid_gets_a_fresh_id() -> None:
    """A reserved id is never handed out or kept (its pushes would all be rejected)."""
    result = subscribe(manager(sub()), NOW, ONE_UUID)
    assert result.client_instance_id not in (ZERO_UUID, ONE_UUID)


class _ScriptedRandom(random.Random):
    """Returns the scripted 128-bit values first, to drive the re-draw loop."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(0)
        self.values = values

    def getrandbits(self, k: int) -> int:
        return self.values.pop(0) if self.values else super().getrandbits(k)


def test_generated_ids_skip_reserved_and_taken_ids() -> None:
    """Reference §2.7 step 1: re-draw while reserved or already in use."""
    taken = uuid.UUID(int=0x1234 << 64)
    fresh = uuid.UUID(int=0x5678 << 64)
    rng = _ScriptedRandom([0, 1, taken.int, fresh.int])
    mgr = ClientMetricsManager(TelemetryConfig(), rng=rng)
    subscribe(mgr, NOW, taken)
    assert subscribe(mgr, NOW, None).client_instance_id == fresh


def test_ids_come_from_the_injected_rng() -> None:
    """Randomness is a parameter: the same seed gives the same ids."""
    ids = [subscribe(manager(sub(), seed=42), NOW).client_instance_id for _ in range(2)]
    assert ids[0] == ids[1]
    assert subscribe(manager(sub(), seed=43), NOW).client_instance_id != ids[0]


def test_configured_compression_types_are_advertised() -> None:
    """AcceptedCompressionTypes is configurable."""
    result = subscribe(manager(sub(), accepted_compression_types=(1, 2)), NOW)
    assert result.accepted_compression_types == (1, 2)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_bytes": 0},
        {"accepted_compression_types": (5,)},
        {"accepted_compression_types": (4, 4)},
        {"max_instances": 0},
        {"min_expiry_ms": -1},
        {"default_interval_ms": 0},
        {"early_push_tolerance": 1.0},
        {"early_push_tolerance": -0.1},
    ],
)
def test_config_is_validated(bad: dict[str, object]) -> None:
    """TelemetryConfig rejects values the protocol or the throttle cannot use."""
    with pytest.raises(ConfigurationError):
        TelemetryConfig(**bad)  # type: ignore[arg-type]


def test_identical_subscriptions_do_not_bump_the_version() -> None:
    """Checklist 2 (derived): a no-op update changes nothing, so throttles stay."""
    mgr = manager(sub())
    first = subscribe(mgr, NOW)
    version = mgr.subscription_version
    mgr.set_subscriptions([sub()])
    mgr.update_subscription("unknown", None)
    assert mgr.subscription_version == version
    again = mgr.get_telemetry_subscriptions(first.client_instance_id, make_ctx(), NOW + 1)
    assert again.error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_update_and_remove_bump_the_version() -> None:
    """Checklists 1 and 3: add, then remove, bump the version each time."""
    mgr = manager()
    assert mgr.subscription_version == 0
    mgr.update_subscription("s1", sub(interval_ms=100))
    mgr.update_subscription("s1", None)
    assert mgr.subscription_version == 2
    assert dict(mgr.subscriptions) == {}


def test_subscription_stored_under_another_name_is_refused() -> None:
    """update_subscription's name must be the subscription's own."""
    with pytest.raises(ConfigurationError):
        manager().update_subscription("other", sub("s1"))


def test_generated_ids_never_start_with_a_dash() -> None:
    """Uuid.randomUuid() re-draws ids whose base64 text starts with "-"."""
    dash = uuid.UUID(int=(62 << 122) | 5)
    fresh = uuid.UUID(int=(61 << 122) | 5)
    assert kafka_uuid_text(dash).startswith("-")
    mgr = ClientMetricsManager(TelemetryConfig(), rng=_ScriptedRandom([dash.int, fresh.int]))
    assert subscribe(mgr, NOW, None).client_instance_id == fresh
