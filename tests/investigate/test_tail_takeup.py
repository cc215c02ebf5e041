"""The tail takes up a segment converted under it: the file's rows its WAL had not shown, once.

A landed file holds its rows by share of their instance, each share's rows in
the WAL's order (docs/landing.md), not in the WAL's order overall. For
``build_push(i)``'s ids, i = 0..5, the CRC-32 of the id's text ends in the hex digits c, 2, 7, f,
a and 4: shares 12, 2, 7, 15, 10 and 4 of 16; c6 is c0's instance again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from clientmetrics.exporters.landing_files import Layout, convert_segment, to_table
from clientmetrics.exporters.wal import MAGIC, SUFFIX, decode_segment, encode_record, segment_name
from clientmetrics.investigate.tail import LandingTail
from clientmetrics.telemetry.model import AcceptedPush
from tests.exporters.landing_helpers import build_push


def _push(i: int) -> AcceptedPush:
    """``build_push(i)``; push 6 is instance 0's again."""
    push = build_push(i)
    return replace(push, client_instance_id=build_push(0).client_instance_id) if i == 6 else push


def _segment(tmp_path: Path) -> tuple[Layout, Path]:
    """A segment whose first three records the tail reads before the rest are written."""
    layout = Layout(tmp_path / "landing")
    layout.create()
    writer = layout.wal / "w1"
    writer.mkdir()
    first_ms = build_push(0).received_at_ms
    return layout, writer / f"{segment_name(first_ms, 'w1', 1)}{SUFFIX}"


def _ids(tail: LandingTail) -> list[str]:
    return sorted(str(name) for name in tail.read().column("client_id").to_pylist())


def _read_three_then_seven(tmp_path: Path) -> tuple[Layout, Path, LandingTail]:
    """The tail reads a segment's first three records; four more follow, unread."""
    layout, segment = _segment(tmp_path)
    tail = LandingTail(tmp_path, since_ms=0)
    segment.write_bytes(MAGIC + b"".join(encode_record(_push(i)) for i in range(3)))
    assert _ids(tail) == ["c0", "c1", "c2"]
    with segment.open("ab") as wal:
        wal.write(b"".join(encode_record(_push(i)) for i in range(3, 7)))
    return layout, segment, tail


def test_the_tail_takes_up_a_converted_segment_where_its_wal_left_off(tmp_path: Path) -> None:
    layout, segment, tail = _read_three_then_seven(tmp_path)
    landed = convert_segment(layout, segment)
    assert landed.path is not None
    # The file is in share order: c1 c5 c2 c4 c0 c6 c3 (its first three are not the WAL's).
    in_file = pq.read_table(landed.path).column("client_id").to_pylist()
    assert in_file == ["c1", "c5", "c2", "c4", "c0", "c6", "c3"]
    assert _ids(tail) == ["c3", "c4", "c5", "c6"]
    assert _ids(tail) == []


def test_a_file_in_the_wals_order_is_taken_up_too(tmp_path: Path) -> None:
    """A file an earlier gateway landed, its rows in the WAL's order."""
    layout, segment, tail = _read_three_then_seven(tmp_path)
    final = layout.final_path(segment.name.removesuffix(SUFFIX))
    final.parent.mkdir(parents=True)
    pq.write_table(to_table(decode_segment(segment.read_bytes()).columns), final)
    segment.unlink()
    assert _ids(tail) == ["c3", "c4", "c5", "c6"]
