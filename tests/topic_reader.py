"""Read back what is on a Kafka topic now, with confluent-kafka (an independent reader)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.procs import MIN_DEADLINE_S


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Any]:
    """Every record on ``topic``: each partition from its start to its end offset now."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        partitions = sorted(
            consumer.list_topics(topic, timeout=MIN_DEADLINE_S).topics[topic].partitions
        )
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=MIN_DEADLINE_S)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Any] = []
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while remaining:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: partitions {remaining} not read to {ends}")
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    continue
                records.append(message)
                if message.offset() + 1 >= ends[message.partition()]:
                    remaining.discard(message.partition())
        return records
    finally:
        consumer.close()
