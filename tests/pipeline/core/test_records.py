"""Topic records become the landing rows the exporter was given (``core.records``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.records import RECORDS_ARROW, landing_rows
from clientmetrics.pipeline.core.schemas import LANDING_ARROW
from tests.pipeline.topic_records import topic_records
from tests.synthetic import Push, landing_table, producer_payload

T_US = 1_795_300_000_123_000  # a whole millisecond: the header carries milliseconds


def _records(rows: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]) -> pa.Table:
    return pa.table(
        {
            "key": [key for key, _, _ in rows],
            "value": [value for _, value, _ in rows],
            "partition": [0] * len(rows),
            "offset": list(range(len(rows))),
            "timestamp": [1_795_300_009_000_000] * len(rows),
            "headers": [[{"key": k, "value": v} for k, v in h] for _, _, h in rows],
        },
        schema=RECORDS_ARROW,
    )


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


def test_missing_headers_come_from_the_key_and_the_timestamp_or_are_null() -> None:
    rows = landing_rows(
        _records(
            [
                (b"i-1", b"", []),
                (b"i-2", b"", [("client_id", b"app"), ("terminating", b"TRUE")]),
                (b"i-3", b"", [("client_id", b"one"), ("client_id", b"two")]),
            ]
        )
    ).to_pylist()
    assert [r["client_instance_id"] for r in rows] == ["i-1", "i-2", "i-3"]
    assert {r["received_at"].isoformat() for r in rows} == {"2026-11-21T22:26:49+00:00"}
    assert [r["terminating"] for r in rows] == [False, True, False]
    assert [r["client_id"] for r in rows] == [None, "app", "two"]  # a repeated header: the last
    assert {r["push_interval_ms"] for r in rows} == {None}


def test_a_header_that_is_not_its_columns_type_is_an_error() -> None:
    with pytest.raises(pa.ArrowInvalid):
        landing_rows(_records([(b"i-1", b"", [("push_interval_ms", b"soon")])]))
