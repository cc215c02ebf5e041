"""Records and record-batch bytes of a Produce request, read off the batch headers.

The proxy forwards Produce requests undecoded; to count what each client produces
it walks the request's structure (no copy, no decompression) to each partition's
``records`` and counts its batches by ``record_batches``' rule. Produce v3 to v13
(v9+ flexible, v13+ topic ids). A request that does not walk raises
``ProtocolError``; the caller counts nothing for it (the broker judges the
request, not this).
"""

from __future__ import annotations

from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.record_batches import Totals, Walk

__all__ = ["produced"]


def produced(frame: bytes | bytearray, body_offset: int, version: int) -> Totals:
    """(records, record-batch bytes, batches) of a Produce request of ``version`` in ``frame``."""
    if not 3 <= version <= 13:
        raise ProtocolError(f"Produce v{version} is not walked")
    read = Walk(memoryview(frame), body_offset, flexible=version >= 9, what="Produce request")
    read.skip_string()  # transactional_id
    read.take(6)  # acks, timeout_ms
    records = size = batches = 0
    for _ in range(read.count()):
        read.skip_topic(by_id=version >= 13)
        for _ in range(read.count()):
            read.take(4)  # partition index
            got = read.batches()
            records, size, batches = records + got[0], size + got[1], batches + got[2]
            read.skip_tags()
        read.skip_tags()
    return records, size, batches
