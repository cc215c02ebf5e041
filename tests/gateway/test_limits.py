"""Connection limits against a real `clientmetrics serve` process, over raw sockets."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.config_load import load_config
from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import recv_frame
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for

MiB = 1024 * 1024


def api_versions_frame(correlation_id: int = 1) -> bytes:
    header = RequestHeader(18, 3, correlation_id, "clean", None, 2)
    body = request_type(18, 3)(client_software_name="probe", client_software_version="1")
    return encode_request(header, body)


def served(port: int) -> bool:
    """A clean client gets its ApiVersions answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(api_versions_frame(7))
        correlation, body = decode_response(18, 3, recv_frame(sock))
        return correlation == 7 and int(body.error_code) == 0 and len(body.api_keys) > 0


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def gateway(tmp_path: Path, config: str) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", config).start()
    try:
        yield gw
    finally:
        assert gw.stop() == 0
        assert gw.tracebacks() == []


@pytest.mark.integration
def test_parked_partial_frames_do_not_grow_memory_past_the_budget(tmp_path: Path) -> None:
    # The worst case: requests as large as Kafka allows, 20 clients each parking one.
    config = "[gateway]\nmax_request_bytes = 104857600\n"
    with gateway(tmp_path, config) as gw:
        assert gw.proc is not None
        assert served(gw.port)
        before = rss_bytes(gw.proc.pid)
        frame_size = 99 * MiB
        per_client = 32 * MiB  # 20 x 32 MiB = 640 MiB if every byte were buffered
        head = struct.pack(">i", frame_size) + api_versions_frame()[4:16]
        socks = [socket.create_connection(("127.0.0.1", gw.port)) for _ in range(20)]
        sent = dict.fromkeys(range(20), 0)
        chunk = b"\x00" * MiB
        for sock in socks:
            sock.sendall(head)
            sock.setblocking(False)
        deadline = time.monotonic() + MIN_DEADLINE_S
        stalled = 0  # rounds in a row in which no socket took a byte
        # Until the two connections the budget admits have sent all they will (the
        # gateway read them) and the paused ones' socket buffers are full.
        while time.monotonic() < deadline and any(n < per_client for n in sent.values()):
            progress = False
            for index, sock in enumerate(socks):
                if sent[index] >= per_client:
                    continue
                with contextlib.suppress(BlockingIOError):
                    sent[index] += sock.send(chunk)
                    progress = True
            done = sum(n >= per_client for n in sent.values())
            stalled = 0 if progress else stalled + 1
            if done >= 2 and stalled >= 20:
                break
            if not progress:
                time.sleep(0.05)
        growth = rss_bytes(gw.proc.pid) - before
        print(f"sent {sum(sent.values()) / MiB:.0f} MiB; RSS growth {growth / MiB:.0f} MiB")
        assert growth < 512 * MiB
        # Two 99 MiB requests fit the default 256 MiB budget; the other 18 wait.
        assert gw.metric("request_budget_used_bytes") == 2 * frame_size
        # Connections over budget were paused, not refused: fewer bytes got in than sent.
        assert sum(sent.values()) < 20 * per_client
        assert served(gw.port)
        for sock in socks:
            sock.close()


def test_the_standalone_default_closes_a_request_above_telemetry_size(tmp_path: Path) -> None:
    with gateway(tmp_path, "") as gw:
        with socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S) as sock:
            sock.sendall(struct.pack(">i", 3 * MiB) + b"\x00" * 1000)
            assert closed_by_peer(sock, 5)
        wait_for(lambda: gw.events("connection_closed_on_protocol_error"), 5, what="log line")
        (line,) = gw.events("connection_closed_on_protocol_error")
        assert line["reason"] == "frame_too_large"
        assert served(gw.port)


def test_idle_and_slowloris_connections_are_closed(tmp_path: Path) -> None:
    config = "[gateway]\nconnections_max_idle_ms = 1500\nexpiry_check_ms = 200\n"
    with gateway(tmp_path, config) as gw:
        idle = socket.create_connection(("127.0.0.1", gw.port))
        slow = socket.create_connection(("127.0.0.1", gw.port))
        busy = socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
        started = time.monotonic()
        slow.sendall(struct.pack(">i", 1000))
        closed_at: dict[str, float] = {}
        correlation = 0
        while time.monotonic() - started < 4 and len(closed_at) < 2:
            for name, sock in (("idle", idle), ("slow", slow)):
                if name not in closed_at and closed_by_peer(sock, 0.01):
                    closed_at[name] = time.monotonic() - started
            with contextlib.suppress(OSError):
                slow.send(b"\x00")  # one byte at a time: never a whole request
            correlation += 1
            busy.sendall(api_versions_frame(correlation))  # a live client stays
            assert decode_response(18, 3, recv_frame(busy))[0] == correlation
            time.sleep(0.2)
        assert set(closed_at) == {"idle", "slow"}
        assert all(1.4 <= t <= 3.0 for t in closed_at.values()), closed_at
        reasons = [e["reason"] for e in gw.events("connection_closed")]
        assert reasons.count("idle") == 2
        busy.close()


