"""The store's start-up reads each partition's end, retrying while its leader settles.

Seen under load against Kafka 4.4: metadata named the new topic's leader, and the
ListOffsets that followed was answered NOT_LEADER_FOR_PARTITION; the gateway did not
start. (Driving Kafka into that moment on demand is not possible, so the consumer
here answers as Kafka did.)
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from clientmetrics.store.topic import TopicSubscriptionStore


class Answers:
    """A consumer whose watermark lookups raise the given errors first, then answer."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.asked: list[int] = []

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        self.asked.append(tp.partition)
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, 7


def test_a_leader_settling_in_is_waited_for() -> None:
    store = TopicSubscriptionStore("127.0.0.1:1", "subs", timeout_s=5)
    consumer = Answers(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
    assert store._end_offset(consumer, 2) == 7  # type: ignore[arg-type]
    assert consumer.asked == [2, 2, 2]


def test_an_error_that_will_not_pass_is_raised_at_once() -> None:
    store = TopicSubscriptionStore("127.0.0.1:1", "subs", timeout_s=5)
    consumer = Answers(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        store._end_offset(consumer, 0)  # type: ignore[arg-type]
    assert consumer.asked == [0]
