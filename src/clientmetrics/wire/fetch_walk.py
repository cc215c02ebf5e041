"""Records and record-batch bytes of a Fetch response, read off the batch headers.

The proxy relays Fetch responses undecoded (often megabytes); to count what each
client consumes it walks the response's structure (no copy, no decompression):
fixed-width fields are skipped, each partition's ``records`` is counted by
``record_batches``' rule (whole batches only: a response may end in a partial one,
which the client fetches again). Fetch v4 to v18 (v12+ flexible, v13+ topic ids).
A response that does not walk raises ``ProtocolError``; the caller counts nothing
for it (the client judges the response, not this).
"""

from __future__ import annotations

from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.record_batches import Totals, Walk

__all__ = ["consumed"]


def consumed(frame: bytes | bytearray, body_offset: int, version: int) -> Totals:
    """(records, record-batch bytes, batches) of a Fetch response of ``version`` in ``frame``."""
    if not 4 <= version <= 18:
        raise ProtocolError(f"Fetch v{version} is not walked")
    read = Walk(memoryview(frame), body_offset, flexible=version >= 12, what="Fetch response")
    read.take(4 + (6 if version >= 7 else 0))  # throttle; error code and session id
    records = size = batches = 0
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
            got = read.batches()
            records, size, batches = records + got[0], size + got[1], batches + got[2]
            read.skip_tags()
        read.skip_tags()
    return records, size, batches