def test_connections_over_the_per_address_cap_are_refused_with_a_log_line(
    tmp_path: Path,
) -> None:
    with gateway(tmp_path, "[gateway]\nmax_connections_per_ip = 3\n") as gw:
        socks = [
            socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
            for _ in range(3)
        ]
        for index, sock in enumerate(socks):
            sock.sendall(api_versions_frame(index))
            assert decode_response(18, 3, recv_frame(sock))[0] == index
        extra = socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
        with contextlib.suppress(ConnectionError):
            extra.sendall(api_versions_frame(9))
        assert closed_by_peer(extra, 5)
        wait_for(lambda: gw.events("connection_refused"), 5, what="refusal log line")
        (line,) = gw.events("connection_refused")
        assert line["reason"] == "max_connections_per_ip"
        assert line["limit"] == 3
        socks.pop().close()
        wait_for(lambda: served_quietly(gw.port), 5, what="a slot freed by a close")
        for sock in socks:
            sock.close()


def test_new_connections_over_the_per_address_rate_are_held_unread_then_closed(
    tmp_path: Path,
) -> None:
    """Kafka's per-IP connection creation quota: one over it gets no answer, is closed
    within a second, and the address's open connections are served meanwhile."""
    with gateway(tmp_path, "[gateway]\nconnection_creation_rate_per_ip = 2\n") as gw:
        clean = socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
        second = socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
        flooding = [
            socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
            for _ in range(3)
        ]
        for index, sock in enumerate(flooding):
            sock.sendall(api_versions_frame(index))
        for sock in flooding:  # not one answered: closed unread (a reset, or EOF)
            sock.settimeout(MIN_DEADLINE_S)
            with contextlib.suppress(ConnectionError):
                assert sock.recv(65536) == b""
            sock.close()
        for index, sock in enumerate((clean, second, clean)):
            sock.sendall(api_versions_frame(10 + index))
            assert decode_response(18, 3, recv_frame(sock))[0] == 10 + index
        # Another address has a rate of its own.
        other = socket.create_connection(("127.0.0.1", gw.port), MIN_DEADLINE_S, ("127.0.0.2", 0))
        other.sendall(api_versions_frame(20))
        assert decode_response(18, 3, recv_frame(other))[0] == 20
        wait_for(lambda: gw.events("connection_throttled"), 5, what="throttle log line")
        line = gw.events("connection_throttled")[0]
        assert (line["reason"], line["limit"], line["peer"]) == (
            "connection_creation_rate_per_ip",
            2,
            "127.0.0.1",
        )
        assert 0 < int(str(line["close_in_ms"])) <= 1000
        assert gw.metric("connections_throttled_total") >= 3
        wait_for(lambda: served_quietly(gw.port), 5, what="a connection once a token is due")
        for sock in (clean, second, other):
            sock.close()


def served_quietly(port: int) -> bool:
    try:
        return served(port)
    except (ConnectionError, OSError):
        return False


def test_a_flood_of_bad_frames_logs_a_few_lines_per_source(tmp_path: Path) -> None:
    with gateway(tmp_path, "") as gw:
        for _ in range(300):
            with socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S) as sock:
                sock.sendall(struct.pack(">i", -1))
                closed_by_peer(sock, 5)
        assert served(gw.port)
        lines = gw.events("connection_closed_on_protocol_error")
        assert 1 <= len(lines) <= 5


def test_limit_settings_load_from_toml_with_defaults_by_mode(tmp_path: Path) -> None:
    standalone = GatewayConfig(tmp_path)
    assert standalone.request_size_limit == 2 * MiB
    assert standalone.connections_max_idle_ms == 600_000
    proxy = GatewayConfig(tmp_path, upstream=(standalone.listen,), store="sqlite")
    assert proxy.request_size_limit == 100 * MiB
    toml = tmp_path / "g.toml"
    toml.write_text(
        "[gateway]\nmax_request_bytes = 5000000\nqueued_max_request_bytes = 9000000\n"
        "'connections.max.idle.ms' = 1000\nmax_connections_per_ip = 7\n"
        "connection_creation_rate_per_ip = 50\n"
    )
    loaded = load_config(toml, data_dir=tmp_path, environ={})
    assert (loaded.request_size_limit, loaded.queued_max_request_bytes) == (5_000_000, 9_000_000)
    assert (loaded.connections_max_idle_ms, loaded.max_connections_per_ip) == (1000, 7)
    assert (standalone.connection_creation_rate_per_ip, loaded.connection_creation_rate_per_ip) == (
        0,
        50,
    )
    with pytest.raises(ConfigurationError, match="connection_creation_rate_per_ip"):
        GatewayConfig(tmp_path, connection_creation_rate_per_ip=-1)
    with pytest.raises(ConfigurationError, match="queued_max_request_bytes"):
        GatewayConfig(tmp_path, max_request_bytes=10 * MiB, queued_max_request_bytes=MiB)


def test_approaching_the_open_files_limit_is_logged(tmp_path: Path) -> None:
    import os
    import resource

    config = "[gateway]\nexpiry_check_ms = 100\n"
    with gateway(tmp_path, config) as gw:
        assert gw.proc is not None
        pid = gw.proc.pid
        in_use = len(os.listdir(f"/proc/{pid}/fd"))
        # Lower the running gateway's limit: 70 files above what it has open now.
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 70, in_use + 70))
        socks = [
            socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
            for _ in range(20)
        ]

        def logged() -> bool:
            # The gateway re-reads its limit on its housekeeping tick (late on a busy
            # machine): a new connection after that is over it and logged.
            if len(socks) < 40:
                socks.append(
                    socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
                )
            return bool(gw.events("connection_limit_near"))

        wait_for(logged, 60, what="fd limit log line")
        lines = gw.events("connection_limit_near")
        assert lines[0]["reason"] == "open_files_limit"
        assert lines[0]["fd_limit"] == in_use + 70
        assert len(lines) <= 5  # rate limited, though every new connection is over
        assert served(gw.port)
        for sock in socks:
            sock.close()
