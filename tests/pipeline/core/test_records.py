"""Topic records become the landing rows the exporter was given (``core.records``)."""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.pipeline.core.decode import decode_pushes, decode_screened
from clientmetrics.pipeline.core.records import landing_rows, screen_records
from clientmetrics.pipeline.core.rejects import counts_by_reason
from clientmetrics.pipeline.core.schemas import LANDING_ARROW
from tests.pipeline.hostile import hostile_records, records_table
from tests.pipeline.topic_records import topic_records
from tests.synthetic import Push, landing_table, producer_payload

T_US = 1_795_300_000_123_000  # a whole millisecond: the header carries milliseconds


def _records(rows: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]) -> pa.Table:
    return records_table(rows)


def test_a_record_with_every_header_is_the_landed_row_and_decodes_to_its_points() -> None:
    payload = producer_payload(T_US * 1000, 3, latency=7.0)
    pushes = [
        Push(T_US, "00000000-0000-0000-0000-00000000000a", payload, client_id="app-a"),
        Push(T_US + 1000, "00000000-0000-0000-0000-00000000000b", b"", terminating=True),
    ]
    landed = landing_table(pushes)
    rows = landing_rows(_records(topic_records(landed)))
    assert rows.schema == LANDING_ARROW
    # The value carries the labels among the resource's attributes; all else is equal.
    assert rows.drop_columns(["payload"]) == landed.drop_columns(["payload"])
    assert decode_pushes(rows) == decode_pushes(landed)


#: Excerpts of the first bad point of a push: its metric and time (2^64 - 1 ns; 0).
MAX_AT = b"g.max at 2554-07-21 23:34:33.709551Z"
ZERO_AT = b"g.zero at 1970-01-01 00:00:00.000000Z"
ID_1 = "00000000-0000-0000-0000-000000000001"
ID_2 = "00000000-0000-0000-0000-000000000002"
ID_3 = "00000000-0000-0000-0000-000000000003"


def test_missing_headers_come_from_the_key_and_the_timestamp_or_are_null() -> None:
    rows = landing_rows(
        _records(
            [
                (ID_1.encode(), b"", []),
                (ID_2.encode(), b"", [("client_id", b"app"), ("terminating", b"TRUE")]),
                (ID_3.encode(), b"", [("client_id", b"one"), ("client_id", b"two")]),
            ]
        )
    ).to_pylist()
    assert [r["client_instance_id"] for r in rows] == [ID_1, ID_2, ID_3]
    assert {r["received_at"].isoformat() for r in rows} == {"2026-11-21T22:26:49+00:00"}
    assert [r["terminating"] for r in rows] == [False, True, False]
    assert [r["client_id"] for r in rows] == [None, "app", "two"]  # a repeated header: the last
    assert {r["push_interval_ms"] for r in rows} == {None}


def test_hostile_records_are_dead_letters_and_the_good_ones_around_them_go_on() -> None:
    good = [Push(T_US + n * 1000, f"00000000-0000-0000-0000-0000000000{n:02d}",
                 producer_payload((T_US + n * 1000) * 1000, n)) for n in range(30)]  # fmt: skip
    hostile, expected = hostile_records(T_US)
    clean = topic_records(landing_table(good))
    screened = screen_records(_records(clean[:15] + hostile + clean[15:]))
    decoded = decode_screened(screened.kept)
    # The good records' rows and points are what they are without the hostile ones.
    alone = decode_screened(screen_records(_records(clean)).kept)
    assert decoded.points.equals(alone.points)
    assert decoded.pushes.drop_columns(["offset"]) == alone.pushes.drop_columns(["offset"])
    both = pa.concat_tables([screened.rejected, decoded.rejected])
    assert counts_by_reason(both) == expected
    letters = both.select(["offset", "reason", "field", "excerpt", "count"]).to_pylist()
    found = sorted(
        (r["offset"], r["reason"], r["field"], r["excerpt"], r["count"]) for r in letters
    )
    assert found == [
        (15, "invalid_header", "received_at", b"abc", 1),
        (16, "invalid_header", "client_source_port", b"99999999999", 1),
        (17, "invalid_header", "push_interval_ms", b"1e3", 1),
        (18, "header_not_utf8", "client_id", b"\xff\xfeapp", 1),
        (19, "invalid_instance_id", "client_instance_id", b"not-a-uuid", 1),
        (20, "header_not_utf8", "key", b"\xff\xff", 1),
        (21, "invalid_header", "terminating", b"maybe", 1),
        (22, "invalid_received_at", "received_at", b"1970-01-01 00:00:00.001000Z", 1),
        (23, "invalid_header", "received_at", b"99999999999999999", 1),
        (24, "point_time_out_of_range", "time_unix_nano", MAX_AT, 1),
        (25, "point_time_out_of_range", "time_unix_nano", ZERO_AT, 2),
    ]
    assert set(both.column("topic").to_pylist()) == {"t"}
    # An instance id is kept only where it is a valid one; the excerpt shows the rest.
    ids = dict(
        zip(
            both.column("offset").to_pylist(),
            both.column("client_instance_id").to_pylist(),
            strict=True,
        )
    )
    assert (ids[19], ids[20], ids[24]) == (None, None, "00000000-0000-0000-0000-0000000bad01")


def test_a_record_with_no_usable_key_and_a_valid_id_header_is_kept() -> None:
    headers = [("client_instance_id", ID_1.encode())]
    screened = screen_records(_records([(b"\xff", b"", headers), (None, b"", headers)]))
    assert screened.kept.column("client_instance_id").to_pylist() == [ID_1, ID_1]
    assert screened.rejected.num_rows == 0
