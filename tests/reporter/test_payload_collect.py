"""Payload building (size bound, codecs) and metric collection (names, temporality)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from clientmetrics.reporter.collect import Collector, RawMetric
from clientmetrics.reporter.payload import MetricPoint, encode_push
from clientmetrics.telemetry.client_state import ReceivedSubscription
from clientmetrics.telemetry.compression import decompress
from clientmetrics.telemetry.otlp import CUMULATIVE, DELTA, parse_metrics_data

ALL = ("org.apache.kafka.",)


def sub(metrics: tuple[str, ...] = ALL, delta: bool = True) -> ReceivedSubscription:
    return ReceivedSubscription(7, (4, 3, 1, 2), 1000, 1 << 20, delta, metrics)


def points(count: int, seed: int = 0) -> list[MetricPoint]:
    rng = random.Random(seed)
    return [
        MetricPoint(f"org.apache.kafka.producer.metric.{i}", rng.random() * 1e6, 1_000 + i)
        for i in range(count)
    ]


def names_in(payload: bytes, codec: int) -> list[str]:
    data = parse_metrics_data(decompress(codec, payload, 1 << 24) if codec else payload)
    return [m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]


def test_small_payload_is_sent_uncompressed() -> None:
    push = encode_push(points(3), resource={}, accepted_compression_types=(4,), max_bytes=10**6)
    assert push.compression_type == 0
    assert len(names_in(push.metrics, 0)) == 3


def test_large_payload_uses_the_first_accepted_codec() -> None:
    for accepted, expected in [((4, 3), 4), ((3, 4), 3), ((1,), 1), ((2,), 2), ((9, 1), 1)]:
        push = encode_push(
            points(200), resource={}, accepted_compression_types=accepted, max_bytes=10**6
        )
        assert push.compression_type == expected
        assert len(names_in(push.metrics, expected)) == 200


@settings(max_examples=25, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=120), limit=st.integers(min_value=1, max_value=4000)
)
def test_payload_never_exceeds_max_bytes_and_drops_whole_metrics_from_the_end(
    count: int, limit: int
) -> None:
    pts = points(count, seed=count)
    push = encode_push(
        pts, resource={"group_id": "g"}, accepted_compression_types=(0,), max_bytes=limit
    )
    assert len(push.metrics) <= limit
    sent = names_in(push.metrics, push.compression_type) if push.metrics else []
    assert sent == [p.name for p in pts[: len(sent)]]  # a prefix: whole metrics, in order
    assert push.sent == len(sent)
    assert push.dropped == count - len(sent)
    if count and push.dropped:
        # It kept as many as fit: one more would not have.
        bigger = encode_push(
            pts[: push.sent + 1],
            resource={"group_id": "g"},
            accepted_compression_types=(0,),
            max_bytes=10**9,
        )
        assert len(bigger.metrics) > limit


def raw(group: str, name: str, value: float, cumulative: bool = False) -> RawMetric:
    return RawMetric(group, name, (("client-id", "p1"),), value, cumulative)


def test_kafka_python_groups_map_to_kip_names_and_node_ids() -> None:
    collected = Collector().collect(
        [
            raw("producer-node-metrics.node-3", "request-latency-avg", 2.5),
            raw("producer-node-metrics.node-bootstrap-0", "request-latency-avg", 9.0),
            raw("producer-metrics", "throttle-time-max", 0.0),
            raw("producer-metrics", "batch-size-max", float("-inf")),
            raw("producer-metrics", "zzz-nonstandard", 1.5),
            raw("producer-metrics", "record-queue-time-avg", 4.0),
        ],
        sub(),
        5_000,
    )
    by_name = {p.name: p for p in collected}
    node = by_name["org.apache.kafka.producer.node.request.latency.avg"]
    assert node.attributes == {"node_id": 3}  # client-id dropped, node from the group
    assert "org.apache.kafka.producer.produce.throttle.time.max" in by_name
    assert "org.apache.kafka.producer.zzz.nonstandard" in by_name  # the naming rule
    assert not any("batch.size" in n for n in by_name)  # -inf: nothing measured yet
    assert len(collected) == 4  # bootstrap node dropped
    # Standard metrics come first, so trimming drops the others first.
    assert collected[-1].name == "org.apache.kafka.producer.zzz.nonstandard"


def test_subscription_prefixes_filter() -> None:
    collected = Collector().collect(
        [raw("producer-metrics", "record-queue-time-avg", 1), raw("producer-metrics", "x", 1)],
        sub(metrics=("org.apache.kafka.producer.record",)),
        1,
    )
    assert [p.name for p in collected] == ["org.apache.kafka.producer.record.queue.time.avg"]


def counter(value: float) -> list[RawMetric]:
    return [raw("producer-metrics", "connection-creation-total", value, cumulative=True)]


def test_delta_temporality_sends_differences_since_the_last_push() -> None:
    c = Collector()
    first = c.collect(counter(3), sub(delta=True), 1_000)[0]
    second = c.collect(counter(5), sub(delta=True), 2_000)[0]
    third = c.collect(counter(5), sub(delta=True), 3_000)[0]
    assert (first.value, second.value, third.value) == (3, 2, 0)
    assert (second.start_time_unix_nano, third.start_time_unix_nano) == (1_000, 2_000)
    otlp = second.to_otlp()
    assert otlp.sum.aggregation_temporality == DELTA
    assert otlp.sum.is_monotonic


def test_cumulative_temporality_sends_totals_from_the_first_sight() -> None:
    c = Collector()
    values = [c.collect(counter(v), sub(delta=False), t)[0] for v, t in ((3, 10), (5, 20))]
    assert [p.value for p in values] == [3, 5]
    assert {p.start_time_unix_nano for p in values} == {10}
    assert values[1].to_otlp().sum.aggregation_temporality == CUMULATIVE


def test_temporality_change_resets_baselines() -> None:
    c = Collector()
    c.collect(counter(3), sub(delta=True), 10)
    c.collect(counter(4), sub(delta=False), 20)
    back = c.collect(counter(6), sub(delta=True), 30)[0]
    assert back.value == 6  # a fresh baseline: the full value again
