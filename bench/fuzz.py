"""Fuzz a running gateway with mutated frames built from real captures.

Seed frames: the golden ApiVersions v3 and GetTelemetrySubscriptions frames
captured from librdkafka (tests/wire/test_golden.py), PushTelemetry v0 and v1
carrying the captured librdkafka zstd payload (tests/data), and the admin and
cluster requests real clients send (Metadata, DescribeConfigs, (Incremental)
AlterConfigs, ListConfigResources), each in the versions clients use. Every
frame is mutated (bit flips, interesting integers, truncation, extension,
splices, chunk duplication), its size prefix kept honest, and sent on one of
many connections; the gateway must answer it or close the connection. Prints
frames/s, crashes, hung connections (no answer and no close within the
timeout), RSS before and after, and tracebacks/logged handler failures. Usage:

    python bench/fuzz.py --frames 1000000 --connections 64
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import uvloop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ports import free_port, stop_process, wait_port  # noqa: E402
from tests.wire.test_golden import APIVERSIONS_V3, GET_SUBSCRIPTIONS_V0  # noqa: E402

from clientmetrics.wire import RequestHeader, encode_request, request_type  # noqa: E402
from clientmetrics.wire.build import build  # noqa: E402

DATA = ROOT / "tests" / "data" / "librdkafka-2.16"
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFF, 0x8000)


def seeds() -> list[bytes]:
    """Whole frames (size prefix included) as real clients send them."""
    zstd = (DATA / "consumer-push.otlp.zstd").read_bytes()
    instance = uuid.UUID("5a3f0e2c-1111-4222-8333-944455556666")
    resource = {
        "resource_type": 16,
        "resource_name": "fuzz",
        "configs": [{"name": "metrics", "config_operation": 2, "value": "org.apache.kafka."}],
        "configuration_keys": None,
    }

    def frame(key: int, version: int, values: dict[str, object], header_version: int = 2) -> bytes:
        body = build(request_type(key, version), values)
        client_instance = instance if header_version == 3 else None
        header = RequestHeader(key, version, 7, "rdkafka", client_instance, header_version)
        return encode_request(header, body)

    metadata = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    describe = {"resources": [resource], "include_synonyms": False, "include_documentation": False}
    push = {
        "client_instance_id": instance,
        "subscription_id": 12345,
        "terminating": False,
        "compression_type": 4,
        "metrics": zstd,
    }
    return [
        APIVERSIONS_V3,
        GET_SUBSCRIPTIONS_V0,
        frame(72, 0, push),
        frame(72, 1, {k: v for k, v in push.items() if k != "client_instance_id"}, 3),
        frame(71, 1, {}, 3),
        frame(3, 12, metadata),
        frame(32, 4, describe),
        frame(44, 1, {"resources": [resource], "validate_only": False}),
        frame(74, 0, {}),
    ]


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    base = rng.choice(seeds)
    body = bytearray(base[4:])
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        # Mostly leave the api key and version alone so decoders, not routing, get hit.
        low = 4 if rng.random() < 0.85 and len(body) > 4 else 0
        if len(body) <= low:
            body += rng.randbytes(rng.randint(1, 16))
            continue
        at = rng.randrange(low, len(body))
        kind = rng.randrange(7)
        if kind == 0:
            body[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            width = rng.choice((1, 2, 4))
            value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
            body[at : at + width] = value.to_bytes(width, "big")
        elif kind == 2:
            del body[at:]
        elif kind == 3:
            body[at:at] = rng.randbytes(rng.randint(1, 64))
        elif kind == 4:
            other = rng.choice(seeds)[4:]
            cut = rng.randrange(len(other))
            body[at:] = other[cut:]
        elif kind == 5:
            end = min(len(body), at + rng.randint(1, 32))
            body[at:at] = body[at:end]
        else:
            body[at] = rng.randrange(256)
    return struct.pack(">i", len(body)) + bytes(body)


class Tally:
    def __init__(self) -> None:
        self.frames = 0
        self.answered = 0
        self.closed = 0
        self.hung = 0
        self.refused = 0


async def worker(port: int, rng: random.Random, seeds: list[bytes], quota: int, tally: Tally,
                 timeout: float) -> None:  # fmt: skip
    reader = writer = None
    while quota > 0:
        if writer is None:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                tally.refused += 1
                await asyncio.sleep(0.05)
                continue
        assert reader is not None
        frame = mutate(rng, seeds)
        quota -= 1
        tally.frames += 1
        try:
            writer.write(frame)
            async with asyncio.timeout(timeout):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(size)
            tally.answered += 1
            continue
        except TimeoutError:
            tally.hung += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            tally.closed += 1
        writer.close()
        reader = writer = None
    if writer is not None:
        writer.close()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run(port: int, frames: int, connections: int, seed: int, timeout: float) -> Tally:
    tally = Tally()
    base = seeds()
    share = frames // connections
    quotas = [share + (1 if i < frames % connections else 0) for i in range(connections)]
    await asyncio.gather(
        *(worker(port, random.Random(seed * 1000 + i), base, q, tally, timeout)
          for i, q in enumerate(quotas))
    )  # fmt: skip
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--seed", type=int, default=714)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before 'hung'")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        errors = Path(tmp) / "gateway.log"
        # Errors only: every bad frame is a warning, and a million log lines would
        # measure the logger. Tracebacks and handler failures are errors.
        with errors.open("wb") as log_file:
            gateway = subprocess.Popen(
                [str(Path(sys.executable).parent / "clientmetrics"), "serve",
                 "--listen", f"127.0.0.1:{port}", "--data-dir", str(Path(tmp) / "data"),
                 "--log-level", "error"],
                stdout=subprocess.DEVNULL, stderr=log_file,
            )  # fmt: skip
        try:
            wait_port(port)
            uvloop.run(run(port, 2000, 8, args.seed + 1, args.timeout))  # warm up
            before = rss_mib(gateway.pid)
            started = time.perf_counter()
            tally = uvloop.run(run(port, args.frames, args.connections, args.seed, args.timeout))
            elapsed = time.perf_counter() - started
            crashed = gateway.poll() is not None
            after = rss_mib(gateway.pid) if not crashed else float("nan")
        finally:
            code = stop_process(gateway, 30)
        text = errors.read_text(errors="replace")
        tracebacks = text.count("Traceback")
        handler_failed = text.count('"handler_failed"')
        print(f"frames:            {tally.frames:,} over {args.connections} connections "
              f"(seed {args.seed})")  # fmt: skip
        print(f"rate:              {tally.frames / elapsed:,.0f} frames/s ({elapsed:.0f} s)")
        print(f"answered / closed: {tally.answered:,} / {tally.closed:,}")
        print(f"crashes:           {int(crashed)} (exit code after SIGTERM: {code})")
        print(f"hung connections:  {tally.hung}")
        print(f"RSS:               {before:.1f} MiB before, {after:.1f} MiB after "
              f"({after - before:+.1f} MiB)")  # fmt: skip
        print(f"tracebacks:        {tracebacks} ({handler_failed} handler_failed events)")


if __name__ == "__main__":
    main()
