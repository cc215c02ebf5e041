"""A real kafka-python producer with the reporter, against a broker scripted per test.

Covers the KIP-714 error table end to end, the KIP-1313 version table (v0 body id,
v1 header v3 id, no telemetry APIs), both temporalities and the terminating push.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from clientmetrics.reporter import Reporter, enable_telemetry
from clientmetrics.telemetry.otlp import CUMULATIVE, DELTA
from tests.procs import wait_for
from tests.reporter.fake_broker import GET, PUSH, FakeBroker

pytestmark = pytest.mark.integration
TOTAL = "org.apache.kafka.producer.connection.creation.total"


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    fake = FakeBroker()
    yield fake
    fake.stop()


def producer(broker: FakeBroker, client_id: str = "rep-test") -> tuple[KafkaProducer, Reporter]:
    client = KafkaProducer(
        bootstrap_servers=broker.start().bootstrap,
        client_id=client_id,
        enable_idempotence=False,
    )
    return client, enable_telemetry(client, close_timeout_s=3.0)


@pytest.mark.parametrize("code", [117, 76])
def test_push_error_refetches_at_once(broker: FakeBroker, code: int) -> None:
    broker.push_script = [code, 0]
    # A long interval, so "at once" is told from "after the interval" with room for a
    # busy machine's scheduling.
    broker.interval_ms = 2000
    client, _ = producer(broker)
    try:
        wait_for(lambda: len(broker.requests(GET)) >= 2, 10, what="a second Get")
        first_push = broker.requests(PUSH)[0]
        refetch = broker.requests(GET)[1]
        assert refetch.at - first_push.at < 1.0  # not the 2 s interval
        assert refetch.instance_id == first_push.instance_id
    finally:
        client.close()


@pytest.mark.parametrize("code", [118, 89])
def test_push_error_refetches_after_the_interval(broker: FakeBroker, code: int) -> None:
    broker.push_script = [code, 0]
    client, reporter = producer(broker)
    try:
        wait_for(lambda: len(broker.requests(GET)) >= 2, 10, what="a second Get")
        gap = broker.requests(GET)[1].at - broker.requests(PUSH)[0].at
        assert gap >= 0.35  # the 400 ms interval (less its jitter); a busy machine only adds
        assert reporter.stats.errors == {code: 1}
    finally:
        client.close()


@pytest.mark.parametrize("code", [42, 87, 35, -1])
def test_fatal_push_error_stops_telemetry(
    broker: FakeBroker, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="clientmetrics.reporter")
    broker.push_script = [code]
    client, reporter = producer(broker)
    try:
        wait_for(lambda: broker.requests(PUSH), 10, what="a push")
        time.sleep(1.2)  # three intervals: a live client would have sent more
        assert len(broker.requests()) == 2
        assert reporter.stats.errors == {code: 1}
    finally:
        client.close()
    assert len(broker.requests()) == 2  # and no terminating push either
    logged = [r for r in caplog.records if r.name == "clientmetrics.reporter"]
    assert [r.getMessage() for r in logged] == [f"telemetry disabled after error {code}"]


def test_fatal_get_error_stops_telemetry(broker: FakeBroker) -> None:
    broker.get_script = [42]
    client, reporter = producer(broker)
    try:
        wait_for(lambda: broker.requests(GET), 10, what="a Get")
        time.sleep(0.8)
        assert len(broker.requests()) == 1
        assert reporter.stats.errors == {42: 1}
    finally:
        client.close()


def test_v1_broker_gets_the_id_in_header_v3(broker: FakeBroker) -> None:
    broker.telemetry_versions = (0, 1)
    client, reporter = producer(broker)
    own_id = reporter.client_instance_id(0)  # KIP-1313: known before any request
    try:
        wait_for(lambda: broker.requests(PUSH), 10, what="a push")
    finally:
        client.close()
    for seen in broker.requests():
        assert (seen.api_version, seen.header_version) == (1, 3)
        assert seen.instance_id == own_id
        assert not hasattr(seen.body, "client_instance_id")


def test_v0_broker_gets_the_client_generated_id_in_the_body(broker: FakeBroker) -> None:
    broker.telemetry_versions = (0, 0)
    client, reporter = producer(broker)
    own_id = reporter.client_instance_id(0)
    try:
        wait_for(lambda: broker.requests(PUSH), 10, what="a push")
    finally:
        client.close()
    first_get = broker.requests(GET)[0]
    assert (first_get.api_version, first_get.header_version) == (0, 2)
    assert first_get.body.client_instance_id == own_id  # "new client, old broker": not zero
    assert {s.instance_id for s in broker.requests()} == {own_id}


def test_broker_without_telemetry_apis_is_left_alone(broker: FakeBroker) -> None:
    broker.telemetry_versions = None
    client, reporter = producer(broker)
    try:
        wait_for(lambda: reporter.stats.transport_failures >= 1, 10, what="the version check")
        time.sleep(0.5)
        assert broker.requests() == []
        assert reporter.stats.transport_failures == 1  # disabled, not retried
    finally:
        client.close()


@pytest.mark.parametrize("delta", [True, False])
def test_temporality_follows_the_subscription(broker: FakeBroker, delta: bool) -> None:
    broker.delta = delta
    client, _ = producer(broker)
    try:
        wait_for(lambda: len(broker.requests(PUSH)) >= 3, 15, what="three pushes")
    finally:
        client.close()
    sums = [
        point
        for push in broker.requests(PUSH)
        for metric, point in push.points()
        if metric.name == TOTAL
    ]
    temporalities = {
        metric.sum.aggregation_temporality
        for push in broker.requests(PUSH)
        for metric, _ in push.points()
        if metric.name == TOTAL
    }
    assert len(sums) >= 3
    assert temporalities == {DELTA if delta else CUMULATIVE}
    starts = [p.start_time_unix_nano for p in sums]
    if delta:
        # Each delta starts where the previous one ended.
        assert starts[1:] == [p.time_unix_nano for p in sums[:-1]]
    else:
        assert len(set(starts)) == 1
        values = [p.as_double or p.as_int for p in sums]
        assert values == sorted(values)


def test_terminating_push_on_close(broker: FakeBroker) -> None:
    client, reporter = producer(broker)
    wait_for(lambda: broker.requests(PUSH), 10, what="a first push")
    started = time.monotonic()
    client.close()
    # It does not hang: the goodbye waits at most close_timeout_s (3 s), and that it went
    # out is asserted below; the rest is slack for a busy machine.
    assert time.monotonic() - started < 30
    pushes = broker.requests(PUSH)
    assert pushes[-1].body.terminating is True
    assert [p.body.terminating for p in pushes].count(True) == 1
    assert reporter.stats.terminating_pushes == 1


def test_pushes_stay_under_telemetry_max_bytes(broker: FakeBroker) -> None:
    broker.max_bytes = 400
    client, reporter = producer(broker)
    try:
        wait_for(lambda: len(broker.requests(PUSH)) >= 2, 10, what="two pushes")
    finally:
        client.close()
    pushes = broker.requests(PUSH)
    assert all(len(p.body.metrics) <= 400 for p in pushes)
    assert all(p.body.metrics for p in pushes)  # trimmed, not emptied
    assert reporter.stats.metrics_dropped > 0
    assert reporter.stats.errors == {}
