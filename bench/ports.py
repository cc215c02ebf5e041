"""Loopback ports for the benchmarks' servers."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A port nothing listens on right now (bind to 0, read it, release it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float = 30) -> None:
    """Return once something accepts connections on ``port``; RuntimeError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")
