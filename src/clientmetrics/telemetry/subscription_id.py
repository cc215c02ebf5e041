"""What a client is asked for, and the SubscriptionId that names it.

Kafka computes ``CRC32C(set.toString() + pushIntervalMs) ^ Uuid.hashCode()``
where ``set.toString()`` follows Java ``HashSet`` iteration order, the order it
also sends RequestedMetrics in. Both are on the wire (a client that brings its own
id can work the id out), so the gateway builds the same set in the same order
(``java_order``) and gets Kafka's id for the same subscriptions and interval.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

from clientmetrics.telemetry.java_order import hash_set_order, map_key_order
from clientmetrics.telemetry.model import Subscription

#: The all-metrics marker in a subscription's ``metrics`` config (KIP-714's config table).
ALL_METRICS = "*"
#: How "all metrics" is said on the wire: KIP-714's RequestedMetrics ``[""]`` ("Array[0]
#: empty string: All metrics subscribed"). Kafka sends ``["*"]``, which franz-go does not
#: understand (it sends nothing); every client we know takes ``[""]`` as all: franz-go by
#: its own rule, the Java client, librdkafka and our reporter because every name starts
#: with the empty prefix (docs/peers.md).
WIRE_ALL_METRICS = ""
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def uuid_hash_code(value: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()``: ``x = msb ^ lsb; (int)(x >> 32) ^ (int)x``."""
    x = (value.int >> 64) ^ (value.int & _MASK64)
    return _int32((x >> 32) ^ x)


def canonical_text(metrics: Iterable[str], push_interval_ms: int) -> str:
    """Java ``AbstractCollection.toString()`` of the set (in its iteration order), then the
    interval."""
    return "[" + ", ".join(metrics) + "]" + str(push_interval_ms)


def subscription_crc(metrics: Iterable[str], push_interval_ms: int) -> int:
    """The CRC32C half of the SubscriptionId (unsigned 32 bits)."""
    return int(crc32c.crc32c(canonical_text(metrics, push_interval_ms).encode("utf-8")))


def subscription_id(metrics: Iterable[str], push_interval_ms: int, instance: uuid.UUID) -> int:
    """The SubscriptionId (signed int32) for a client instance and what it is asked for,
    ``metrics`` in the order the client is sent them."""
    return _int32(subscription_crc(metrics, push_interval_ms) ^ uuid_hash_code(instance))


@dataclass(frozen=True, slots=True)
class SubscriptionPlan:
    """What every instance matching the same subscriptions is told; shared by them."""

    #: The matched ``metrics`` in Java ``HashSet`` order (Kafka's RequestedMetrics);
    #: ``("*",)`` for all; ``()`` for none. The SubscriptionId is computed from these, as
    #: Kafka does; ``wire_metrics`` is what the client is sent.
    requested_metrics: tuple[str, ...]
    push_interval_ms: int
    #: CRC32C of the canonical text; XOR with the instance hash gives the id.
    crc: int

    @property
    def wire_metrics(self) -> tuple[str, ...]:
        """RequestedMetrics as sent to the client: ``("",)`` for all metrics."""
        if self.requested_metrics == (ALL_METRICS,):
            return (WIRE_ALL_METRICS,)
        return self.requested_metrics

    def subscription_id_for(self, instance: uuid.UUID) -> int:
        """This plan's SubscriptionId for one client instance."""
        return self.subscription_id_for_key(instance.int)

    def subscription_id_for_key(self, key: int) -> int:
        """The same, from the id's 128-bit integer (cheap enough not to store per instance)."""
        x = (key >> 64) ^ (key & _MASK64)
        return _int32(self.crc ^ (x >> 32) ^ x)


def subscription_order(subs: Iterable[Subscription]) -> list[Subscription]:
    """Subscriptions in the order Kafka's map of them iterates (``java_order``)."""
    by_name = {sub.name: sub for sub in subs}
    return [by_name[name] for name in map_key_order(by_name)]


def resolve_plan(matched: Iterable[Subscription], default_interval_ms: int) -> SubscriptionPlan:
    """Combine the subscriptions a client matched (Kafka ``createClientInstance``).

    ``matched`` in ``subscription_order``: each one's metrics become a Java
    ``HashSet``, added in turn to a fresh one, whose order is RequestedMetrics'.
    The interval is the minimum of the matched intervals (values above the
    default are honoured, unlike Kafka), the default only when nothing
    matched; a non-positive interval is ignored so a client is never told 0.
    """
    added: list[str] = []
    intervals: list[int] = []
    for sub in matched:
        added.extend(hash_set_order(sub.metrics, copy_of=len(sub.metrics)))
        if sub.interval_ms > 0:
            intervals.append(sub.interval_ms)
    metrics = hash_set_order(added)
    requested = (ALL_METRICS,) if ALL_METRICS in metrics else metrics
    interval = min(intervals) if intervals else default_interval_ms
    return SubscriptionPlan(requested, interval, subscription_crc(requested, interval))
