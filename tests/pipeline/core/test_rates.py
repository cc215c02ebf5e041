"""Decode, series keys and temporality, worked out by hand."""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.rates import fresh_rates, merge_series, normalise, series_lasts
from clientmetrics.pipeline.core.schemas import SERIES_STATE_ARROW
from clientmetrics.pipeline.core.series import running_values, series_keys, with_running_values
from tests.golden import LIBRDKAFKA as FIXTURES
from tests.pipeline.core.tables import T0, at, by_column, decoded, table
from tests.synthetic import Push, landing_table


def test_decode_reads_every_point_and_copies_the_push_labels() -> None:
    consumer = (FIXTURES / "consumer-push.otlp.bin").read_bytes()
    pushes = landing_table(
        [
            Push(1, "a", consumer, client_source_port=5555),
            Push(2, "b", b""),
            Push(3, "d", b"\xff\xff\xff"),
        ]
    )
    points = decode_pushes(pushes)
    expected = (FIXTURES / "consumer-push.txt").read_text().count("data_points {")
    assert points.num_rows == expected
    assert set(points.column("client_instance_id").to_pylist()) == {"a"}
    running, _ = running_values(points)
    latency = running.filter(
        pa.compute.match_substring(running.column("metric_name"), "node.request.latency.avg")
    )
    assert sorted(by_column(latency, "series", "client_source_port")) == [
        ("a|org.apache.kafka.consumer.node.request.latency.avg|node.id=-1", 5555),
        ("a|org.apache.kafka.consumer.node.request.latency.avg|node.id=111", 5555),
    ]


def test_series_keys_sort_attributes_and_keep_empty_ones() -> None:
    attributes = pa.array(
        [[("b", "2"), ("a", "1")], [("a", None)], [], None],
        pa.map_(pa.string(), pa.string()),
    )
    keys = series_keys(pa.array(["i-1"] * 4), pa.array(["m"] * 4), attributes)
    assert keys.to_pylist() == ["i-1|m|a=1,b=2", "i-1|m|a=", "i-1|m|", "i-1|m|"]


def _normalised(rows: list[dict[str, object]], state: pa.Table) -> tuple[pa.Table, pa.Table]:
    running, order = running_values(decoded(rows))
    points = normalise(running, state)
    return points.take(order), merge_series(state, series_lasts(points, order))


def _state(rows: list[tuple[str, object, object, float]]) -> pa.Table:
    names = SERIES_STATE_ARROW.names
    return table(SERIES_STATE_ARROW, [dict(zip(names, row, strict=True)) for row in rows])


def test_delta_and_cumulative_sums_normalise_to_the_same_cumulative_and_rate() -> None:
    common = {"kind": "sum", "monotonic": True}
    rows = [
        # delta: +2 every 10 s, continuing a carried cumulative of 100
        {**common, "metric_name": "d", "temporality": "delta", "start_time": at(0),
         "event_time": at(10), "value": 2.0},
        {**common, "metric_name": "d", "temporality": "delta", "start_time": at(10),
         "event_time": at(20), "value": 2.0},
        # cumulative: 102 then 104, the same series seen the other way
        {**common, "metric_name": "c", "temporality": "cumulative", "start_time": at(-100),
         "event_time": at(10), "value": 102.0},
        {**common, "metric_name": "c", "temporality": "cumulative", "start_time": at(-100),
         "event_time": at(20), "value": 104.0},
        # a reset: a new start time, counting from zero again
        {**common, "metric_name": "c", "temporality": "cumulative", "start_time": at(25),
         "event_time": at(30), "value": 5.0},
        {"metric_name": "g", "kind": "gauge", "event_time": at(10), "value": 7.0},
        {"metric_name": "g", "kind": "gauge", "event_time": at(11), "value": None},
    ]  # fmt: skip
    state = _state([("i-1|d|", at(0), at(-10), 100.0), ("i-1|c|", at(0), at(-100), 100.0)])
    points, next_state = _normalised(rows, state)
    assert sorted(
        by_column(points, "metric_name", "event_time", "cumulative_value", "rate_per_second")
    ) == [
        ("c", at(10), 102.0, 0.2),
        ("c", at(20), 104.0, 0.2),
        ("c", at(30), 5.0, 1.0),
        ("d", at(10), 102.0, 0.2),
        ("d", at(20), 104.0, 0.2),
        ("g", at(10), None, None),
        ("g", at(11), None, None),
    ]
    assert sorted(by_column(next_state, *SERIES_STATE_ARROW.names)) == [
        ("i-1|c|", at(30), at(25), 5.0),
        ("i-1|d|", at(20), at(10), 104.0),
    ]


