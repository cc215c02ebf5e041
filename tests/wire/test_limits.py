"""The limit policies: request budget, per-source cap, warning rate limit."""

from __future__ import annotations

from clientmetrics.wire.limits import LogDecision, RequestBudget, SourceLimit, WarningLimiter


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
