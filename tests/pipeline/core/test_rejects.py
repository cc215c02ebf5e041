"""What the pass leaves out, and why (``core.rejects``, ``core.decode``): each reason alone,
then hostile pushes among good ones, through the whole pass."""

from __future__ import annotations

import pyarrow as pa
import pytest
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from clientmetrics.pipeline.core import rejects
from clientmetrics.pipeline.core.batch import PassPlan, instance_groups, pass_input, process_group
from clientmetrics.pipeline.core.decode import decode_screened
from clientmetrics.pipeline.core.rejects import counts_by_reason, screen_pushes, with_origin
from clientmetrics.pipeline.core.schemas import REJECTED_ARROW
from clientmetrics.telemetry.otlp_arrow import decode_points
from tests.pipeline.hostile import (
    MAX_U64,
    gauge,
    histogram_with_count,
    hostile_id,
    hostile_pushes,
    payload,
)
from tests.synthetic import Push, landing_table, producer_payload

T_US = 1_795_300_000_000_000
T_NS = T_US * 1000
GOOD = "00000000-0000-0000-0000-000000000001"
HOUR_NS = 3_600 * 1_000_000_000


def _screen(*pushes: Push) -> tuple[pa.Table, pa.Table, pa.Table]:
    """Kept pushes, usable points and every dead letter of pushes landed in file ``f``."""
    screened = screen_pushes(with_origin(landing_table(pushes), source="f"))
    decoded = decode_screened(screened.kept)
    letters = pa.concat_tables([screened.rejected, decoded.rejected])
    return decoded.pushes, decoded.points, letters


def _reasons(letters: pa.Table) -> list[tuple[str, str, bytes, int]]:
    return [
        (row["reason"], row["field"], row["excerpt"], row["count"])
        for row in letters.select(["reason", "field", "excerpt", "count"]).to_pylist()
    ]


def test_a_time_of_2_to_the_64_decodes_instead_of_failing_the_batch() -> None:
    decoded = decode_points(pa.array([payload(gauge("g", MAX_U64), gauge("ok", T_NS))]))
    times = decoded.points.column("event_time").to_pylist()
    assert [t.isoformat() for t in times] == [
        "2554-07-21T23:34:33.709551+00:00",  # 18446744073709551615 ns, in µs
        "2026-11-21T22:26:40+00:00",
    ]


def test_an_int_past_2_to_the_53_and_counts_past_int64_decode() -> None:
    big = m.Metric(name="i", gauge=m.Gauge(data_points=[m.NumberDataPoint(as_int=2**62 + 1)]))
    decoded = decode_points(pa.array([payload(big, histogram_with_count("h", T_NS, MAX_U64))]))
    assert decoded.points.column("value").to_pylist()[0] == float(2**62)
    assert decoded.points.column("count").to_pylist() == [None, None]
    assert decoded.problems is not None
    assert decoded.problems.to_pylist() == [None, "count"]


def test_points_far_from_their_receipt_are_skipped_and_the_rest_of_the_push_kept() -> None:
    points = [
        gauge("ok", T_NS),
        gauge("max", MAX_U64),
        gauge("zero", 0),
        gauge("ahead", T_NS + HOUR_NS + 1000),  # one hour ahead is the bound; 1 µs past it
        gauge("edge", T_NS + HOUR_NS),
        gauge("ancient", 946_684_800 * 10**9 - 1000),  # before 2000-01-01
        gauge("old", T_NS - 24 * 30 * HOUR_NS),  # a month before its receipt: kept
    ]
    pushes, kept, letters = _screen(Push(T_US, GOOD, payload(*points)))
    assert kept.column("metric_name").to_pylist() == ["ok", "edge", "old"]
    assert pushes.num_rows == 1
    assert _reasons(letters) == [
        ("point_time_out_of_range", "time_unix_nano", b"max at 2554-07-21 23:34:33.709551Z", 4)
    ]
    assert letters.column("source").to_pylist() == ["f"]
    assert letters.column("client_instance_id").to_pylist() == [GOOD]


def test_a_count_past_int64_skips_its_point() -> None:
    good = histogram_with_count("h.ok", T_NS, 3)
    bad = histogram_with_count("h.bad", T_NS, MAX_U64)
    _, kept, letters = _screen(Push(T_US, GOOD, payload(good, bad)))
    assert kept.column("metric_name").to_pylist() == ["h.ok"]
    assert _reasons(letters) == [("point_count_out_of_range", "count", b"h.bad", 1)]


