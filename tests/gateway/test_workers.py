"""Several worker processes sharing one port behave as one gateway."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from peers.free_ports import free_port_block

from clientmetrics.gateway.workers import GIVE_UP_AFTER, HEALTHY_AFTER_S, START_FAILED, Supervisor
from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import get_then_push, recv_frame
from tests.kadmin import set_subscription
from tests.procs import MIN_DEADLINE_S, GatewayProcess, free_port, wait_for

pytestmark = pytest.mark.integration


def fresh_get(port: int) -> tuple[str, ...]:
    """RequestedMetrics seen by a brand-new client on a new connection."""
    get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "w"), get))
        _, body = decode_response(71, 0, recv_frame(sock))
    return tuple(body.requested_metrics)


def test_two_workers_share_subscriptions_and_serve_metrics(tmp_path: Path) -> None:
    port = free_port()
    admin = free_port_block(2)
    gw = GatewayProcess(
        tmp_path / "data",
        port=port,
        extra_args=("--workers", "2", "--admin-listen", f"127.0.0.1:{admin}"),
    )
    gw.start()
    try:
        wait_for(lambda: len(gw.events("gateway_started")) == 2, 30, what="both workers")
        assert {fresh_get(port) for _ in range(20)} == {()}
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        # Connections land on either worker; within the store's poll interval all agree.
        wait_for(
            lambda: {fresh_get(port) for _ in range(20)} == {("org.apache.kafka.",)},
            10,
            what="every worker to serve the new subscription",
        )
        for metrics_port in (admin, admin + 1):
            body = urllib.request.urlopen(
                f"http://127.0.0.1:{metrics_port}/metrics", timeout=MIN_DEADLINE_S
            )
            assert b"kafka_server_client_metrics_instance_count" in body.read()
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc), zombies excluded."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


def is_worker(pid: int) -> bool:
    """A spawned gateway worker (not multiprocessing's resource tracker)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"spawn_main" in cmdline and b"resource_tracker" not in cmdline


def workers_of(gw: GatewayProcess) -> set[int]:
    assert gw.proc is not None
    children = Path(f"/proc/{gw.proc.pid}/task/{gw.proc.pid}/children").read_text().split()
    return {int(p) for p in children if is_worker(int(p))}


def test_a_killed_worker_is_replaced_and_the_supervisor_exits_0(tmp_path: Path) -> None:
    port = free_port()
    gw = GatewayProcess(tmp_path / "data", port=port, extra_args=("--workers", "2"))
    gw.start()
    try:
        wait_for(lambda: len(gw.events("gateway_started")) == 2, 30, what="both workers")
        first = workers_of(gw)
        assert len(first) == 2
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(gw.events("gateway_started")) == 3, 30, what="a replacement")
        now = workers_of(gw)
        assert len(now) == 2
        assert victim not in now
        assert gw.events("worker_died")[0]["exit_code"] == -signal.SIGKILL
        assert {fresh_get(port) for _ in range(10)} == {()}, "both serve"
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []


def serve_args(data: Path, port: int, *extra: str) -> list[str]:
    binary = str(Path(sys.executable).parent / "clientmetrics")
    return [binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data), *extra]


def test_a_worker_that_cannot_start_makes_the_supervisor_exit_non_zero(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "subscriptions.db").mkdir(parents=True)  # SQLite cannot open a directory
    args = serve_args(data, free_port(), "--workers", "2")
    # A deadline, not a measure: four starts of a worker on a loaded machine.
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    (gave_up,) = [json.loads(line) for line in done.stderr.splitlines() if "worker_gave_up" in line]
    assert gave_up["exit_codes"] == [START_FAILED] * (GIVE_UP_AFTER + 1)
    assert "Traceback" not in done.stderr


class _Dead:
    """A worker process that has exited with ``exitcode``."""

    def __init__(self, exitcode: int) -> None:
        self.exitcode = exitcode

    def is_alive(self) -> bool:
        return False

    def join(self) -> None:
        return None


def test_a_start_that_fails_slowly_is_still_a_failed_start() -> None:
    """On a loaded machine a worker may take longer than HEALTHY_AFTER_S to fail its start:
    its exit status says so, and the supervisor still gives up; a worker that ran that
    long and then died of something else is restarted without penalty."""
    supervisor = Supervisor(1, "unused:unused", lambda index: ())
    (slot,) = supervisor._slots
    slot.early_deaths = GIVE_UP_AFTER
    slot.process, slot.started_at = _Dead(START_FAILED), time.monotonic() - 2 * HEALTHY_AFTER_S
    assert supervisor._tend(slot) is False
    slot.early_deaths = GIVE_UP_AFTER
    slot.process, slot.started_at = _Dead(1), time.monotonic() - 2 * HEALTHY_AFTER_S
    slot.restart_at = None
    supervisor._start = lambda slot: None  # type: ignore[method-assign]
    assert supervisor._tend(slot) is True
    assert slot.early_deaths == 1


def test_no_child_outlives_a_supervisor_killed_during_start(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        serve_args(tmp_path / "data", free_port(), "--workers", "2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: sum(map(is_worker, descendants(proc.pid))) == 2, 10, 0.02, what="workers")
        time.sleep(0.1)  # the workers are importing, not yet serving
        below = descendants(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not alive(below), 3, what="children to die with it")


def test_no_child_outlives_a_killed_supervisor_with_converters(tmp_path: Path) -> None:
    gw = GatewayProcess(
        tmp_path / "data",
        config_text="[exporters.landing]\nroll_seconds = 0.2\n",
        port=free_port(),
        extra_args=("--workers", "2"),
    )
    gw.start()
    try:
        wait_for(lambda: len(gw.events("gateway_started")) == 2, 30, what="both workers")
        assert gw.proc is not None
        pid = gw.proc.pid
        for _ in range(8):  # pushes through both workers: each starts its converter child
            assert get_then_push(gw.port, "w") == 0
        wait_for(lambda: sum(map(is_worker, descendants(pid))) >= 4, 30, what="converter children")
        below = descendants(pid)
    finally:
        gw.kill()
    wait_for(lambda: not alive(below), 3, what="children to die with it")
