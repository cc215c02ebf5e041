"""The per-source failure throttle: doubling delay, ceiling, decay, bounded memory."""

from __future__ import annotations

from clientmetrics.security import FailureThrottle


def test_delay_doubles_up_to_the_ceiling_and_is_per_source() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=1000)
    assert [throttle.failed("10.0.0.1", 0) for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert throttle.failed("10.0.0.2", 0) == 100


def test_success_and_time_forget() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=1000, forget_after_ms=60_000)
    throttle.failed("a", 0)
    throttle.failed("a", 0)
    throttle.succeeded("a")
    assert throttle.failed("a", 1) == 100
    assert throttle.failed("a", 2) == 200
    assert throttle.failed("a", 70_000) == 100


def test_memory_is_bounded() -> None:
    throttle = FailureThrottle(max_sources=100)
    for i in range(10_000):
        throttle.failed(f"10.0.{i // 256}.{i % 256}", i)
    assert len(throttle) == 100
