"""The topic subscription store against a real broker (Tansu)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from clientmetrics.store.base import ConfigMap
from clientmetrics.store.log_state import LogState, Outcome
from clientmetrics.store.records import Decoded, decode_record, encode_value
from clientmetrics.store.topic import TopicSubscriptionStore
from tests.procs import MIN_DEADLINE_S, TansuProcess
from tests.proxy.conftest import TANSU_FETCH_WAIT_MS

pytestmark = pytest.mark.integration


def test_value_codec_round_trip_and_tombstone() -> None:
    configs = {"metrics": "org.apache.kafka.", "interval.ms": "1000", "match": "client_id=a=b"}
    assert decode_record(b"a", encode_value(configs), None, None, "t") == Decoded(
        "a", configs, None
    )
    assert encode_value({}) is None
    assert decode_record(b"a", None, None, None, "t") == Decoded("a", {}, None)


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
        name, configs, at = await asyncio.wait_for(arrived.get(), MIN_DEADLINE_S)
        assert (name, dict(configs)) == ("shared", {"metrics": "org.apache.kafka."})
        assert at - started < 2.0
    finally:
        await writer.close()
        await follower.close()


def test_a_record_computed_from_a_replaced_state_is_rejected_by_every_reader() -> None:
    log = LogState()

    def apply(name: str, metrics: str, base: int | None, offset: int) -> Outcome:
        return log.apply(Decoded(name, {"metrics": metrics}, base), offset)

    assert apply("a", "x.", -1, 0) is Outcome.APPLIED
    assert apply("a", "y.", 0, 1) is Outcome.APPLIED
    assert apply("a", "lost.", 0, 2) is Outcome.STALE, "base 0 was replaced"
    assert apply("a", "new.", -1, 3) is Outcome.STALE, "a existed already"
    assert apply("a", "legacy.", None, 4) is Outcome.APPLIED, "no base: applied"
    assert apply("b", "z.", 17, 5) is Outcome.APPLIED, "first seen: compacted before"
    assert log.configs == {"a": {"metrics": "legacy."}, "b": {"metrics": "z."}}
