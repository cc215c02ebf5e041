"""The Fetch walk: records and batch bytes consumed, from the batch headers, any version.

Responses are built and encoded with kio (an independent codec); their ``records``
are batches whose counts and sizes are pinned here by hand.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from clientmetrics.wire import ErrorCode, ProtocolError
from clientmetrics.wire.build import build
from clientmetrics.wire.codec import write_entity
from clientmetrics.wire.fetch_walk import consumed
from clientmetrics.wire.produce_walk import produced_parts, total
from tests.fleet.test_produce_walk import batch, request

HEADER = b"\x00\x00\x00\x2a\x00"  # correlation id 42, tagged fields (response header v1)


def control(records: int = 1) -> bytes:
    """A control batch (a transaction marker): attributes bit 5 set."""
    plain = bytearray(batch(records, body=10))
    plain[21:23] = struct.pack(">h", 0x20)
    return bytes(plain)


def response(version: int, topics: list[list[bytes | None]], *, aborted: bool = True) -> bytes:
    values: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 7,
        "responses": [
            {
                "topic": f"topic-{t}",
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": ErrorCode.NONE,
                        "high_watermark": 100,
                        "last_stable_offset": 90,
                        "log_start_offset": 0,
                        "aborted_transactions": [{"producer_id": 5, "first_offset": 3}]
                        if aborted
                        else None,
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                    for p, records in enumerate(partitions)
                ],
            }
            for t, partitions in enumerate(topics)
        ],
    }
    body = build(load_response_schema(1, version), values, blank=True)
    header = HEADER if version >= 12 else HEADER[:4]
    return header + write_entity(body)


@pytest.mark.parametrize("version", range(4, 19))
def test_records_and_bytes_of_every_whole_batch_of_every_partition(version: int) -> None:
    frame = response(
        version,
        [
            [batch(3) + batch(5, body=100), None, b""],
            # A control batch is no client record; a partial batch ends the response.
            [batch(1, body=0) + control() + batch(4, body=30)[:50]],
        ],
        aborted=version % 2 == 0,
    )
    offset = 5 if version >= 12 else 4
    assert consumed(frame, offset, version) == (3 + 5 + 1, 81 + 161 + 61, 3)


def test_the_produce_and_fetch_walks_count_the_same_batches_alike() -> None:
    batches = batch(2, body=7) + batch(9, body=300) + control(3)
    fetch = response(17, [[batches]])
    assert (
        consumed(fetch, 5, 17)
        == total(produced_parts(request(12, [batches]), 6, 12))
        == (11, 68 + 361, 2)
    )


def test_a_response_that_ends_early_or_an_unknown_version_is_refused() -> None:
    frame = response(16, [[batch(3)]])
    with pytest.raises(ProtocolError, match="Fetch response ends early"):
        consumed(frame[:30], 5, 16)
    with pytest.raises(ProtocolError):
        consumed(frame, 5, 3)
    with pytest.raises(ProtocolError):
        consumed(frame, 5, 19)


@given(data=st.binary(max_size=200), version=st.integers(4, 18))
@settings(max_examples=300, deadline=None)
def test_garbage_walks_or_is_a_protocol_error(data: bytes, version: int) -> None:
    try:
        records, size, batches = consumed(data, 0, version)
    except ProtocolError:
        return
    assert size >= 61 * batches >= 0
    assert isinstance(records, int)
