"""A lean KIP-714 load generator for benchmarks: many instances multiplexed on few connections.

Each connection pipelines up to ``window`` requests. Frames are encoded with the
project's wire layer; responses are matched by correlation id. Runs in its own
process so it does not share a core's event loop with the gateway.
"""

from __future__ import annotations

import asyncio
import gc
import ssl
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.client.sasl import SaslScram, authenticate
from clientmetrics.wire import (
    ApiKey,
    RequestHeader,
    decode_response,
    encode_request,
    request_header_version,
    request_type,
)

GET, PUSH = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY


@dataclass
class Results:
    ok: int = 0
    #: Seconds from the first send to the last answer (pushes only).
    elapsed: float = 0.0
    errors: dict[int, int] = field(default_factory=dict)
    latencies_us: list[int] = field(default_factory=list)
    #: (connection index, instance id, subscription id)
    instances: list[tuple[int, uuid.UUID, int]] = field(default_factory=list)


class Conn(asyncio.Protocol):
    """One pipelined connection; ``call`` returns the response frame."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiters: dict[int, asyncio.Future[bytes]] = {}
        self.transport: asyncio.Transport | None = None
        self.next_id = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            size = struct.unpack_from(">i", self.buf)[0]
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            corr = struct.unpack_from(">i", frame)[0]
            fut = self.waiters.pop(corr, None)
            if fut is not None and not fut.done():
                fut.set_result(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(ConnectionError("closed"))

    def header(self, api_key: int) -> RequestHeader:
        self.next_id += 1
        return RequestHeader(api_key, 0, self.next_id, "bench-client", header_version=2)

    def call(self, header: RequestHeader, body: object) -> asyncio.Future[bytes]:
        return self.send(header.correlation_id, encode_request(header, body))

    def send(self, correlation_id: int, frame: bytes) -> asyncio.Future[bytes]:
        """Send an already-encoded frame carrying ``correlation_id``."""
        assert self.transport is not None
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiters[correlation_id] = fut
        self.transport.write(frame)
        return fut


class _SaslLink:
    """The clients' SASL exchange (``client.sasl``) over a bench connection."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def sasl_request(self, api_key: int, version: int, body: Any, what: str) -> Any:
        conn = self.conn
        conn.next_id += 1
        header = RequestHeader(
            api_key, version, conn.next_id, "bench-client", None,
            request_header_version(api_key, version),
        )  # fmt: skip
        frame = await conn.send(header.correlation_id, encode_request(header, body))
        return decode_response(api_key, version, frame)[1]


async def connect(
    host: str, port: int, ca: str | None = None, scram: tuple[str, str] | None = None
) -> Conn:
    """A connection; over TLS (verified with the PEM bundle ``ca``) when ``ca`` is given,
    authenticated with SCRAM-SHA-512 as ``scram`` (user, password) when given."""
    loop = asyncio.get_running_loop()
    if ca is None:
        _, proto = await loop.create_connection(Conn, host, port)
    else:
        context = ssl.create_default_context(cafile=ca)
        _, proto = await loop.create_connection(
            Conn, host, port, ssl=context, server_hostname="localhost"
        )
    if scram is not None:
        await authenticate(_SaslLink(proto), SaslScram("SCRAM-SHA-512", *scram))
    return proto


async def handshake(conns: list[Conn], per_conn: int, window: int, res: Results) -> None:
    """Every instance sends GetTelemetrySubscriptions with a zero id (new instance)."""
    get_v0 = request_type(GET, 0)

    async def one(index: int, conn: Conn) -> None:
        sem = asyncio.Semaphore(window)

        async def single() -> None:
            async with sem:
                t0 = time.perf_counter_ns()
                frame = await conn.call(
                    conn.header(GET), get_v0(client_instance_id=uuid.UUID(int=0))
                )
                res.latencies_us.append((time.perf_counter_ns() - t0) // 1000)
                _, body = decode_response(GET, 0, frame)
                if int(body.error_code) == 0:
                    res.ok += 1
                    res.instances.append(
                        (index, body.client_instance_id, int(body.subscription_id))
                    )
                else:
                    res.errors[int(body.error_code)] = res.errors.get(int(body.error_code), 0) + 1

        await asyncio.gather(*(single() for _ in range(per_conn)))

    await asyncio.gather(*(one(i, c) for i, c in enumerate(conns)))


async def pushes(
    conns: list[Conn],
    instances: list[tuple[int, uuid.UUID, int]],
    payload: bytes,
    rate: float,
    window: int,
    res: Results,
) -> None:
    """Open-loop pushes at ``rate``/s, round-robin over the connections that own them."""
    push_v0 = request_type(PUSH, 0)
    sem = asyncio.Semaphore(window * len(conns))
    tasks: list[asyncio.Task[None]] = []

    # Encode every push before the clock starts, so the generator spends its CPU on
    # sending and timing, not on encoding (it shares the machine with the gateway).
    frames = []
    for index, inst, sub in instances:
        conn = conns[index]
        header = conn.header(PUSH)
        body = push_v0(
            client_instance_id=inst,
            subscription_id=sub,
            terminating=False,
            compression_type=4,
            metrics=payload,
        )
        frames.append((conn, header.correlation_id, encode_request(header, body)))

    async def single(conn: Conn, correlation_id: int, frame: bytes) -> None:
        try:
            t0 = time.perf_counter_ns()
            response = await conn.send(correlation_id, frame)
            res.latencies_us.append((time.perf_counter_ns() - t0) // 1000)
            code = struct.unpack_from(">h", response, 4 + 1 + 4)[0]  # corr, tagged, throttle
            if code == 0:
                res.ok += 1
            else:
                res.errors[code] = res.errors.get(code, 0) + 1
        finally:
            sem.release()

    # The generator's own garbage collector must not stall it mid-run: its pauses
    # would be counted as the gateway's latency.
    gc.collect()
    gc.freeze()
    gc.disable()
    start = time.perf_counter()
    for i, (conn, correlation_id, frame) in enumerate(frames):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0.001:
            await asyncio.sleep(delay)
        await sem.acquire()
        tasks.append(asyncio.create_task(single(conn, correlation_id, frame)))
    await asyncio.gather(*tasks)
    res.elapsed = time.perf_counter() - start
    gc.enable()
    gc.unfreeze()
