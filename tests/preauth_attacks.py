"""What an unauthenticated peer can send a SASL listener, run from a process of its own.

* ``scram``: SaslHandshake SCRAM-SHA-512, then a client-first message whose user
  name is ``--size`` bytes (scramp's SASLprep costs microseconds a character);
* ``oauthbearer``: SaslHandshake OAUTHBEARER, then a ``--size`` byte token that
  looks like a JWT (three base64url segments);
* ``park``: ``--connections`` connections (TLS with ``--tls-ca``) that each send a
  size prefix of ``--declared`` bytes and ``--size`` bytes of it, then wait;
  "parked N" is printed once they all did, and they are closed (reset) when a
  line arrives on stdin.

``scram`` and ``oauthbearer`` loop over new connections with ``--threads``
threads for ``--seconds`` and print how many attempts were answered, how many
were closed without an answer, and the error codes seen. ``--source`` binds
the attackers to another loopback address (127.0.0.2: the gateway's per-address
limits then tell them from a clean client on 127.0.0.1). Used by
``bench/preauth.py`` and the tests:

    python -m tests.preauth_attacks scram --port P --size 2097152 --seconds 5
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import recv_frame
from tests.procs import MIN_DEADLINE_S

ROOT = Path(__file__).resolve().parents[1]
_TCP_ESTABLISHED = 1


def handshake(mechanism: str) -> bytes:
    return encode_request(
        RequestHeader(17, 1, 1, "attacker", None, 1), request_type(17, 1)(mechanism=mechanism)
    )


def authenticate(token: bytes) -> bytes:
    return encode_request(
        RequestHeader(36, 2, 2, "attacker", None, 2), request_type(36, 2)(auth_bytes=token)
    )


def scram_first(size: int) -> bytes:
    """A SCRAM client-first message with a ``size``-byte user name."""
    return b"n,,n=" + b"u" * size + b",r=fyko+d2lbbFgONRv9qkxdawL"


def oauthbearer_first(size: int) -> bytes:
    """An OAUTHBEARER client-first message with a ``size``-byte JWT-shaped token."""
    head = base64.urlsafe_b64encode(b'{"alg":"RS256","kid":"k1"}').rstrip(b"=")
    body = base64.urlsafe_b64encode(b'{"sub":"' + b"x" * max(size * 3 // 4 - 20, 1) + b'"}')
    token = head + b"." + body.rstrip(b"=") + b".c2ln"
    return b"n,,\x01auth=Bearer " + token + b"\x01\x01"


def connect(port: int, source: str | None) -> socket.socket:
    bind = (source, 0) if source else None
    return socket.create_connection(
        ("127.0.0.1", port), timeout=MIN_DEADLINE_S, source_address=bind
    )


def attempt(port: int, mechanism: str, token: bytes, source: str | None = None) -> int | None:
    """One login: the SaslAuthenticate error code, or None if closed without one."""
    with connect(port, source) as sock:
        sock.sendall(handshake(mechanism))
        try:
            recv_frame(sock)
            sock.sendall(authenticate(token))
            _, answer = decode_response(36, 2, recv_frame(sock))
        except (OSError, ConnectionError):
            return None
        return int(answer.error_code)


def flood(
    port: int, kind: str, size: int, seconds: float, threads: int, source: str | None = None
) -> dict[str, object]:
    mechanism, token = (
        ("SCRAM-SHA-512", scram_first(size))
        if kind == "scram"
        else ("OAUTHBEARER", oauthbearer_first(size))
    )
    codes: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + seconds

    def attacker() -> None:
        while time.monotonic() < deadline:
            try:
                code = attempt(port, mechanism, token, source)
            except OSError:
                code = None
            codes["closed" if code is None else str(code)] += 1

    workers = [threading.Thread(target=attacker, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 60)
    return {"attempts": sum(codes.values()), "codes": dict(codes)}


def park(
    port: int, connections: int, declared: int, size: int, ca: str | None, source: str | None
) -> None:
    """Open and park ``connections``; close them (RST) on a line from stdin."""
    context = ssl.create_default_context(cafile=ca) if ca else None
    head = struct.pack(">i", declared) + b"\x00\x12\x00\x03"
    socks: list[socket.socket] = []
    refused = 0
    for _ in range(connections):
        try:
            raw = connect(port, source)
            socks.append(raw)
            sock = context.wrap_socket(raw, server_hostname="localhost") if context else raw
            socks[-1] = sock
            sock.sendall(head + b"\x00" * (size - 4))
        except OSError:  # closed by the gateway (a per-address limit)
            refused += 1
    print(f"parked {connections - refused} (closed by the gateway: {refused})", flush=True)
    sys.stdin.readline()
    # A connection the gateway held unread and closed took its bytes into the kernel's
    # buffers all the same (sendall returned): count those the gateway ended meanwhile.
    ended = sum(1 for sock in socks if closed_by_peer(sock))
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    print(f"closed (the gateway had closed {ended} of them)", flush=True)


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the peer has closed or reset ``sock`` (Linux: the TCP state is no longer
    ESTABLISHED), without reading: a TLS socket may have unread session tickets."""
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    except OSError:
        return True
    return state != _TCP_ESTABLISHED


def start(*args: str, niceness: int = 0) -> subprocess.Popen[str]:
    """This module in a child process (its threads do not share the caller's GIL),
    ``niceness`` steps below the caller."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.preauth_attacks", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: os.nice(niceness)) if niceness else None,  # noqa: PLW1509
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="pre-authentication attacks on a SASL listener")
    parser.add_argument("kind", choices=("scram", "oauthbearer", "park"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--size", type=int, default=2 * 1024 * 1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--connections", type=int, default=900)
    parser.add_argument("--declared", type=int, default=1_000_000)
    parser.add_argument("--tls-ca")
    parser.add_argument("--source", help="the local address to connect from (e.g. 127.0.0.2)")
    args = parser.parse_args()
    if args.kind == "park":
        park(args.port, args.connections, args.declared, args.size, args.tls_ca, args.source)
        return
    result = flood(args.port, args.kind, args.size, args.seconds, args.threads, args.source)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
