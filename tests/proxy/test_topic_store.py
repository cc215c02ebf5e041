"""The topic subscription store against a real broker (Tansu)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from clientmetrics.store.base import ConfigMap
from clientmetrics.store.topic import TopicSubscriptionStore, decode_value, encode_value
from tests.procs import TansuProcess
from tests.proxy.conftest import TANSU_FETCH_WAIT_MS

pytestmark = pytest.mark.integration


def test_value_codec_round_trip_and_tombstone() -> None:
    configs = {"metrics": "org.apache.kafka.", "interval.ms": "1000", "match": "client_id=a=b"}
    assert decode_value(encode_value(configs)) == configs
    assert encode_value({}) is None
    assert decode_value(None) == {}
    assert decode_value(b"not json") == {}


async def test_latest_record_per_name_wins_across_restarts(tansu: TansuProcess) -> None:
    topic = f"subs-{uuid.uuid4().hex[:6]}"
    seen: list[tuple[str, dict[str, str]]] = []
    store = TopicSubscriptionStore(tansu.bootstrap, topic, fetch_wait_ms=TANSU_FETCH_WAIT_MS)
    assert await store.start(lambda n, c: seen.append((n, dict(c)))) == {}
    await store.put("a", {"metrics": "x.", "interval.ms": "1000"})
    # put returns once the store's own consumer has read the record back.
    assert seen == [("a", {"metrics": "x.", "interval.ms": "1000"})]
    await store.put("a", {"metrics": "y."})
    await store.put("b", {"metrics": "z."})
    await store.put("b", {})
    await store.close()

    reopened = TopicSubscriptionStore(tansu.bootstrap, topic, fetch_wait_ms=TANSU_FETCH_WAIT_MS)
    try:
        assert await reopened.start(lambda n, c: None) == {"a": {"metrics": "y."}}
    finally:
        await reopened.close()


async def test_change_through_one_store_reaches_another_quickly(tansu: TansuProcess) -> None:
    topic = f"subs-{uuid.uuid4().hex[:6]}"
    writer, follower = (
        TopicSubscriptionStore(tansu.bootstrap, topic, fetch_wait_ms=TANSU_FETCH_WAIT_MS)
        for _ in range(2)
    )
    arrived: asyncio.Queue[tuple[str, ConfigMap, float]] = asyncio.Queue()
    await writer.start(lambda n, c: None)
    await follower.start(lambda n, c: arrived.put_nowait((n, c, time.monotonic())))
    try:
        started = time.monotonic()
        await writer.put("shared", {"metrics": "org.apache.kafka."})
        name, configs, at = await asyncio.wait_for(arrived.get(), 5)
        assert (name, dict(configs)) == ("shared", {"metrics": "org.apache.kafka."})
        assert at - started < 2.0
    finally:
        await writer.close()
        await follower.close()


def test_a_record_computed_from_a_replaced_state_is_rejected_by_every_reader() -> None:
    store = TopicSubscriptionStore("127.0.0.1:1", "t")
    state: dict[str, dict[str, str]] = {}
    assert store._accept(state, "a", {"metrics": "x."}, -1, 0)
    assert store._accept(state, "a", {"metrics": "y."}, 0, 1)
    assert not store._accept(state, "a", {"metrics": "lost."}, 0, 2), "base 0 was replaced"
    assert not store._accept(state, "a", {"metrics": "new."}, -1, 3), "a existed already"
    assert store._accept(state, "a", {"metrics": "legacy."}, None, 4), "no base: applied"
    assert store._accept(state, "b", {"metrics": "z."}, 17, 5), "first seen: compacted before"
    assert state == {"a": {"metrics": "legacy."}, "b": {"metrics": "z."}}
