"""Hostile pushes against one gateway: does a clean client keep being served?

Two attacker connections loop Get -> Push with payloads that are expensive to
take apart (1 MiB of empty gzip members or lz4 frames, or a valid zstd payload
that expands to nearly ``telemetry.max.bytes`` of OTLP). A clean client on its
own connection sends ApiVersions round trips; its rate is printed alone and next
to each attack, with the attackers' push rate and answers.

``--attack instances``: attacker processes flood GetTelemetrySubscriptions with a
zero id (every one creates a client instance; the registry is capped at
``--max-instances`` so the flood runs into its bound and evicts), 512 pipelined per
connection; a clean client times its own Gets (p50, p99, max) alone and beside.

``--attack plain``: a SASL/PLAIN gateway whose user has a SCRAM-SHA-512 credential
of 16384 iterations, and a flood of logins with fresh wrong passwords (each one a
PBKDF2 derivation for the gateway, ``tests/plain_flood.py``); the clean client,
logged in before, alternates ApiVersions and GetTelemetrySubscriptions; then a
second user logs in for the first time from another address. Usage:

    python bench/starvation.py --seconds 5
    python bench/starvation.py --attack plain --seconds 5
    python bench/starvation.py --attack instances --seconds 10
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import lz4.frame
import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tail_latency import cores, pin  # noqa: E402
from tests.frames import recv_frame  # noqa: E402
from tests.plain_flood import CleanClient, add_user, start_flood  # noqa: E402
from tests.procs import GatewayProcess  # noqa: E402

from clientmetrics.telemetry import build_metrics_data, gauge  # noqa: E402
from clientmetrics.wire import (  # noqa: E402
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)

T0 = 1_700_000_000_000_000_000


def clean_rate(port: int, seconds: float) -> float:
    frame = encode_request(RequestHeader(18, 0, 1, "clean"), request_type(18, 0)())
    done = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sock.sendall(frame)
            recv_frame(sock)
            done += 1
    return done / seconds


def attacker(
    port: int, codec: int, payload: bytes, stop: threading.Event, codes: collections.Counter[int]
) -> None:
    get_body = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    get = encode_request(RequestHeader(71, 0, 1, "attacker"), get_body)
    # Encode the big push once; patch the instance and subscription ids per round.
    marker = uuid.UUID(bytes=b"\xa5" * 16)
    template = bytearray(
        encode_request(
            RequestHeader(72, 0, 2, "attacker"),
            request_type(72, 0)(
                client_instance_id=marker,
                subscription_id=0,
                terminating=False,
                compression_type=codec,
                metrics=payload,
            ),
        )
    )
    at = bytes(template).index(marker.bytes)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        while not stop.is_set():
            sock.sendall(get)
            _, sub = decode_response(71, 0, recv_frame(sock))
            template[at : at + 16] = sub.client_instance_id.bytes
            struct.pack_into(">i", template, at + 16, sub.subscription_id)
            sock.sendall(template)
            _, answer = decode_response(72, 0, recv_frame(sock))
            codes[int(answer.error_code)] += 1


def heavy_otlp(limit: int) -> bytes:
    """A valid MetricsData of many gauges, just under ``limit`` bytes."""
    metrics = [
        gauge(
            f"org.apache.kafka.bench.metric{i}",
            float(i),
            time_unix_nano=T0,
            attributes={"node.id": i},
        )
        for i in range(200)
    ]
    one = build_metrics_data(metrics, resource_attributes={"client_rack": "r"}).SerializeToString()
    copies = max(1, limit // len(one) - 1)
    return one * copies  # concatenated messages merge: still one valid MetricsData


def attacks(max_bytes: int) -> list[tuple[str, int, bytes]]:
    empty_gzip = gzip.compress(b"", mtime=0)
    empty_lz4 = lz4.frame.compress(b"")
    mib = 1 << 20
    otlp = heavy_otlp(max_bytes)
    return [
        ("1 MiB of empty gzip members", 1, empty_gzip * (mib // len(empty_gzip))),
        ("1 MiB of empty lz4 frames", 3, empty_lz4 * (mib // len(empty_lz4))),
        (
            f"zstd OTLP expanding to {len(otlp) // 1024} KiB",
            4,
            zstandard.ZstdCompressor().compress(otlp),
        ),
    ]


def plain_flood(seconds: float, threads: int, logins: float) -> None:
    """The clean client's rate alone and beside a flood of wrong PLAIN logins."""
    password = "alice-secret"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        add_user(data, "alice", password)
        add_user(data, "bob", password)
        config = '[sasl]\nmechanisms = ["PLAIN"]\n'
        gw = GatewayProcess(data, config, listen_protocol="SASL_PLAINTEXT").start()
        try:
            clean = CleanClient(gw.port, "alice", password)
            alone = clean.latencies(seconds)
            rate_alone = len(alone) / seconds
            print(
                f"clean client alone:        {rate_alone:8.1f} requests/s, "
                f"p50 {statistics.median(alone) * 1000:6.2f} ms"
            )
            flood = start_flood(gw.port, "alice", seconds + 1.5, threads, logins)
            time.sleep(0.5)
            beside = clean.latencies(seconds)
            try:
                other = CleanClient(gw.port, "bob", password, source="127.0.0.2")
                other.close()
                login = f"{other.login_s * 1000:.1f} ms"
            except OSError as exc:  # the loop never got to it
                login = f"none ({exc!r})"
            out, _ = flood.communicate(timeout=60)
            rate = len(beside) / seconds
            print(
                f"beside a PLAIN flood:      {rate:8.1f} requests/s "
                f"({rate / rate_alone:6.1%}), "
                f"p50 {statistics.median(beside) * 1000:6.2f} ms, "
                f"max {max(beside) * 1000:7.1f} ms; flood sent "
                f"{int(out) / (seconds + 1.5):7.1f} logins/s"
            )
            print(f"first PLAIN login from another address beside the flood: {login}")
            clean.close()
        finally:
            gw.stop()
        print(f"gateway tracebacks: {len(gw.tracebacks())}")


