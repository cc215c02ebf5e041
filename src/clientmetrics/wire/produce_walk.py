"""Records and record-batch bytes of a Produce request, read off the batch headers.

The proxy forwards Produce requests undecoded; to count what each client produces
it walks the request's structure (no copy, no decompression) to each partition's
``records`` and counts its batches by ``record_batches``' rule. Produce v3 to v13
(v9+ flexible, v13+ topic ids). A request that does not walk raises
``ProtocolError``; the caller counts nothing for it (the broker judges the
request, not this).

What a client produced is what the broker acknowledged: ``acknowledged`` walks the
Produce response and keeps the partitions it answered with no error, so a batch
refused (NOT_LEADER_OR_FOLLOWER, a quota, a full disk) and sent again counts once.
"""

from __future__ import annotations

import functools

from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.record_batches import Totals, Walk, plus

__all__ = ["Parts", "acknowledged", "produced_parts", "total"]

#: A Produce request's partitions: (topic name or id, partition index) -> its batches.
Parts = dict[tuple[bytes, int], Totals]


def _checked(version: int) -> None:
    if not 3 <= version <= 13:
        raise ProtocolError(f"Produce v{version} is not walked")


def produced_parts(frame: bytes | bytearray, body_offset: int, version: int) -> Parts:
    """Each partition's (records, record-batch bytes, batches) in a Produce request."""
    _checked(version)
    read = Walk(memoryview(frame), body_offset, flexible=version >= 9, what="Produce request")
    read.skip_string()  # transactional_id
    read.take(6)  # acks, timeout_ms
    parts: Parts = {}
    for _ in range(read.count()):
        topic = read.topic(by_id=version >= 13)
        for _ in range(read.count()):
            index = read.int32()
            parts[(topic, index)] = plus(parts.get((topic, index), (0, 0, 0)), read.batches())
            read.skip_tags()
        read.skip_tags()
    return parts


def total(parts: Parts) -> Totals:
    """The sum of ``parts``: (records, record-batch bytes, batches)."""
    return functools.reduce(plus, parts.values(), (0, 0, 0))


def acknowledged(frame: bytes | bytearray, body_offset: int, version: int, sent: Parts) -> Totals:
    """What of ``sent`` the Produce response in ``frame`` acknowledged (error code 0)."""
    _checked(version)
    read = Walk(memoryview(frame), body_offset, flexible=version >= 9, what="Produce response")
    parts: Parts = {}
    for _ in range(read.count()):
        topic = read.topic(by_id=version >= 13)
        for _ in range(read.count()):
            index = read.int32()
            if read.int16() == 0 and (topic, index) in sent:
                parts[(topic, index)] = sent[(topic, index)]
            read.take(8 + 8 + (8 if version >= 5 else 0))  # offset, append time, log start
            if version >= 8:
                for _ in range(read.count()):  # record_errors
                    read.take(4)
                    read.skip_string()
                    read.skip_tags()
                read.skip_string()  # error_message
            read.skip_tags()
        read.skip_tags()
    return total(parts)
