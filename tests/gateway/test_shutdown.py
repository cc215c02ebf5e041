"""Shutdown answers what is in flight: a push awaiting its durable write still gets its answer."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import answer_frame, read_frame
from tests.landed import landed_rows
from tests.procs import BIN, MIN_DEADLINE_S, free_port, wait_for


class GatedExporter:
    """Holds every export until ``release`` is set: a slow disk."""

    name = "gated"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.pushes: list[AcceptedPush] = []

    async def start(self) -> None:
        return None

    async def export(self, push: AcceptedPush) -> None:
        self.entered.set()
        await self.release.wait()
        self.pushes.append(push)

    async def flush(self, timeout_s: float) -> None:
        return None

    async def close(self, timeout_s: float) -> None:
        return None


async def test_push_in_flight_at_shutdown_is_answered(tmp_path: Path) -> None:
    exporter = GatedExporter()
    config = GatewayConfig(data_dir=tmp_path, listeners=(Listener.parse("127.0.0.1:0"),))
    gateway = Gateway(config, store=MemorySubscriptionStore(), exporters=[exporter])
    await gateway.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    writer.write(encode_request(RequestHeader(71, 0, 1, "slow"), get))
    _, subscription = decode_response(71, 0, await read_frame(reader))
    push = request_type(72, 0)(
        client_instance_id=subscription.client_instance_id,
        subscription_id=subscription.subscription_id,
        terminating=False,
        compression_type=0,
        metrics=b"",
    )
    writer.write(encode_request(RequestHeader(72, 0, 2, "slow"), push))
    await asyncio.wait_for(exporter.entered.wait(), MIN_DEADLINE_S)

    closing = asyncio.create_task(gateway.close())
    await asyncio.sleep(0.2)
    assert not closing.done()  # waiting for the push, not cutting it off
    exporter.release.set()
    correlation, answer = decode_response(72, 0, await answer_frame(reader))
    await asyncio.wait_for(closing, MIN_DEADLINE_S)
    assert (correlation, int(answer.error_code)) == (2, 0)
    assert len(exporter.pushes) == 1
    assert await reader.read() == b""  # and then the connection is closed
    writer.close()


def test_ctrl_c_stops_the_gateway_and_its_exporter_process_quietly(tmp_path: Path) -> None:
    # A terminal's Ctrl-C is SIGINT to the whole process group, child processes included.
    (tmp_path / "gateway.toml").write_text(
        f'[exporters.prometheus]\nlisten = "127.0.0.1:{free_port()}"\n'
    )
    proc = subprocess.Popen(
        [str(BIN / "clientmetrics"), "serve", "--listen", "127.0.0.1:0", "--data-dir",
         str(tmp_path / "data"), "--config", str(tmp_path / "gateway.toml"),
         "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if '"gateway_started"' in line:
            break
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, rest = proc.communicate(timeout=MIN_DEADLINE_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0
    events = [json.loads(line).get("event") for line in [*lines, *rest.splitlines()]]
    assert "exporter_process_started" in events
    assert events[-1] == "gateway_stopped", rest


def test_ctrl_c_with_clients_pushing_stops_and_lands_every_acknowledged_push(
    tmp_path: Path,
) -> None:
    """Ctrl-C with 100 clients pushing: serve exits, having converted what it sealed.

    A minute's segments (``roll_seconds = 60``) are still open at Ctrl-C, so the close
    has a real conversion to do. The niced converter child did it behind a busy
    machine's work (4.7-6.1 s with two busy loops; ~10 s, the shutdown timeout, at
    load 13-18) and a flush that outlived the timeout left WAL segments behind. The
    close converts on the gateway's own thread instead (1.6-2.3 s, same machine).
    No time limit is asserted: a flush that outlives the shutdown timeout shows as
    ``exporter_close_failed`` and WAL segments left over.
    """
    data = tmp_path / "data"
    (tmp_path / "gateway.toml").write_text("[exporters.landing]\nroll_seconds = 60\n")
    port = free_port()
    gateway = subprocess.Popen(
        [str(BIN / "clientmetrics"), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
         str(data), "--config", str(tmp_path / "gateway.toml"), "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert gateway.stderr is not None
    lines = []
    for line in gateway.stderr:
        lines.append(line)
        if '"gateway_started"' in line:
            break
    simulator = subprocess.Popen(
        [str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", f"127.0.0.1:{port}",
         "--clients", "100", "--interval-ms", "500", "--duration", "120", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        # Pushes written: wait for the open segment to hold a few hundred of them.
        wal = data / "landing" / ".wal"
        wait_for(
            lambda: sum(p.stat().st_size for p in wal.rglob("*") if p.is_file()) > 200_000,
            60,
            what="a few hundred pushes in the open segment",
        )
        os.killpg(gateway.pid, signal.SIGINT)
        _, rest = gateway.communicate(timeout=MIN_DEADLINE_S)
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
    out, _ = simulator.communicate(timeout=MIN_DEADLINE_S)
    assert gateway.returncode == 0
    events = [json.loads(line).get("event") for line in [*lines, *rest.splitlines()]]
    assert "exporter_close_failed" not in events, rest
    assert events[-1] == "gateway_stopped", rest
    assert not [p for p in wal.rglob("*") if p.is_file()], "WAL segments left unconverted"
    acknowledged = json.loads(out)["pushes"]
    assert acknowledged > 100
    # Every push the clients were answered for is in a Parquet file, once each (at
    # most one more per client: answered while its client was closing).
    landed = landed_rows(data)
    assert acknowledged <= len(landed) <= acknowledged + 100
    assert len({(r["client_instance_id"], r["received_at"]) for r in landed}) == len(landed)
