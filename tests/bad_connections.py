"""Connections that send one bad thing and are closed, many of them, at bounded concurrency.

What a fuzzer or a broken client does to a gateway over and over; each kind must
leave nothing behind once its connection is closed (``bench/conn_memory.py``,
``tests/gateway/test_connection_memory.py``)::

    python -m tests.bad_connections PORT KIND COUNT [--concurrency 32] [--sources 1]

Kinds: ``garbage`` (a 12-byte frame of 0xff: a size, then no readable header),
``header`` (a frame the size check passes, whose header is cut short), ``unknown``
(a well-formed header of an API nobody serves), ``truncated`` (a frame's size and
part of it, then the client closes), ``sasl`` (a PLAIN login with a wrong password,
on a SASL_PLAINTEXT listener). ``--sources`` spreads the connections over that many
loopback addresses (127.0.x.y), as from many hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import struct

from clientmetrics.wire import RequestHeader, encode_request, request_type

_SIZE = struct.Struct(">i")


def _sasl_login() -> bytes:
    handshake = encode_request(
        RequestHeader(17, 1, 1, "bad", None, 1), request_type(17, 1)(mechanism="PLAIN")
    )
    authenticate = encode_request(
        RequestHeader(36, 2, 2, "bad", None, 2),
        request_type(36, 2)(auth_bytes=b"\0alice\0not-her-password"),
    )
    return handshake + authenticate


KINDS: dict[str, bytes] = {
    "garbage": _SIZE.pack(8) + b"\xff" * 8,
    "header": _SIZE.pack(6) + struct.pack(">hhh", 18, 3, 0),
    "unknown": _SIZE.pack(10) + struct.pack(">hhih", 9999, 0, 7, -1),
    "truncated": _SIZE.pack(100) + b"\x00\x12\x00\x03",
    "sasl": _sasl_login(),
}
#: Kinds the gateway closes itself; the client reads until then.
CLOSED_BY_GATEWAY = frozenset({"garbage", "header", "unknown", "sasl"})


def source_addresses(count: int) -> list[str]:
    """``count`` loopback addresses (127.0.0.1 first)."""
    return [f"127.0.{(i + 1) // 256}.{(i + 1) % 256}" for i in range(count)]


async def one(port: int, kind: str, source: str, timeout: float) -> bool:
    """One connection; True when the gateway closed it (or the client did, by design)."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), timeout
    )
    try:
        writer.write(KINDS[kind])
        if kind not in CLOSED_BY_GATEWAY:
            await writer.drain()
            return True
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass  # a failed login's answer comes before the close
        return True
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()


async def run(port: int, kind: str, count: int, *, concurrency: int = 32, sources: int = 1) -> int:
    """``count`` connections of ``kind``; how many were closed as they should be."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {sorted(KINDS)}")
    addresses = itertools.cycle(source_addresses(sources))
    slots = asyncio.Semaphore(concurrency)
    closed = 0

    async def go(source: str) -> None:
        nonlocal closed
        async with slots:
            if await one(port, kind, source, 30.0):
                closed += 1

    await asyncio.gather(*(go(next(addresses)) for _ in range(count)))
    return closed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("count", type=int)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sources", type=int, default=1)
    args = parser.parse_args()
    closed = asyncio.run(
        run(args.port, args.kind, args.count, concurrency=args.concurrency, sources=args.sources)
    )
    print(f"{closed} of {args.count} closed")


if __name__ == "__main__":
    main()
