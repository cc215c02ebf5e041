"""Run by the crash tests: export pushes, print each acknowledged index, never close.

Usage: python crash_writer.py DATA_DIR COUNT ROLL_BYTES
The parent kills this process with SIGKILL part-way through.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from clientmetrics.exporters import LandingExporter, LandingOptions
from clientmetrics.telemetry.model import AcceptedPush


def _push(i: int) -> AcceptedPush:
    return AcceptedPush(
        received_at_ms=1_772_362_000_000 + i,
        client_instance_id=uuid.UUID(int=i + 1),
        subscription_id=1,
        terminating=False,
        client_id=f"c{i}",
        client_software_name="librdkafka",
        client_software_version="2.16.0",
        client_source_address="192.0.2.1",
        client_source_port=1234,
        principal="User:ANONYMOUS",
        node_id=0,
        listener="PLAINTEXT",
        security_protocol="PLAINTEXT",
        compression_type=0,
        push_interval_ms=1000,
        payload=b"x" * 300,
    )


async def _main(data_dir: Path, count: int, roll_bytes: int) -> None:
    exporter = LandingExporter(data_dir, LandingOptions(roll_bytes=roll_bytes, roll_seconds=60))
    await exporter.start()
    sys.stdout.write("started\n")
    sys.stdout.flush()

    async def one(i: int) -> None:
        await asyncio.sleep(i * 0.0005)
        await exporter.export(_push(i))
        sys.stdout.write(f"{i}\n")
        sys.stdout.flush()

    await asyncio.gather(*(one(i) for i in range(count)))
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
