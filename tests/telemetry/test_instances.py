"""Instance registry: expiry, disconnect, LRU (checklist 36-39) through the manager API."""

from __future__ import annotations

import uuid

from clientmetrics.telemetry import (
    ClientInstance,
    ClientMetricsManager,
    InstanceRegistry,
    resolve_plan,
)
from clientmetrics.wire.errors import ErrorCode

from .conftest import make_ctx, manager, push_telemetry, sub, subscribe

NOW = 10_000_000


def test_instance_expires_after_three_intervals() -> None:
    """Checklist 36: interval 100 and no minimum → gone after 300 ms, not before."""
    mgr = manager(sub(interval_ms=100), min_expiry_ms=0)
    subscribe(mgr, NOW)
    assert mgr.expire(NOW + 299) == 0
    assert mgr.stats.instance_count == 1
    assert mgr.expire(NOW + 300) == 1
    assert mgr.stats.instance_count == 0
    mgr.connection_closed(1)  # its connection entry went with it
    assert mgr.stats.instances_disconnected == 0


def test_expiry_is_at_least_the_minimum() -> None:
    """Reference §2.1: expiry is max(60 s, 3 x interval)."""
    mgr = manager(sub(interval_ms=100))
    subscribe(mgr, NOW)
    assert mgr.expire(NOW + 59_999) == 0
    assert mgr.expire(NOW + 60_000) == 1


def test_two_instances_expire_together() -> None:
    """Checklist 37: two instances, then none after expiry."""
    mgr = manager(sub(interval_ms=100), min_expiry_ms=0)
    subscribe(mgr, NOW)
    subscribe(mgr, NOW, ctx=make_ctx(connection_id=2))
    assert mgr.stats.instance_count == 2
    assert mgr.expire(NOW + 10_000) == 2
    assert mgr.stats.instances_expired == 2


def test_every_request_re_arms_expiry() -> None:
    """Reference §2.6 step 3: a Get or push (even a refused one) re-arms the timer."""
    mgr = manager(sub(interval_ms=1000), min_expiry_ms=0)
    got = subscribe(mgr, NOW)
    throttled = mgr.get_telemetry_subscriptions(got.client_instance_id, make_ctx(), NOW + 500)
    assert throttled.error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert mgr.expire(NOW + 3200) == 0
    refused = push_telemetry(mgr, got.client_instance_id, 0, False, 0, b"", make_ctx(), NOW + 3000)
    assert refused.error_code is ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert mgr.expire(NOW + 5999) == 0
    assert mgr.expire(NOW + 6000) == 1


def test_shorter_interval_after_change_expires_sooner() -> None:
    """A subscription change that shortens the interval also shortens the expiry."""
    mgr = manager(sub(interval_ms=3_600_000), min_expiry_ms=0)
    got = subscribe(mgr, NOW)
    mgr.update_subscription("s1", sub(interval_ms=100))
    subscribe(mgr, NOW + 1, got.client_instance_id)
    assert mgr.expire(NOW + 1 + 300) == 1


def test_subscription_change_recreates_in_place() -> None:
    """Checklist 38: after an update the instance is re-created, the count is unchanged."""
    mgr = manager(sub())
    got = subscribe(mgr, NOW)
    mgr.update_subscription("s1", sub(interval_ms=60000))
    again = subscribe(mgr, NOW + 1, got.client_instance_id)
    assert again.push_interval_ms == 60000
    assert mgr.stats.instance_count == 1


def test_disconnect_of_the_creating_connection() -> None:
    """Checklist 39: disconnect removes the instance; an unknown connection changes nothing."""
    mgr = manager(sub())
    got = subscribe(mgr, NOW, ctx=make_ctx(connection_id=11))
    mgr.connection_closed(99)
    assert mgr.stats.instance_count == 1
    mgr.connection_closed(11)
    assert mgr.stats.instance_count == 0
    # The client can come back on a new connection with its old id.
    assert subscribe(mgr, NOW + 1, got.client_instance_id, make_ctx(connection_id=12))


def test_disconnect_removes_every_instance_of_a_connection() -> None:
    """A proxy connection may create many instances; all go with it."""
    mgr = manager(sub())
    shared = make_ctx(connection_id=5)
    for _ in range(3):
        subscribe(mgr, NOW, ctx=shared)
    subscribe(mgr, NOW, ctx=make_ctx(connection_id=6))
    mgr.connection_closed(5)
    assert mgr.stats.instance_count == 1
    assert mgr.stats.instances_disconnected == 3


