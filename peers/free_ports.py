"""Free TCP ports on 127.0.0.1 for the servers the tests, the peers and ``make kafka`` start.

A server started by a test is told its port before it binds it, so a port picked by
binding to 0 and releasing it can be handed out again in between: to another test
process running at the same time (pytest-xdist's workers), or as the local port of an
outgoing connection (those come from the kernel's ephemeral range, 32768 and up on
Linux). So ports come from below that range, from a slice of their own per xdist
worker (``PYTEST_XDIST_WORKER`` = ``gw0``, ``gw1``, ...), and each process walks its
slice in turn from a random start, so a port it released a moment ago is not picked
again at once. Each port is checked by binding it before it is given out.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

#: The ports handed out: above the well-known and registered services most machines
#: run, below Linux's default ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``).
LOW, HIGH = 20000, 32000


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    width = (HIGH - LOW) // max(count, 1)
    start = LOW + (index % max(count, 1)) * width
    return range(start, start + width)


_SLICE = _slice()
_NEXT = itertools.count(random.randrange(len(_SLICE)))


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port of this process's slice that nothing is bound to right now."""
    return free_port_block(1)


def free_port_block(size: int) -> int:
    """The first of ``size`` consecutive ports of this process's slice, all free right now."""
    if size > len(_SLICE):
        raise ValueError(f"{size} ports do not fit in a slice of {len(_SLICE)}")
    for _ in range(len(_SLICE)):
        base = _SLICE.start + next(_NEXT) % (len(_SLICE) - size + 1)
        if all(_bindable(port) for port in range(base, base + size)):
            for _ in range(size - 1):
                next(_NEXT)
            return base
    raise RuntimeError(f"no {size} consecutive free ports in {_SLICE.start}-{_SLICE.stop - 1}")
