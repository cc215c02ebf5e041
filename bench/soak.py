"""Soak: simulated clients push through SIGKILLs and a full disk; nothing may be lost.

A gateway (``--workers 2``) serves simulated KIP-714 clients that Get and Push on
their interval, each push carrying a unique id inside its OTLP payload. Every
``--kill-every`` seconds the gateway is SIGKILLed (supervisor and, with it, its
workers) and started again on the same port and data directory. Once, the
landing zone's filesystem (a small tmpfs we mount) is filled for
``--full-for`` seconds and then freed. At the end the gateway stops cleanly and
the landed Parquet rows are read back. Prints acknowledged vs landed vs
duplicated (aim: 0 lost, 0 duplicated); landed-but-unacknowledged pushes (sent
before a kill, answer lost) are counted apart. Usage:

    python bench/soak.py --seconds 1800 --kill-every 180 --clients 50
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import uvloop
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ports import free_port, stop_process, wait_port  # noqa: E402
from tests.landed import landed_rows  # noqa: E402

from clientmetrics.admin.api import AsyncAdmin  # noqa: E402
from clientmetrics.admin.properties import AdminConfig  # noqa: E402
from clientmetrics.wire import (  # noqa: E402
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)

GOLDEN = (ROOT / "tests" / "data" / "librdkafka-2.16" / "consumer-push.otlp.bin").read_bytes()
MARK = "soak.push"
INTERVAL_MS = 1000


def payload(push_id: str) -> bytes:
    """The golden librdkafka payload plus one resource attribute naming this push."""
    data = MetricsData()
    data.ParseFromString(GOLDEN)
    attribute = data.resource_metrics[0].resource.attributes.add()
    attribute.key = MARK
    attribute.value.string_value = push_id
    return data.SerializeToString()


def push_id_of(otlp: bytes) -> str:
    data = MetricsData()
    data.ParseFromString(otlp)
    for attribute in data.resource_metrics[0].resource.attributes:
        if attribute.key == MARK:
            return attribute.value.string_value
    return ""


class Ledger:
    def __init__(self) -> None:
        self.acked: set[str] = set()
        self.codes: collections.Counter[int] = collections.Counter()
        self.disconnects = 0


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes,
                   key: int, version: int) -> object:  # fmt: skip
    writer.write(frame)
    async with asyncio.timeout(15):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        _, body = decode_response(key, version, await reader.readexactly(size))
    return body


async def client(index: int, port: int, ledger: Ledger, stop: asyncio.Event) -> None:
    name = f"soak-{index}"
    instance = uuid.UUID(int=0)
    seq = 0
    rng = random.Random(index)
    while not stop.is_set():
        writer = None
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            get = request_type(71, 0)(client_instance_id=instance)
            sub: object = await exchange(
                reader, writer, encode_request(RequestHeader(71, 0, 1, name), get), 71, 0
            )
            code = int(sub.error_code)  # type: ignore[attr-defined]
            ledger.codes[code] += 1
            if code:
                await asyncio.sleep(INTERVAL_MS / 1000)
                continue
            instance = sub.client_instance_id  # type: ignore[attr-defined]
            interval = sub.push_interval.total_seconds()  # type: ignore[attr-defined]
            while not stop.is_set():
                push_id = f"{index}-{seq}"
                seq += 1
                body = request_type(72, 0)(
                    client_instance_id=instance,
                    subscription_id=sub.subscription_id,  # type: ignore[attr-defined]
                    terminating=False,
                    compression_type=0,
                    metrics=payload(push_id),
                )
                answer = await exchange(
                    reader, writer, encode_request(RequestHeader(72, 0, 2, name), body), 72, 0
                )
                code = int(answer.error_code)  # type: ignore[attr-defined]
                ledger.codes[code] += 1
                if code == 0:
                    ledger.acked.add(push_id)
                await asyncio.sleep(interval * (1 + rng.random() * 0.05))
                if code:
                    break  # Get again, as a client does after an error
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            ledger.disconnects += 1
            await asyncio.sleep(0.2 + rng.random() * 0.3)
        finally:
            if writer is not None:
                writer.close()


class Gateway:
    def __init__(self, data: Path, port: int, log: Path) -> None:
        self.data, self.port, self.log = data, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = str(Path(sys.executable).parent / "clientmetrics")
        with self.log.open("ab") as out:
            args = [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--workers", "2"]
            args += ["--data-dir", str(self.data), "--config", str(self.data / "gw.toml")]
            args += ["--log-level", "warning"]
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=out)
        wait_port(self.port, 60)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        return stop_process(self.proc, 60)


def mount_small_disk(landing: Path, size_mb: int) -> bool:
    landing.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(landing)],
                          capture_output=True, check=False)  # fmt: skip
    return done.returncode == 0


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


async def soak(args: argparse.Namespace, gateway: Gateway, landing: Path, can_fill: bool) -> Ledger:
    ledger = Ledger()
    stop = asyncio.Event()
    async with AsyncAdmin(AdminConfig(bootstrap_servers=(("127.0.0.1", gateway.port),))) as admin:
        await admin.alter("soak", {"metrics": "org.apache.kafka.", "interval.ms": str(INTERVAL_MS)})
    tasks = [
        asyncio.create_task(client(i, gateway.port, ledger, stop)) for i in range(args.clients)
    ]
    started = time.monotonic()
    next_kill = started + args.kill_every
    full_at = started + args.seconds / 2 if can_fill else float("inf")
    kills = 0
    while time.monotonic() - started < args.seconds:
        await asyncio.sleep(0.5)
        now = time.monotonic()
        if now >= next_kill:
            gateway.kill()
            kills += 1
            await asyncio.to_thread(gateway.start)
            acked = len(ledger.acked)
            print(f"[{now - started:6.0f} s] SIGKILL #{kills}, restarted; acked so far {acked:,}")
            next_kill = now + args.kill_every
        if now >= full_at:
            filler = await asyncio.to_thread(fill, landing)
            print(f"[{now - started:6.0f} s] landing disk full for {args.full_for} s")
            await asyncio.sleep(args.full_for)
            filler.unlink()
            print(f"[{time.monotonic() - started:6.0f} s] landing disk freed")
            full_at = float("inf")
    stop.set()
    await asyncio.gather(*tasks)
    ledger.kills = kills  # type: ignore[attr-defined]
    return ledger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--kill-every", type=float, default=180)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--full-for", type=float, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        landing = data / "landing"
        can_fill = mount_small_disk(landing, 128)
        if not can_fill:
            print("disk-full episode: skipped (cannot mount a tmpfs here)")
        try:
            (data / "gw.toml").write_text("[exporters.landing]\nroll_seconds = 1.0\n")
            gateway = Gateway(data, free_port(), Path(tmp) / "gateway.log")
            gateway.start()
            try:
                ledger = uvloop.run(soak(args, gateway, landing, can_fill))
            finally:
                code = gateway.stop()
            # A last clean start and stop recovers whatever a kill left in the WAL.
            gateway.start()
            gateway.stop()
            ids = [push_id_of(bytes(row["payload"])) for row in landed_rows(data)]  # type: ignore[arg-type]
            landed = collections.Counter(ids)
            acked = ledger.acked
            lost = acked - landed.keys()
            duplicated = sum(n - 1 for n in landed.values() if n > 1)
            log_text = (Path(tmp) / "gateway.log").read_text(errors="replace")
            print(f"run:          {args.seconds:.0f} s, {args.clients} clients, "
                  f"{ledger.kills} SIGKILLs, disk-full episode: {'yes' if can_fill else 'no'}")  # type: ignore[attr-defined]  # fmt: skip
            print(f"acknowledged: {len(acked):,}")
            print(f"landed:       {len(landed):,} distinct pushes ({len(ids):,} rows)")
            print(f"lost:         {len(lost):,}")
            print(f"duplicated:   {duplicated:,}")
            print(f"landed, answer lost (not acknowledged): {len(landed.keys() - acked):,}")
            codes = dict(sorted(ledger.codes.items()))
            print(f"answers:      {codes}; reconnects {ledger.disconnects:,}")
            tracebacks = log_text.count("Traceback")
            print(f"clean stop:   exit {code}; tracebacks in gateway log: {tracebacks}")
        finally:
            if can_fill:
                subprocess.run(["umount", "-l", str(landing)], check=False)


if __name__ == "__main__":
    main()
