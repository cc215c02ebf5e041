"""SubscriptionId: CRC32C of the canonical text XOR Kafka's Uuid.hashCode()."""

from __future__ import annotations

import uuid

import crc32c
from hypothesis import given
from hypothesis import strategies as st

from clientmetrics.telemetry import resolve_plan, subscription_id, uuid_hash_code
from clientmetrics.telemetry.subscription_id import canonical_text

from .conftest import sub


def test_crc32c_check_value() -> None:
    """The crc32c package is the Castagnoli CRC: its standard check value."""
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_uuid_hash_code_matches_java() -> None:
    """Values worked by hand from Java's long arithmetic: x = msb ^ lsb; (int)(x>>32) ^ (int)x."""
    assert uuid_hash_code(uuid.UUID(int=(1 << 64) | 2)) == 3
    # msb = 0xFFFFFFFF00000000, lsb = 0: (int)(x >> 32) = -1, (int)x = 0.
    assert uuid_hash_code(uuid.UUID(int=0xFFFFFFFF00000000 << 64)) == -1
    # msb = 0x0000000100000000, lsb = 0x0000000000000001 → 1 ^ 1 = 0.
    assert uuid_hash_code(uuid.UUID(int=(0x100000000 << 64) | 1)) == 0
    # (int) of 0x80000000 is negative.
    assert uuid_hash_code(uuid.UUID(int=0x80000000)) == -(1 << 31)


def test_canonical_text_is_java_set_to_string() -> None:
    """Kafka's `[a, b]` + interval, in the order given (the set's iteration order)."""
    assert canonical_text([], 300000) == "[]300000"
    assert canonical_text(["*"], 30000) == "[*]30000"
    assert canonical_text(["b", "a"], 100) == "[b, a]100"


def test_subscription_id_as_kafka_4_4_computed_it() -> None:
    """Taken from Kafka 4.4.0 on the wire: an instance id whose hashCode is 0 (msb ^ lsb =
    0x8888888888888888), two prefixes, interval 200 gave SubscriptionId 1296439061."""
    iid = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    assert uuid_hash_code(iid) == 0
    metrics = ["org.apache.kafka.producer.", "org.apache.kafka.consumer."]
    assert subscription_id(metrics, 200, iid) == 1296439061


def test_subscription_id_formula() -> None:
    """id = (int)CRC32C(text) ^ hashCode, as a signed int32."""
    iid = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
    crc = crc32c.crc32c(b"[b., a.]30000")
    expected = (crc ^ uuid_hash_code(iid)) & 0xFFFFFFFF
    expected -= (1 << 32) if expected >= 1 << 31 else 0
    assert subscription_id(["b.", "a."], 30000, iid) == expected


@given(st.uuids(), st.lists(st.text(max_size=20), max_size=5), st.integers(100, 3_600_000))
def test_subscription_id_is_stable_and_int32(
    iid: uuid.UUID, metrics: list[str], interval: int
) -> None:
    """Same inputs, same id; always a signed 32-bit value."""
    first = subscription_id(metrics, interval, iid)
    assert first == subscription_id(list(metrics), interval, iid)
    assert -(1 << 31) <= first < 1 << 31


def test_different_interval_or_metrics_change_the_id() -> None:
    """A client told something else gets a different id."""
    iid = uuid.UUID(int=12345 << 70)
    base = subscription_id(["a."], 30000, iid)
    assert subscription_id(["a."], 30001, iid) != base
    assert subscription_id(["a.", "b."], 30000, iid) != base


def test_plan_combines_matched_subscriptions() -> None:
    """Union of metrics, min interval, `*` collapse, default when nothing matched."""
    plan = resolve_plan([sub("a", ("x.",), 5000), sub("b", ("y.", "x."), 9000)], 300000)
    # "x." hashes to 120*31+46 = 3766 (bucket 6 of 16), "y." to 3797 (bucket 5).
    assert (plan.requested_metrics, plan.push_interval_ms) == (("y.", "x."), 5000)
    star = resolve_plan([sub("a", ("x.",), 5000), sub("b", ("*",), 600000)], 300000)
    assert star.requested_metrics == ("*",)
    assert star.wire_metrics == ("",)
    assert plan.wire_metrics == ("y.", "x.")
    none = resolve_plan([], 300000)
    assert (none.requested_metrics, none.push_interval_ms) == ((), 300000)
    assert none.wire_metrics == ()


def test_plan_never_yields_a_zero_interval() -> None:
    """A non-positive interval that slipped past validation is ignored, never sent as 0."""
    plan = resolve_plan([sub("a", ("x.",), 0)], 300000)
    assert plan.push_interval_ms == 300000


def test_plan_id_matches_the_function() -> None:
    """The shared plan computes the same id as the free function."""
    iid = uuid.UUID(int=987654321 << 40)
    plan = resolve_plan([sub("a", ("x.",), 5000)], 300000)
    assert plan.subscription_id_for(iid) == subscription_id(["x."], 5000, iid)