def test_a_start_after_its_points_time_is_unknown_and_the_point_kept() -> None:
    point = m.NumberDataPoint(time_unix_nano=T_NS, start_time_unix_nano=MAX_U64, as_int=5)
    total = m.Sum(data_points=[point], aggregation_temporality=2, is_monotonic=True)
    _, kept, letters = _screen(Push(T_US, GOOD, payload(m.Metric(name="s", sum=total))))
    assert kept.column("start_time").to_pylist() == [None]
    assert kept.column("value").to_pylist() == [5.0]
    assert letters.num_rows == 0


def test_a_payload_that_is_not_otlp_is_a_dead_letter_and_makes_no_client() -> None:
    pushes, kept, letters = _screen(Push(T_US, GOOD, b"\xff\xff\xff"), Push(T_US, GOOD, b""))
    assert pushes.column("payload").to_pylist() == [b""]  # the empty push: a live client
    assert kept.num_rows == 0
    assert _reasons(letters) == [("payload_not_otlp", "payload", b"\xff\xff\xff", 1)]


def test_a_push_with_too_many_points_is_skipped_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rejects, "MAX_POINTS_PER_PUSH", 3)
    pushes, kept, letters = _screen(
        Push(T_US, GOOD, payload(gauge("g", T_NS, count=4))),
        Push(T_US, hostile_id(1), payload(gauge("g", T_NS, count=3))),
    )
    assert pushes.column("client_instance_id").to_pylist() == [hostile_id(1)]
    assert kept.num_rows == 3
    assert _reasons(letters) == [("too_many_points", "payload", b"4", 1)]


def test_a_payload_past_the_size_bound_is_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rejects, "MAX_PAYLOAD_BYTES", 10)
    body = payload(gauge("g", T_NS))
    assert len(body) > 10
    pushes, _, letters = _screen(Push(T_US, GOOD, body), Push(T_US, GOOD, b""))
    assert pushes.num_rows == 1
    assert _reasons(letters) == [("payload_too_large", "payload", body, 1)]


def test_an_unusable_instance_id_or_receipt_time_is_a_dead_letter() -> None:
    body = payload(gauge("g", T_NS))
    pushes, _, letters = _screen(
        Push(T_US, "not-a-uuid", body),
        Push(T_US, GOOD.upper().replace("0", "A", 1), body),
        Push(1, GOOD, b""),  # a receipt in 1970
        Push(T_US, GOOD, body),
    )
    assert pushes.num_rows == 1
    assert _reasons(letters) == [
        ("invalid_instance_id", "client_instance_id", b"not-a-uuid", 1),
        ("invalid_instance_id", "client_instance_id", b"A0000000-0000-0000-0000-000000000001", 1),
        ("invalid_received_at", "received_at", b"1970-01-01 00:00:00.000001Z", 1),
    ]
    assert letters.column("received_at").to_pylist()[2] is None  # never a garbage time


def _group_result(pushes: list[Push]) -> tuple[dict[str, pa.Table], pa.Table]:
    """Every side output and the points of one pass over ``pushes`` (no carried state)."""
    screened = screen_pushes(with_origin(landing_table(pushes), source="f"))
    rows = pass_input(screened.kept, {})
    plan = PassPlan(staging="", window_seconds=60, as_of_us=T_US + 600_000_000)
    results = [process_group(group, plan) for group in instance_groups(iter(rows.to_batches()))]
    sides = {name: pa.concat_tables([r.sides[name] for r in results]) for name in results[0].sides}
    sides["rejected"] = pa.concat_tables([screened.rejected, sides["rejected"]])
    return sides, pa.concat_tables([r.points for r in results])


def test_a_pass_with_hostile_pushes_makes_what_it_makes_without_them() -> None:
    good = [
        Push(T_US + n * 60_000_000, GOOD, producer_payload((T_US + n * 60_000_000) * 1000, n))
        for n in range(5)
    ]
    hostile, expected = hostile_pushes(T_US + 120_000_000)
    with_them, points = _group_result(good[:2] + hostile + good[2:])
    without, clean_points = _group_result(good)
    assert points.equals(clean_points)
    for name, table in without.items():
        if name != "rejected":
            assert with_them[name].equals(table), name
    assert without["rejected"].num_rows == 0
    assert with_them["rejected"].schema == REJECTED_ARROW
    assert counts_by_reason(with_them["rejected"]) == expected
    assert expected == {
        "point_time_out_of_range": 3,
        "payload_not_otlp": 1,
        "point_count_out_of_range": 1,
        "too_many_points": 1,
        "invalid_instance_id": 2,
    }