def get_flood(port: int, seconds: float, window: int, core: int | None, nice: int) -> None:
    """One attacker process: ``window`` Gets with a zero id in flight, for ``seconds``."""
    pin(core, nice)
    # Below the clean client on the core they share: its own CPU time is not taken.
    os.nice(19)
    get = encode_request(
        RequestHeader(71, 0, 1, "flood"),
        request_type(71, 0)(client_instance_id=uuid.UUID(int=0)),
    )
    deadline = time.monotonic() + seconds
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        while time.monotonic() < deadline:
            sock.sendall(get * window)
            for _ in range(window):
                recv_frame(sock)


def clean_gets(port: int, seconds: float) -> list[float]:
    """A clean client's Get round trips (new instances too), ms, sorted."""
    get = encode_request(
        RequestHeader(71, 0, 1, "clean"),
        request_type(71, 0)(client_instance_id=uuid.UUID(int=0)),
    )
    times: list[float] = []
    # Another address than the flood's: the gateway shares its Get work by source.
    address = ("127.0.0.1", port)
    with socket.create_connection(address, timeout=60, source_address=("127.0.0.2", 0)) as sock:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            sock.sendall(get)
            recv_frame(sock)
            times.append((time.perf_counter() - started) * 1000)
            time.sleep(0.005)
    return sorted(times)


def instance_flood(seconds: float, attackers: int, max_instances: int, nice: int) -> None:
    """Other clients' Gets alone and beside a flood of new instance ids; the gateway's
    event loop pinned to one core, the clients to another."""
    import multiprocessing

    def line(label: str, times: list[float]) -> str:
        p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
        return (
            f"{label}: {len(times)} Gets, p50 {statistics.median(times):7.2f} ms, "
            f"p99 {p99:7.2f} ms, max {times[-1]:7.1f} ms"
        )

    config = f"[telemetry]\nmax_instances = {max_instances}\n"
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(Path(tmp) / "data", config).start()
        gateway_core, client_core = cores()
        assert gw.proc is not None
        if gateway_core is not None:
            os.sched_setaffinity(gw.proc.pid, {gateway_core})  # its event loop's thread
        if nice:
            os.setpriority(os.PRIO_PROCESS, gw.proc.pid, nice)
        pin(client_core, nice)
        print(f"gateway's loop on core {gateway_core}, clients on {client_core}, nice {nice}")
        try:
            print(line("clean client alone          ", clean_gets(gw.port, seconds)))
            ctx = multiprocessing.get_context("spawn")
            flood = [
                ctx.Process(target=get_flood, args=(gw.port, seconds + 2, 512, client_core, nice))
                for _ in range(attackers)
            ]
            for proc in flood:
                proc.start()
            time.sleep(1.0)
            print(line(f"beside {attackers} flooding connections", clean_gets(gw.port, seconds)))
            for proc in flood:
                proc.join(seconds + 60)
            print(line("clean client alone again    ", clean_gets(gw.port, seconds)))
        finally:
            gw.stop()
        print(f"gateway tracebacks: {len(gw.tracebacks())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--attackers", type=int, default=2)
    parser.add_argument("--attack", choices=("push", "plain", "instances"), default="push")
    parser.add_argument("--max-instances", type=int, default=200_000)
    parser.add_argument("--nice", type=int, default=0, help="instances: priority (root)")
    parser.add_argument(
        "--rate", type=float, default=100.0, help="plain: logins/s the flood offers (0: no limit)"
    )
    args = parser.parse_args()
    if args.attack == "plain":
        plain_flood(args.seconds, max(args.attackers, 4), args.rate)
        return
    if args.attack == "instances":
        instance_flood(args.seconds, args.attackers, args.max_instances, args.nice)
        return
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(Path(tmp) / "data").start()
        try:
            alone = clean_rate(gw.port, args.seconds)
            print(f"clean client alone: {alone:8.1f} requests/s")
            for name, codec, payload in attacks(1 << 20):
                stop = threading.Event()
                codes: collections.Counter[int] = collections.Counter()
                threads = [
                    threading.Thread(
                        target=attacker, args=(gw.port, codec, payload, stop, codes), daemon=True
                    )
                    for _ in range(args.attackers)
                ]
                for t in threads:
                    t.start()
                time.sleep(0.5)
                started = sum(codes.values())
                rate = clean_rate(gw.port, args.seconds)
                pushes = (sum(codes.values()) - started) / args.seconds
                stop.set()
                for t in threads:
                    t.join(60)
                print(
                    f"{args.attackers} x {name:32s} ({len(payload) // 1024:5d} KiB): clean "
                    f"{rate:8.1f} requests/s ({rate / alone:6.1%}); attacker pushes "
                    f"{pushes:6.1f}/s, answers {dict(codes)}"
                )
        finally:
            gw.stop()
        print(f"gateway tracebacks: {len(gw.tracebacks())}")


if __name__ == "__main__":
    main()
