"""Ports for test servers: below the ephemeral range, a slice per xdist worker, never one in use."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest

from peers import free_ports as ports


def test_each_worker_has_its_own_slice_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    slices = []
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(set(ports._slice()))
    assert all(len(one) == 4000 for one in slices)
    assert len(slices[0] | slices[1] | slices[2]) == 12000
    first, last = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    assert max(max(one) for one in slices) < int(first) <= int(last)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert ports._slice() == range(ports.LOW, ports.HIGH)


def _listener() -> socket.socket:
    """A socket listening on a port of this process's slice."""
    for port in ports._SLICE[100:-100]:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen()
        return sock
    raise AssertionError("no port of the slice could be bound")


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with _listener() as taken:
        port = taken.getsockname()[1]
        monkeypatch.setattr(ports, "_NEXT", itertools.count(port - ports._SLICE.start))
        given = ports.free_port()
        assert given != port
        assert given in ports._SLICE
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", given))


def test_a_block_is_all_free_and_the_next_pick_is_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _listener() as taken:
        port = taken.getsockname()[1]
        monkeypatch.setattr(ports, "_NEXT", itertools.count(port - ports._SLICE.start - 2))
        base = ports.free_port_block(5)
        assert port not in range(base, base + 5)
        socks = [socket.socket() for _ in range(5)]
        try:
            for offset, sock in enumerate(socks):
                sock.bind(("127.0.0.1", base + offset))
        finally:
            for sock in socks:
                sock.close()
        assert ports.free_port() >= base + 5
