"""Records and record-batch bytes of a Fetch or ShareFetch response, off the batch headers.

The proxy relays Fetch responses undecoded (often megabytes); to count what each
client consumes it walks the response's structure (no copy, no decompression):
fixed-width fields are skipped, each partition's ``records`` is counted by
``record_batches``' rule (whole batches only: a response may end in a partial one,
which the client fetches again). Fetch v4 to v18 (v12+ flexible, v13+ topic ids);
ShareFetch (KIP-932's share groups) v1 and v2, by the same rule: a share consumer's
records come in the same batches. A batch counts whole even where its
``AcquiredRecords`` name only part of it (another consumer of the group holds the
rest), as a Fetch's batch counts whole from an offset inside it: bytes as sent.
A response that does not walk raises ``ProtocolError``; the caller counts nothing
for it (the client judges the response, not this).
"""

from __future__ import annotations

from collections.abc import Callable

from clientmetrics.wire.api import ApiKey
from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.record_batches import Totals, Walk, plus

__all__ = ["COUNTED", "consumed", "consumed_by", "share_consumed"]


def consumed(frame: bytes | bytearray, body_offset: int, version: int) -> Totals:
    """(records, record-batch bytes, batches) of a Fetch response of ``version`` in ``frame``."""
    if not 4 <= version <= 18:
        raise ProtocolError(f"Fetch v{version} is not walked")
    read = Walk(memoryview(frame), body_offset, flexible=version >= 12, what="Fetch response")
    read.take(4 + (6 if version >= 7 else 0))  # throttle; error code and session id
    totals: Totals = (0, 0, 0)
    for _ in range(read.count()):
        read.skip_topic(by_id=version >= 13)
        for _ in range(read.count()):
            # index, error, high watermark, last stable offset (v4+), log start (v5+)
            read.take(4 + 2 + 8 + 8 + (8 if version >= 5 else 0))
            for _ in range(read.count()):  # aborted transactions
                read.take(16)
                read.skip_tags()
            if version >= 11:
                read.take(4)  # preferred read replica
            totals = plus(totals, read.batches())
            read.skip_tags()
        read.skip_tags()
    return totals


def share_consumed(frame: bytes | bytearray, body_offset: int, version: int) -> Totals:
    """(records, record-batch bytes, batches) of a ShareFetch response of ``version``."""
    if not 1 <= version <= 2:
        raise ProtocolError(f"ShareFetch v{version} is not walked")
    read = Walk(memoryview(frame), body_offset, flexible=True, what="ShareFetch response")
    read.take(4 + 2)  # throttle, error code
    read.skip_string()  # error message
    read.take(4)  # acquisition lock timeout
    totals: Totals = (0, 0, 0)
    for _ in range(read.count()):
        read.take(16)  # topic id
        for _ in range(read.count()):
            read.take(4 + 2)  # index, error code
            read.skip_string()
            read.take(2)  # acknowledge error code
            read.skip_string()
            read.take(4 + 4)  # current leader: id, epoch
            read.skip_tags()
            totals = plus(totals, read.batches())
            for _ in range(read.count()):  # acquired records: first, last, delivery count
                read.take(8 + 8 + 2)
                read.skip_tags()
            read.skip_tags()
        read.skip_tags()
    return totals


#: The responses whose records are counted as consumed, and their walks.
COUNTED: dict[int, Callable[[bytes | bytearray, int, int], Totals]] = {
    ApiKey.FETCH: consumed,
    ApiKey.SHARE_FETCH: share_consumed,
}


def consumed_by(api_key: int, frame: bytes | bytearray, body_offset: int, version: int) -> Totals:
    """What a response to ``api_key`` (one of ``COUNTED``) carries to its client."""
    walk = COUNTED.get(api_key)
    if walk is None:
        raise ProtocolError(f"responses to api key {api_key} are not counted")
    return walk(frame, body_offset, version)
