"""Loopback ports and processes for the benchmarks' servers.

``free_port``, ``stop_process`` and ``TansuProcess`` are the tests' own
(tests/procs.py), and ``KafkaBroker`` is the peers' launcher (peers/kafka), so the
benchmarks start and stop peers exactly as the tests do.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers.kafka import KafkaBroker
from tests.procs import TansuProcess, free_port, stop_process

__all__ = ["KafkaBroker", "TansuProcess", "free_port", "stop_process", "wait_port"]


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
