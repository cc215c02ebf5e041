"""The Prometheus exporter's naming rules and series state (no sockets)."""

from __future__ import annotations

import uuid

from prometheus_client.parser import text_string_to_metric_families

from clientmetrics.exporters.prometheus import PrometheusSink
from clientmetrics.exporters.prometheus_names import label_name, metric_name
from clientmetrics.exporters.prometheus_state import PushView, SeriesStore
from clientmetrics.telemetry import otlp

A, B = uuid.UUID(int=10), uuid.UUID(int=11)
T = 1_700_000_000_000_000_000


def test_names_follow_the_opentelemetry_rules() -> None:
    assert (
        metric_name("org.apache.kafka.producer.record.queue.time.avg", "ms", True)
        == "org_apache_kafka_producer_record_queue_time_avg_milliseconds"
    )
    assert metric_name("io.bytes", "By", False) == "io_bytes"  # already ends with it
    assert metric_name("rate", "By/s", True) == "rate_bytes_per_second"
    assert metric_name("used", "1", True) == "used_ratio"
    assert metric_name("used", "1", False) == "used"
    assert metric_name("requests.total", "{request}", False) == "requests"
    assert metric_name("9lives", "", True) == "_9lives"
    assert label_name("node.id") == "node_id"
    assert label_name("2x") == "key_2x"


def payload(*metrics: object) -> bytes:
    data: bytes = otlp.build_metrics_data(metrics).SerializeToString()
    return data


def apply(
    store: SeriesStore,
    instance: uuid.UUID,
    data: bytes,
    labels: list[tuple[str, str]],
    *,
    push_interval_ms: int = 1000,
    terminating: bool = False,
    now_ms: int = 0,
) -> None:
    view = PushView(instance, tuple(labels), push_interval_ms, terminating, data)
    store.apply([view], now_ms)


def sent(n: int, value: int, *, node: int = 1) -> object:
    return otlp.sum_metric(
        "org.apache.kafka.producer.node.request.count",
        value,
        time_unix_nano=T + n * 10**6,
        start_time_unix_nano=T + n * 10**6 - 1,
        attributes={"node.id": node},
    )


def test_delta_sums_become_cumulative_counters_and_a_resent_delta_counts_once() -> None:
    store = SeriesStore(100, 60_000)
    for n, value in ((1, 5), (2, 3), (2, 3), (3, 4)):
        apply(
            store,
            A,
            payload(sent(n, value)),
            [("client_id", "p")],
            push_interval_ms=1000,
            terminating=False,
            now_ms=n,
        )
    (((name, labels), series),) = store.series.items()
    assert (name, store.families[name].kind) == (
        "org_apache_kafka_producer_node_request_count",
        "counter",
    )
    assert dict(labels) == {"client_id": "p", "node_id": "1"}
    assert series.value == 12


def test_delta_histograms_add_up_per_bucket() -> None:
    store = SeriesStore(100, 60_000)
    for n, counts, total in ((1, [1, 2, 0], 7.0), (2, [0, 1, 3], 20.0)):
        h = otlp.histogram(
            "lat",
            counts,
            [10.0, 100.0],
            total,
            time_unix_nano=T + n * 10**6,
            start_time_unix_nano=T,
            unit="ms",
        )
        apply(store, A, payload(h), [], push_interval_ms=1000, terminating=False, now_ms=n)
    (((name, _), series),) = store.series.items()
    assert (name, store.families[name].kind) == ("lat_milliseconds", "histogram")
    assert (series.buckets, series.value, series.count) == ([1, 3, 3], 27.0, 7)


def test_series_go_with_their_instance_on_expiry_or_terminating_push() -> None:
    store = SeriesStore(100, 60_000)
    g = otlp.gauge("queue", 3, time_unix_nano=T)
    apply(
        store,
        A,
        payload(g),
        [("client_id", "a")],
        push_interval_ms=30_000,
        terminating=False,
        now_ms=0,
    )
    apply(
        store,
        B,
        payload(g),
        [("client_id", "b")],
        push_interval_ms=1000,
        terminating=False,
        now_ms=0,
    )
    assert len(store) == 2
    assert store.expire(60_000) == 0
    assert store.expire(60_001) == 1  # B: max(60 s, 3 s); A: 90 s
    assert store.expire(90_001) == 1
    assert len(store) == 0
    assert store.families == {}
    apply(store, A, payload(g), [], push_interval_ms=1000, terminating=False, now_ms=0)
    apply(store, A, b"", [], push_interval_ms=1000, terminating=True, now_ms=1)
    assert len(store) == 0


def test_the_series_cap_refuses_and_counts() -> None:
    store = SeriesStore(2, 60_000)
    metrics = [sent(1, 1, node=n) for n in range(5)]
    apply(store, A, payload(*metrics), [], push_interval_ms=1000, terminating=False, now_ms=0)
    assert (len(store), store.refused) == (2, 3)


async def test_scrape_text_and_openmetrics() -> None:
    sink = PrometheusSink(("127.0.0.1", 0), ["client_id"])
    gauge = otlp.gauge("org.apache.kafka.producer.record.queue.time.avg", 2.5, time_unix_nano=T)
    apply(
        sink.store,
        A,
        payload(gauge, sent(1, 5)),
        [("client_id", "p")],
        push_interval_ms=1000,
        terminating=False,
        now_ms=2**62,
    )
    text, ctype = await sink.render("")
    assert ctype.startswith("text/plain")
    samples = {
        s.name: (s.labels, s.value)
        for f in text_string_to_metric_families(text.decode())
        for s in f.samples
    }
    assert samples["org_apache_kafka_producer_record_queue_time_avg"] == ({"client_id": "p"}, 2.5)
    assert samples["org_apache_kafka_producer_node_request_count_total"][1] == 5
    body, ctype = await sink.render("application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert (
        b'org_apache_kafka_producer_node_request_count_total{client_id="p",node_id="1"} 5' in body
    )