def test_series_state_keeps_series_absent_from_the_batch() -> None:
    state = _state([("old|x|", at(0), at(0), 1.0)])
    _, next_state = _normalised([{"metric_name": "g", "kind": "gauge", "value": 1.0}], state)
    assert by_column(next_state, *SERIES_STATE_ARROW.names) == [("old|x|", at(0), at(0), 1.0)]


def test_a_delta_point_without_start_time_takes_its_rate_since_the_previous_point() -> None:
    rows = [
        {"metric_name": "d", "kind": "sum", "temporality": "delta", "event_time": at(t), "value": v}
        for t, v in ((10, 3.0), (15, 5.0))
    ]
    points, _ = _normalised(rows, _state([("i-1|d|", at(0), None, 10.0)]))
    # 3 over the 10 s since the carried point, then 5 over 5 s; totals 13 and 18.
    assert by_column(points, "cumulative_value", "rate_per_second") == [(13.0, 0.3), (18.0, 1.0)]


def test_fresh_rates_continue_from_the_series_state() -> None:
    rows = [
        {"metric_name": "c", "kind": "sum", "temporality": "cumulative", "monotonic": True,
         "start_time": at(-100), "event_time": at(t), "value": v}
        for t, v in ((10, 110.0), (20, 90.0))
    ]  # fmt: skip
    fresh = fresh_rates(decoded(rows), _state([("i-1|c|", at(0), at(-100), 100.0)]))
    # +10 in 10 s; then the monotonic sum went down: a reset, 90 over the 120 s since its start.
    assert by_column(fresh, "rate_per_second") == [(1.0,), (0.75,)]


def test_running_values_per_series_in_event_time_order() -> None:
    points = decoded(
        [
            {"metric_name": m, "kind": k, "temporality": tm, "value": v, "event_time": at(t)}
            for m, k, tm, v, t in (
                ("d", "sum", "delta", 2.0, 30),
                ("d", "sum", "delta", None, 10),
                ("g", "gauge", None, 9.0, 10),
                ("d", "sum", "delta", 1.0, 20),
                ("e", "sum", "cumulative", 5.0, 10),
            )
        ]
    )
    result = with_running_values(points)
    rows = by_column(result, "series", "value", "_run", "_prev_run", "_has_prev", "_prev_delta")
    assert sorted(rows, key=lambda row: (row[0], row[4] or False, row[2] or 0)) == [
        ("i-1|d|", None, None, None, False, None),
        ("i-1|d|", 1.0, 1.0, None, True, True),
        ("i-1|d|", 2.0, 3.0, 1.0, True, True),
        ("i-1|e|", 5.0, 5.0, None, False, None),
        ("i-1|g|", 9.0, None, None, None, None),
    ]
    assert result.column("received_at")[0].as_py() == T0


def test_franz_go_node_id_and_librdkafka_node_dot_id_are_one_series_label() -> None:
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

    def payload(key: str) -> bytes:
        node = common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=3))
        point = m.NumberDataPoint(time_unix_nano=1, as_double=1.0, attributes=[node])
        metric = m.Metric(name="lat", gauge=m.Gauge(data_points=[point]))
        data = m.MetricsData(
            resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=[metric])])]
        )
        return data.SerializeToString()

    pushes = landing_table([Push(1, "i", payload("node_id")), Push(2, "i", payload("node.id"))])
    running, _ = running_values(decode_pushes(pushes))
    assert running.column("series").to_pylist() == ["i|lat|node.id=3"] * 2
    assert running.column("attributes").to_pylist() == [[("node.id", "3")]] * 2


def test_a_series_key_is_read_back_by_the_functions_that_made_it() -> None:
    from clientmetrics.pipeline.core.series import (
        series_attributes,
        series_instances,
        series_keys,
    )

    attributes = pa.array(
        [[("node.id", "1"), ("a", "x|y")], []], type=pa.map_(pa.string(), pa.string())
    )
    keys = series_keys(pa.array(["i-1", "i-2"]), pa.array(["m.one", "m.two"]), attributes)
    assert keys.to_pylist() == ["i-1|m.one|a=x|y,node.id=1", "i-2|m.two|"]
    assert series_instances(keys).to_pylist() == ["i-1", "i-2"]
    # an attribute value may hold the separator: the attributes are everything after two
    assert [series_attributes(k) for k in keys.to_pylist()] == ["a=x|y,node.id=1", ""]
