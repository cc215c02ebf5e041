"""Shutdown answers what is in flight: a push awaiting its durable write still gets its answer."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import read_frame
from tests.landed import landed_rows
from tests.procs import BIN, free_port, wait_for


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
    await asyncio.wait_for(exporter.entered.wait(), 5)

    closing = asyncio.create_task(gateway.close())
    await asyncio.sleep(0.2)
    assert not closing.done()  # waiting for the push, not cutting it off
    exporter.release.set()
    correlation, answer = decode_response(72, 0, await asyncio.wait_for(read_frame(reader), 5))
    await asyncio.wait_for(closing, 10)
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
        _, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0
    events = [json.loads(line).get("event") for line in [*lines, *rest.splitlines()]]
    assert "exporter_process_started" in events
    assert events[-1] == "gateway_stopped", rest


#: Ctrl-C's bound with 100 clients pushing: measured 1.2-3.3 s for `serve` at load 9-17
#: on two cores (most of it the landing exporter converting its last segments). The
#: issue saw ~10 s; 8 s leaves a busy machine room and still catches a close that
#: waits out the 10 s shutdown timeout.
CTRL_C_BOUND_S = 8.0


def test_ctrl_c_with_clients_pushing_stops_promptly_and_lands_every_acknowledged_push(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    port = free_port()
    gateway = subprocess.Popen(
        [str(BIN / "clientmetrics"), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
         str(data), "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert gateway.stderr is not None
    for line in gateway.stderr:
        if '"gateway_started"' in line:
            break
    simulator = subprocess.Popen(
        [str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", f"127.0.0.1:{port}",
         "--clients", "100", "--interval-ms", "500", "--duration", "120", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        # Pushes landing: wait for the first Parquet file (segments roll and convert).
        pushes = data / "landing" / "pushes"
        wait_for(lambda: any(pushes.rglob("*.parquet")), 60, what="a landed file")
        started = time.monotonic()
        os.killpg(gateway.pid, signal.SIGINT)
        gateway.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
    out, _ = simulator.communicate(timeout=60)
    assert gateway.returncode == 0
    assert took < CTRL_C_BOUND_S, f"Ctrl-C took {took:.1f} s"
    acknowledged = json.loads(out)["pushes"]
    assert acknowledged > 100
    # Every push the clients were answered for is in a Parquet file (no WAL left over),
    # once each (at most one more per client: answered while its client was closing).
    landed = landed_rows(data)
    assert acknowledged <= len(landed) <= acknowledged + 100
    assert len({(r["client_instance_id"], r["received_at"]) for r in landed}) == len(landed)
