"""The operator login throttle: failures per address and per user, a window, a bound."""

from __future__ import annotations

from clientmetrics.dashboard.login_throttle import LoginThrottle, ThrottleConfig
from tests.dashboard.test_operators import Clock


def test_the_sixth_try_waits_until_the_first_failure_leaves_the_window() -> None:
    clock = Clock()
    throttle = LoginThrottle(ThrottleConfig(max_failures=5, window_s=60), clock)
    for _ in range(5):
        assert throttle.retry_after("10.0.0.1", "bob") == 0
        throttle.failed("10.0.0.1", "bob")
        clock.now += 10
    # Failures at 1000..1040; now 1050: the first leaves the window at 1060.
    assert throttle.retry_after("10.0.0.1", "bob") == 10
    assert throttle.retry_after("10.0.0.1", "alice") == 10  # the address is locked
    assert throttle.retry_after("10.0.0.2", "bob") == 10  # and so is the user name
    assert throttle.retry_after("10.0.0.2", "alice") == 0
    clock.now = 1059.5
    assert throttle.retry_after("10.0.0.1", "bob") == 1  # rounded up
    clock.now = 1060.0
    assert throttle.retry_after("10.0.0.1", "bob") == 0
    throttle.failed("10.0.0.1", "bob")  # a sixth: the window now starts at the second
    assert throttle.retry_after("10.0.0.1", "bob") == 1070 - 1060


def test_failures_spread_wider_than_the_window_never_lock() -> None:
    clock = Clock()
    throttle = LoginThrottle(ThrottleConfig(max_failures=3, window_s=30), clock)
    for _ in range(20):
        assert throttle.retry_after("10.0.0.1", "bob") == 0
        throttle.failed("10.0.0.1", "bob")
        clock.now += 15.1  # three failures always span more than 30 s


def test_state_is_bounded_and_the_least_recently_failed_go_first() -> None:
    clock = Clock()
    throttle = LoginThrottle(ThrottleConfig(max_failures=2, window_s=60, max_keys=10), clock)
    for _ in range(2):
        throttle.failed("10.0.0.1", "bob")
    for n in range(100):
        throttle.failed(f"192.0.2.{n}", f"user{n}")
        assert len(throttle) <= 10
    # bob and 10.0.0.1 failed least recently: forgotten.
    assert throttle.retry_after("10.0.0.1", "bob") == 0
    throttle.failed("192.0.2.99", "user99")
    assert throttle.retry_after("192.0.2.99", "x") == 60
