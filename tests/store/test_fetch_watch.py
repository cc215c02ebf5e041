"""FetchWatch reads librdkafka's statistics (the fields as librdkafka 2.16 emits them)."""

from __future__ import annotations

import json

from clientmetrics.store.follow import FetchWatch


def stats(fetches: int, state: str = "active", topic: str = "subs") -> str:
    """A statistics document trimmed to what FetchWatch reads: the fetches each broker
    sent, and each partition's fetch state (``-1`` is librdkafka's unassigned one)."""
    return json.dumps(
        {
            "brokers": {
                "127.0.0.1:9092/1": {"req": {"Fetch": fetches, "Metadata": 2}},
                "GroupCoordinator": {"req": {}},
            },
            "topics": {
                topic: {
                    "partitions": {
                        "0": {"fetch_state": state, "next_offset": 3},
                        "-1": {"fetch_state": "none"},
                    }
                }
            },
        }
    )


def test_a_follower_quiet_for_two_intervals_is_stuck_and_one_that_fetches_is_not() -> None:
    watch = FetchWatch("subs")
    for fetches in (1, 2, 3, 4):  # one long poll answered per interval
        watch.update(stats(fetches))
    assert not watch.stuck
    watch.update(stats(4))  # one quiet interval: a poll may straddle two
    assert not watch.stuck
    watch.update(stats(4))
    assert watch.stuck


def test_a_partition_not_being_fetched_counts_as_quiet() -> None:
    watch = FetchWatch("subs")
    watch.update(stats(1, "offset-query"))
    watch.update(stats(2, "paused"))
    assert watch.stuck
    other = FetchWatch("subs")
    other.update(stats(1, topic="elsewhere"))  # our topic not assigned at all
    other.update(stats(2, topic="elsewhere"))
    assert other.stuck
    garbled = FetchWatch("subs")
    garbled.update("not json")
    garbled.update("{}")
    assert not garbled.stuck