def test_least_recently_used_instance_is_evicted() -> None:
    """Beyond max_instances the least recently used instance is dropped."""
    mgr = manager(sub(), max_instances=2)
    first = subscribe(mgr, NOW).client_instance_id
    second = subscribe(mgr, NOW).client_instance_id
    # Using `first` again makes `second` the least recently used.
    mgr.get_telemetry_subscriptions(first, make_ctx(), NOW + 1)
    subscribe(mgr, NOW + 2)
    assert mgr.stats.instance_count == 2
    assert mgr.stats.instances_evicted == 1
    # `first` is still known (throttled); `second` is new again (accepted).
    assert mgr.get_telemetry_subscriptions(first, make_ctx(), NOW + 3).error_code is (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    assert mgr.get_telemetry_subscriptions(second, make_ctx(), NOW + 3).error_code is (
        ErrorCode.NONE
    )


def test_instance_past_its_deadline_is_fresh_even_before_expire_runs() -> None:
    """Expiry does not depend on how often expire() is called."""
    mgr = manager(sub(interval_ms=100), min_expiry_ms=0)
    got = subscribe(mgr, NOW)
    again = mgr.get_telemetry_subscriptions(got.client_instance_id, make_ctx(), NOW + 300)
    assert again.error_code is ErrorCode.NONE
    assert mgr.stats.instances_expired == 1


def test_expire_handles_many_instances_in_buckets() -> None:
    """Instances spread over time expire bucket by bucket, each exactly once."""
    mgr: ClientMetricsManager = manager(sub(interval_ms=100), min_expiry_ms=1000)
    for i in range(2000):
        subscribe(mgr, NOW + i, uuid.UUID(int=(i + 2) << 64))
    removed = [mgr.expire(NOW + 1000 + t) for t in range(0, 2001, 250)]
    assert sum(removed) == 2000
    assert removed[0] == 1  # only the instance created at NOW is due at NOW + 1000
    assert mgr.stats.instance_count == 0


def test_registry_skips_stale_wheel_entries() -> None:
    """A key removed and re-added is expired once, at its new deadline."""
    registry = InstanceRegistry(max_instances=10, min_expiry_ms=0)
    plan = resolve_plan([], 1000)  # expiry 3 x 1000 ms
    first = ClientInstance(5 << 64, make_ctx(), plan, 0)
    registry.add(first)
    registry.arm(first, 0)
    registry.remove(first)
    second = ClientInstance(5 << 64, make_ctx(), plan, 0)
    registry.add(second)
    registry.arm(second, 4000)
    assert registry.deadline(second) == 7000
    assert registry.expire(3000) == 0
    assert 5 << 64 in registry
    assert registry.expire(6999) == 0
    assert registry.expire(7000) == 1
    assert len(registry) == 0


def test_instances_are_out_of_the_garbage_collectors_reach_and_freed_by_refcount() -> None:
    """A million instances must not be walked by every full collection (loop stalls)."""
    import gc
    import platform
    import sys

    registry = InstanceRegistry(10, 60_000)
    plan = resolve_plan([], 300_000)
    ctx = make_ctx()
    held = sys.getrefcount(ctx)
    instance = ClientInstance(1, ctx, plan, 0)
    registry.add(instance)
    if platform.python_implementation() == "CPython":
        assert not gc.is_tracked(instance)
    instance.reset(plan, 1)  # changing it does not put it back
    if platform.python_implementation() == "CPython":
        assert not gc.is_tracked(instance)
    # Freed by reference counting as soon as the registry lets go of it.
    registry.remove(instance)
    del instance
    assert sys.getrefcount(ctx) == held


def test_expiry_looks_at_a_bounded_slice_per_call_and_misses_nothing() -> None:
    """Instances created together are filed together; re-filing all of them in one
    call held the gateway's loop (237 ms for 200,000). With a limit, each call looks
    at that many at most, and the calls together do what one would."""
    registry = InstanceRegistry(max_instances=10_000, min_expiry_ms=0)
    plan = resolve_plan([], 1000)  # expiry 3 x 1000 ms
    instances = [ClientInstance((i + 1) << 64, make_ctx(), plan, 0) for i in range(5000)]
    for instance in instances:
        registry.add(instance)
        registry.arm(instance, 0)  # all filed in the bucket of 3000
    for instance in instances[1000:]:
        registry.arm(instance, 2000)  # still used: deadline 5000, filed where it was
    assert registry.expiry_due(3000)
    removed = [registry.expire(3000, limit=2000)]
    while registry.expiry_due(3000):
        removed.append(registry.expire(3000, limit=2000))
    assert removed == [1000, 0, 0]  # 2000 + 2000 + 1000 looked at
    assert len(registry) == 4000
    assert not registry.expiry_due(4999)
    assert registry.expire(4999) == 0
    assert registry.expire(5000, limit=1500) == 1500
    assert registry.expire(5000) == 2500
    assert len(registry) == 0
