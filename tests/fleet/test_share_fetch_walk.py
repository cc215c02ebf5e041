"""The ShareFetch walk (KIP-932): a share consumer's records and batch bytes, counted as Fetch's.

Responses are built and encoded with kio (an independent codec) and one is written
byte by byte here; their ``records`` are batches whose counts and sizes are pinned
by hand (``batch(n, body)`` is ``61 + body`` bytes).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from clientmetrics.wire import ApiKey, ErrorCode, ProtocolError
from clientmetrics.wire.build import build
from clientmetrics.wire.codec import write_entity
from clientmetrics.wire.fetch_walk import consumed, consumed_by, share_consumed
from tests.fleet.test_fetch_walk import HEADER, control
from tests.fleet.test_fetch_walk import response as fetch_response
from tests.fleet.test_produce_walk import batch, uvarint


def response(version: int, topics: list[list[bytes | None]], *, message: str | None) -> bytes:
    """A ShareFetch response; every partition acquired two ranges, a node endpoint named."""
    partition: dict[str, Any] = {
        "error_code": ErrorCode.NONE,
        "error_message": message,
        "acknowledge_error_code": 0,
        "acknowledge_error_message": message,
        "current_leader": {"leader_id": 1, "leader_epoch": 4},
        "acquired_records": [
            {"first_offset": 0, "last_offset": 9, "delivery_count": 1},
            {"first_offset": 12, "last_offset": 20, "delivery_count": 2},
        ],
    }
    values: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.NONE,
        "error_message": message,
        "acquisition_lock_timeout": 30_000,
        "responses": [
            {
                "topic_id": uuid.uuid4(),
                "partitions": [
                    partition | {"partition_index": p, "records": records}
                    for p, records in enumerate(partitions)
                ],
            }
            for partitions in topics
        ],
        "node_endpoints": [{"node_id": 1, "host": "broker-1.example", "port": 9092, "rack": "a"}],
    }
    return HEADER + write_entity(build(load_response_schema(78, version), values, blank=True))


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("message", [None, "a message"])
def test_records_and_bytes_of_every_whole_batch_of_every_partition(
    version: int, message: str | None
) -> None:
    frame = response(
        version,
        [
            [batch(3) + batch(5, body=100), b""],  # null records: written by hand below
            # A control batch is no client record; a partial batch ends the records.
            [batch(1, body=0) + control() + batch(4, body=30)[:50]],
        ],
        message=message,
    )
    assert share_consumed(frame, 5, version) == (3 + 5 + 1, 81 + 161 + 61, 3)


def test_a_response_written_by_hand() -> None:
    """One topic; a partition with batches of 2 and 7 records (68 and 361 bytes), one
    with null records (nothing acquired) and a tagged field."""
    records = batch(2, body=7) + batch(7, body=300)
    body = struct.pack(">ihbi", 0, 0, 0, 30_000)  # throttle, error, null message, lock
    body += uvarint(2) + bytes(16)  # one topic, its id
    body += uvarint(3) + struct.pack(">ih", 0, 0) + b"\x00"  # two partitions; no message
    body += struct.pack(">h", 0) + b"\x00"  # acknowledge error, no message
    body += struct.pack(">ii", 1, 4) + b"\x00"  # current leader and its tags
    body += uvarint(len(records) + 1) + records
    body += uvarint(2) + struct.pack(">qqh", 0, 8, 1) + b"\x00"  # one acquired range
    body += b"\x00"  # the partition's tags
    body += struct.pack(">ih", 1, 0) + uvarint(3) + b"no" + struct.pack(">h", 0) + b"\x00"
    body += struct.pack(">ii", 1, 4) + b"\x01" + uvarint(0) + uvarint(2) + b"xy"  # a tag
    body += b"\x00" + uvarint(1)  # null records, no acquired ranges
    body += b"\x00" + b"\x00"  # the partition's tags, the topic's tags
    body += uvarint(1) + b"\x00"  # no node endpoints, tags
    frame = HEADER + body
    assert share_consumed(frame, 5, 1) == (9, 68 + 361, 2)
    assert consumed_by(ApiKey.SHARE_FETCH, frame, 5, 2) == (9, 429, 2)


def test_share_fetch_and_fetch_count_the_same_batches_alike() -> None:
    batches = batch(2, body=7) + batch(9, body=300) + control(3)
    share = response(2, [[batches]], message=None)
    fetch = fetch_response(17, [[batches]])
    assert share_consumed(share, 5, 2) == consumed(fetch, 5, 17) == (11, 68 + 361, 2)
    assert consumed_by(ApiKey.FETCH, fetch, 5, 17) == (11, 429, 2)


def test_a_response_that_ends_early_or_an_unknown_version_or_api_is_refused() -> None:
    frame = response(1, [[batch(3)]], message=None)
    with pytest.raises(ProtocolError, match="ShareFetch response ends early"):
        share_consumed(frame[:30], 5, 1)
    for version in (0, 3):
        with pytest.raises(ProtocolError, match=f"ShareFetch v{version} is not walked"):
            share_consumed(frame, 5, version)
    with pytest.raises(ProtocolError, match="api key 79 are not counted"):
        consumed_by(ApiKey.SHARE_ACKNOWLEDGE, frame, 5, 1)


@given(data=st.binary(max_size=200), version=st.integers(1, 2))
@settings(max_examples=300, deadline=None)
def test_garbage_walks_or_is_a_protocol_error(data: bytes, version: int) -> None:
    try:
        records, size, batches = share_consumed(data, 0, version)
    except ProtocolError:
        return
    assert size >= 61 * batches >= 0
    assert isinstance(records, int)
