"""The limit policies: request budget, per-source cap, creation rate, warning rate limit."""

from __future__ import annotations

import pytest

from clientmetrics.wire.limits import (
    CreationRate,
    LogDecision,
    RequestBudget,
    SourceLimit,
    WarningLimiter,
)


def test_budget_never_overcommits_and_wakes_waiters_on_release() -> None:
    budget = RequestBudget(100)
    assert budget.try_reserve(60)
    assert not budget.try_reserve(41)
    woken: list[int] = []
    budget.wait(lambda: woken.append(1))
    budget.wait(lambda: woken.append(2))
    budget.release(60)
    assert woken == [1, 2]
    budget.release(10)  # waiters are called once
    assert woken == [1, 2]
    assert budget.used == 0


def test_source_limit_counts_per_address() -> None:
    limit = SourceLimit(2)
    assert limit.open("10.0.0.1")
    assert limit.open("10.0.0.1")
    assert not limit.open("10.0.0.1")
    assert limit.open("10.0.0.2")
    limit.close("10.0.0.1")
    assert limit.count("10.0.0.1") == 1
    assert limit.open("10.0.0.1")


def test_creation_rate_lets_a_seconds_worth_in_then_throttles_until_a_token_is_due() -> None:
    rate = CreationRate(2)  # two a second, two at once
    assert [rate.throttle_ms("10.0.0.1", 0), rate.throttle_ms("10.0.0.1", 0)] == [0, 0]
    assert rate.throttle_ms("10.0.0.1", 0) == 500  # the next token is due in 1/2 s
    assert rate.throttle_ms("10.0.0.2", 0) == 0  # another address has its own
    # A throttled try takes no token (Kafka un-records it): half a token by 250 ms.
    assert rate.throttle_ms("10.0.0.1", 250) == 250
    assert rate.throttle_ms("10.0.0.1", 500) == 0
    assert rate.throttle_ms("10.0.0.1", 500) == 500
    # Never more than a second's worth saved up, however long it was quiet.
    assert [rate.throttle_ms("10.0.0.1", 60_000) for _ in range(3)] == [0, 0, 500]


def test_creation_rate_holds_at_most_a_second_and_zero_is_no_limit() -> None:
    slow = CreationRate(1)
    assert slow.throttle_ms("h", 0) == 0
    assert slow.throttle_ms("h", 1) == 999  # Kafka's bound: one quota window
    assert all(CreationRate(0).throttle_ms("h", 0) == 0 for _ in range(1000))
    with pytest.raises(ValueError, match="negative"):
        CreationRate(-1)


def test_creation_rate_forgets_the_least_recently_seen_source_first() -> None:
    rate = CreationRate(1, max_sources=2)
    assert rate.throttle_ms("a", 0) == 0
    assert rate.throttle_ms("b", 0) == 0
    assert rate.throttle_ms("a", 10) == 990  # "a" used last: "b" goes first
    assert rate.throttle_ms("c", 10) == 0
    assert rate.throttle_ms("b", 10) == 0  # forgotten: a full bucket again
    assert rate.throttle_ms("a", 10) == 0  # dropped when "b" came back


def test_warnings_burst_then_one_summary_per_interval() -> None:
    limiter = WarningLimiter(burst=3, interval_ms=1000)
    decisions = [limiter.check("1.2.3.4", "bad_frame", t) for t in range(0, 600, 1)]
    assert [d.emit for d in decisions[:4]] == [True, True, True, False]
    assert sum(d.emit for d in decisions) == 3
    # Another source is not silenced by the first.
    assert limiter.check("5.6.7.8", "bad_frame", 10).emit
    # Next interval: one line carrying how many were suppressed.
    assert limiter.check("1.2.3.4", "bad_frame", 1000) == LogDecision(True, 597)
    assert limiter.check("1.2.3.4", "bad_frame", 1001) == LogDecision(True, 0)


def test_warning_limiter_keeps_a_bounded_number_of_sources() -> None:
    limiter = WarningLimiter(burst=1, interval_ms=1000, max_sources=10)
    for n in range(1000):
        assert limiter.check(f"10.0.{n // 256}.{n % 256}", "x", 0).emit
    assert len(limiter._windows) == 10
