"""Broker-side counters: what the gateway exports on /metrics."""

from __future__ import annotations

import dataclasses

import pytest

from clientmetrics.telemetry import TelemetryStats
from clientmetrics.wire.errors import ErrorCode

from .conftest import make_ctx, manager, push_telemetry, sub, subscribe


def test_snapshot_is_a_copy() -> None:
    """A snapshot does not change when the manager counts more, and cannot be edited."""
    mgr = manager(sub())
    before = mgr.stats
    got = subscribe(mgr, 0)
    mgr.get_telemetry_subscriptions(got.client_instance_id, make_ctx(), 1)
    assert before == TelemetryStats()
    after = mgr.stats
    assert (after.instance_count, after.throttles) == (1, 1)
    assert dict(after.gets_by_error) == {
        ErrorCode.NONE: 1,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED: 1,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.throttles = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        after.gets_by_error[ErrorCode.NONE] = 5  # type: ignore[index]


def test_lifecycle_counters() -> None:
    """Created, evicted, disconnected and expired instances are counted separately."""
    mgr = manager(sub(interval_ms=100), max_instances=2, min_expiry_ms=0)
    subscribe(mgr, 0, ctx=make_ctx(connection_id=1))
    subscribe(mgr, 0, ctx=make_ctx(connection_id=2))
    subscribe(mgr, 0, ctx=make_ctx(connection_id=3))  # evicts the first
    mgr.connection_closed(2)
    mgr.expire(1000)
    stats = mgr.stats
    assert (stats.instances_created, stats.instances_evicted) == (3, 1)
    assert (stats.instances_disconnected, stats.instances_expired) == (1, 1)
    assert stats.instance_count == 0


def test_only_the_creating_connection_removes_an_instance() -> None:
    """Reference §2.6: requests on another connection do not transfer ownership."""
    mgr = manager(sub())
    got = subscribe(mgr, 0, ctx=make_ctx(connection_id=1))
    push_telemetry(
        mgr,
        got.client_instance_id,
        got.subscription_id,
        False,
        0,
        b"",
        make_ctx(connection_id=2),
        1,
    )
    mgr.connection_closed(2)
    assert mgr.stats.instance_count == 1
    mgr.connection_closed(1)
    assert mgr.stats.instance_count == 0
