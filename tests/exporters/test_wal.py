"""The WAL record codec: every push round-trips; damage is detected, never misread."""

from __future__ import annotations

import uuid

from crc32c import crc32c
from hypothesis import assume, given
from hypothesis import strategies as st

from clientmetrics.exporters.wal import MAGIC, decode_segment, encode_record
from clientmetrics.telemetry.model import AcceptedPush

int32 = st.integers(-(2**31), 2**31 - 1)
pushes = st.builds(
    AcceptedPush,
    received_at_ms=st.integers(0, 2**53),
    client_instance_id=st.uuids(),
    subscription_id=int32,
    terminating=st.booleans(),
    client_id=st.text(max_size=40),
    client_software_name=st.text(max_size=20),
    client_software_version=st.text(max_size=20),
    client_source_address=st.text(max_size=40),
    client_source_port=int32,
    principal=st.text(max_size=20),
    node_id=int32,
    listener=st.text(max_size=20),
    security_protocol=st.text(max_size=20),
    compression_type=st.integers(-128, 127),
    push_interval_ms=int32,
    payload=st.binary(max_size=300),
)


def _rows(data: bytes) -> list[tuple[object, ...]]:
    cols = decode_segment(data).columns
    return list(
        zip(
            cols.received_at_us,
            cols.client_instance_id,
            cols.subscription_id,
            cols.terminating,
            cols.client_id,
            cols.client_software_name,
            cols.client_software_version,
            cols.client_source_address,
            cols.client_source_port,
            cols.principal,
            cols.node_id,
            cols.compression_type,
            cols.push_interval_ms,
            cols.payload,
            strict=True,
        )
    )


def _expected(push: AcceptedPush) -> tuple[object, ...]:
    return (
        push.received_at_ms * 1000,
        str(push.client_instance_id),
        push.subscription_id,
        push.terminating,
        push.client_id,
        push.client_software_name,
        push.client_software_version,
        push.client_source_address,
        push.client_source_port,
        push.principal,
        push.node_id,
        push.compression_type,
        push.push_interval_ms,
        push.payload,
    )


@given(st.lists(pushes, max_size=8))
def test_records_round_trip(batch: list[AcceptedPush]) -> None:
    data = MAGIC + b"".join(encode_record(p) for p in batch)
    contents = decode_segment(data)
    assert _rows(data) == [_expected(p) for p in batch]
    assert contents.torn_bytes == 0


def test_same_text_bytes_split_differently_stay_apart() -> None:
    """The decoder decodes a run of texts once per segment: "ab" + "c" and "a" + "bc"
    are the same bytes in a record and must still read as what was written."""
    first = AcceptedPush(
        1, uuid.uuid4(), 1, False, "ab", "c", "v", "h", 1, "p", 0, "L", "S", 0, 5, b"x"
    )
    second = AcceptedPush(
        2, uuid.uuid4(), 1, False, "a", "bc", "v", "h", 1, "p", 0, "L", "S", 0, 5, b"y"
    )
    again = AcceptedPush(
        3, uuid.uuid4(), 2, True, "ab", "c", "v", "h", 1, "p", 0, "L", "S", 0, 5, b""
    )
    data = MAGIC + encode_record(first) + encode_record(second) + encode_record(again)
    assert _rows(data) == [_expected(first), _expected(second), _expected(again)]


@given(st.lists(pushes, min_size=1, max_size=5), st.data())
def test_any_truncation_keeps_exactly_the_whole_records(
    batch: list[AcceptedPush], data: st.DataObject
) -> None:
    records = [encode_record(p) for p in batch]
    full = MAGIC + b"".join(records)
    cut = data.draw(st.integers(len(MAGIC), len(full) - 1))
    whole = 0
    end = len(MAGIC)
    for record in records:
        if end + len(record) > cut:
            break
        end += len(record)
        whole += 1
    contents = decode_segment(full[:cut])
    assert len(contents.columns) == whole
    assert contents.valid_bytes == end


@given(pushes, st.data())
def test_flipped_byte_is_detected(push: AcceptedPush, data: st.DataObject) -> None:
    record = bytearray(encode_record(push))
    index = data.draw(st.integers(0, len(record) - 1))
    record[index] ^= data.draw(st.integers(1, 255))
    contents = decode_segment(MAGIC + bytes(record))
    assert len(contents.columns) == 0


def test_missing_magic_reads_as_empty() -> None:
    push = AcceptedPush(0, uuid.uuid4(), 1, False, "", "", "", "", 0, "", 0, "", "", 0, 0, b"")
    assert len(decode_segment(encode_record(push)).columns) == 0


def test_record_layout_is_pinned_to_the_magic() -> None:
    """The layout is derived from AcceptedPush: a changed field list must bump MAGIC,
    or segments written before the change would be misread after it."""
    from clientmetrics.exporters import wal

    layouts = {b"CMWAL002": "<q16siBiibiIIIIIII"}
    assert layouts.get(MAGIC) == wal._FIXED.format


def test_a_segment_of_the_previous_version_still_decodes() -> None:
    """CMWAL001 (before the listener labels): hand-built with its own layout, read
    after an upgrade with the listener labels as PLAINTEXT."""
    import struct

    texts = [b"c1", b"librdkafka", b"2.16.0", b"127.0.0.1", b"User:alice"]
    fixed = struct.pack(
        "<q16siBiibiIIIII", 5_000, uuid.UUID(int=7).bytes, 9, 1, 4242, 3, 4, 1000,
        *map(len, texts),
    )  # fmt: skip
    body = fixed + b"".join(texts) + b"\x0a\x00"
    record = struct.pack("<II", len(body), crc32c(body)) + body
    cols = decode_segment(b"CMWAL001" + record).columns
    assert len(cols) == 1
    assert cols.client_id == ["c1"]
    assert cols.principal == ["User:alice"]
    assert cols.client_source_port == [4242]
    assert cols.node_id == [3]
    assert cols.payload == [b"\x0a\x00"]
    assert cols.listener == ["PLAINTEXT"]
    assert cols.security_protocol == ["PLAINTEXT"]


@given(pushes)
def test_a_record_decodes_back_to_its_push(push: AcceptedPush) -> None:
    from clientmetrics.exporters.wal import RECORD_HEADER, check_record, decode_record

    record = encode_record(push)
    header, body = record[: RECORD_HEADER.size], record[RECORD_HEADER.size :]
    assert check_record(header, body)
    assert decode_record(body) == push


@given(st.lists(pushes, max_size=4), st.integers(1, 70_000))
def test_zeros_after_the_records_are_padding_not_a_torn_tail(
    batch: list[AcceptedPush], zeros: int
) -> None:
    """A live segment is zero-filled ahead of its records; a dead writer leaves it so."""
    records = MAGIC + b"".join(encode_record(p) for p in batch)
    contents = decode_segment(records + bytes(zeros))
    assert _rows(records + bytes(zeros)) == [_expected(p) for p in batch]
    assert (contents.valid_bytes, contents.padding_bytes, contents.torn_bytes) == (
        len(records),
        zeros,
        0,
    )


@given(pushes, st.integers(1, 20))
def test_a_torn_record_over_zeros_is_a_torn_tail(push: AcceptedPush, cut: int) -> None:
    record = encode_record(push)
    torn = record[: len(record) - cut]
    # Missing bytes that were zeros anyway leave the record whole (its CRC says so).
    assume(any(record[len(torn) :]))
    contents = decode_segment(MAGIC + torn + bytes(4096))
    assert len(contents.columns) == 0
    assert (contents.padding_bytes, contents.torn_bytes) == (0, len(torn) + 4096)
