"""The failure throttle: doubling delay per source, reset only by the same user's
success, ceiling, decay, bounded memory."""

from __future__ import annotations

from clientmetrics.security import FailureThrottle


def test_delay_doubles_up_to_the_ceiling_and_is_per_source() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=1000)
    assert [throttle.failed("10.0.0.1", 0) for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert throttle.failed("10.0.0.2", 0) == 100


def test_success_and_time_forget() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=1000, forget_after_ms=60_000)
    throttle.failed("a", 0, "User:alice")
    throttle.failed("a", 0, "User:alice")
    throttle.succeeded("a", "User:alice")
    assert throttle.failed("a", 1, "User:alice") == 100
    assert throttle.failed("a", 2, "User:alice") == 200
    assert throttle.failed("a", 70_000, "User:alice") == 100


def test_another_accounts_success_does_not_reset_the_delay() -> None:
    # Guessing bob's password, logging in as mallory (one's own account) in between.
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=5000)
    delays = []
    for _ in range(5):
        delays.append(throttle.failed("10.0.0.9", 0, "User:bob"))
        throttle.succeeded("10.0.0.9", "User:mallory")
    assert delays == [100, 200, 400, 800, 1600]


def test_a_users_own_success_forgets_only_its_share() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=5000)
    throttle.failed("nat", 0, "User:bob")
    throttle.failed("nat", 0, "User:bob")
    throttle.failed("nat", 0, "User:carol")
    throttle.succeeded("nat", "User:carol")  # carol mistyped once, then logged in
    assert throttle.failed("nat", 1, "User:bob") == 400  # bob's two failures still count
    throttle.succeeded("nat", "User:bob")
    throttle.failed("nat", 2, "User:bob")
    assert len(throttle) == 1
    throttle.succeeded("nat", "User:bob")
    assert len(throttle) == 0  # nothing left: the record goes


def test_spraying_many_user_names_from_one_source_slows_down_too() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=5000, max_users_per_source=4)
    delays = [throttle.failed("10.0.0.9", 0, f"User:u{i}") for i in range(8)]
    assert delays == [100, 200, 400, 800, 1600, 3200, 5000, 5000]
    # Only four names are kept per source; failures beyond are counted, never forgotten.
    for i in range(8):
        throttle.succeeded("10.0.0.9", f"User:u{i}")
    assert throttle.failed("10.0.0.9", 1, "User:u0") == 1600


def test_memory_is_bounded() -> None:
    throttle = FailureThrottle(max_sources=100)
    for i in range(10_000):
        throttle.failed(f"10.0.{i // 256}.{i % 256}", i)
    assert len(throttle) == 100


def test_a_source_that_stopped_failing_is_forgotten_as_others_fail() -> None:
    throttle = FailureThrottle(forget_after_ms=60_000)
    for i in range(1000):
        throttle.failed(f"10.1.{i // 256}.{i % 256}", 0, "User:bob")
    assert len(throttle) == 1000
    throttle.failed("10.2.0.1", 59_999)
    assert len(throttle) == 1001  # none is a minute old yet
    throttle.failed("10.2.0.2", 60_000)
    assert len(throttle) == 2  # the thousand went stale; the last two stay


def test_a_long_claimed_name_is_kept_as_a_digest_and_still_forgotten_by_its_success() -> None:
    throttle = FailureThrottle(base_delay_ms=100, max_delay_ms=5000)
    names = [f"User:{i}" + "x" * 500_000 for i in range(64)]
    for name in names:
        throttle.failed("10.0.0.9", 0, name)
    kept = throttle._sources["10.0.0.9"].by_user
    assert len(kept) == 64
    assert max(len(key) for key in kept) < 100  # not 64 x 500 KB
    for name in names[1:]:
        throttle.succeeded("10.0.0.9", name)
    assert throttle.failed("10.0.0.9", 1, names[0]) == 200  # one failure left, then this one
