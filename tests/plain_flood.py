"""A SASL/PLAIN login flood, and a clean client timing its round trips beside it.

The flood (run as its own process, so its threads do not share the measuring
process's GIL) opens connection after connection to a SASL listener and sends
SaslHandshake + SaslAuthenticate with a fresh random password each time, then
hangs up without waiting: every attempt misses the verified-password cache and
costs the gateway one PBKDF2 derivation. Used by the flood test and by
``bench/starvation.py --attack plain``. Run:

    python -m tests.plain_flood --port P --user alice --seconds 5 --threads 4 --rate 100

It prints the number of attempts sent.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import recv_frame
from tests.procs import BIN

ROOT = Path(__file__).resolve().parents[1]
#: Hard for the gateway to check: SCRAM-SHA-512 at the most iterations ``users add`` allows.
ITERATIONS = 16384


def add_user(data_dir: Path, user: str, password: str) -> None:
    """``clientmetrics users add``: one SCRAM-SHA-512 credential of ``ITERATIONS``."""
    subprocess.run(
        [
            str(BIN / "clientmetrics"),
            *("users", "add", user, "--data-dir", str(data_dir), "--password-stdin"),
            *("--mechanism", "scram-sha-512", "--iterations", str(ITERATIONS)),
        ],
        input=f"{password}\n",
        text=True,
        check=True,
        capture_output=True,
    )


def login_frames(user: str, password: str) -> bytes:
    """SaslHandshake v1 (PLAIN) and SaslAuthenticate v2, correlation ids 1 and 2."""
    handshake = encode_request(
        RequestHeader(17, 1, 1, "flood", None, 1), request_type(17, 1)(mechanism="PLAIN")
    )
    token = f"\0{user}\0{password}".encode()
    authenticate = encode_request(
        RequestHeader(36, 2, 2, "flood", None, 2), request_type(36, 2)(auth_bytes=token)
    )
    return handshake + authenticate


def flood(port: int, user: str, seconds: float, threads: int, rate: float) -> int:
    """Login attempts with random passwords, ``rate`` a second in all (0: as fast as
    possible), for ``seconds``; how many were sent."""
    sent = [0] * threads
    start = time.monotonic()
    deadline = start + seconds
    interval = threads / rate if rate > 0 else 0.0

    def attacker(slot: int) -> None:
        due = start + slot * interval / threads
        while time.monotonic() < deadline:
            due += interval
            if (wait := due - time.monotonic()) > 0:
                time.sleep(wait)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                    sock.sendall(login_frames(user, os.urandom(12).hex()))
            except OSError:
                time.sleep(0.01)  # refused at the connection limit: try again
                continue
            sent[slot] += 1

    workers = [threading.Thread(target=attacker, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 10)
    return sum(sent)


def start_flood(
    port: int, user: str, seconds: float, threads: int, rate: float
) -> subprocess.Popen[str]:
    """``flood`` in a child process; its stdout is the attempt count."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.plain_flood",
            f"--port={port}",
            f"--user={user}",
            f"--seconds={seconds}",
            f"--threads={threads}",
            f"--rate={rate}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


class CleanClient:
    """One authenticated connection timing ApiVersions and GetTelemetrySubscriptions."""

    def __init__(self, port: int, user: str, password: str, source: str = "127.0.0.1") -> None:
        started = time.perf_counter()
        self._sock = socket.create_connection(
            ("127.0.0.1", port), timeout=30, source_address=(source, 0)
        )
        self._correlation = 2
        self._instance = uuid.UUID(int=0)
        self._sock.sendall(login_frames(user, password))
        recv_frame(self._sock)
        _, answer = decode_response(36, 2, recv_frame(self._sock))
        if int(answer.error_code) != 0:
            raise AssertionError(f"the clean client's login failed: {answer.error_message}")
        #: How long connecting and logging in took (s).
        self.login_s = time.perf_counter() - started

    def _round_trip(self, api_key: int, version: int, **body: object) -> tuple[float, object]:
        self._correlation += 1
        header_version = 2 if request_type(api_key, version).__flexible__ else 1
        header = RequestHeader(api_key, version, self._correlation, "clean", None, header_version)
        frame = encode_request(header, request_type(api_key, version)(**body))
        started = time.perf_counter()
        self._sock.sendall(frame)
        answer = recv_frame(self._sock)
        took = time.perf_counter() - started
        correlation, decoded = decode_response(api_key, version, answer)
        if correlation != self._correlation:
            raise AssertionError(f"answer {correlation} to request {self._correlation}")
        return took, decoded

    def latencies(self, seconds: float) -> list[float]:
        """Round-trip times (s) of alternating ApiVersions and GetTelemetrySubscriptions."""
        times: list[float] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            took, _ = self._round_trip(
                18, 3, client_software_name="clean", client_software_version="1"
            )
            times.append(took)
            took, subscription = self._round_trip(71, 0, client_instance_id=self._instance)
            self._instance = subscription.client_instance_id  # type: ignore[attr-defined]
            times.append(took)
        return times

    def close(self) -> None:
        self._sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="SASL/PLAIN login flood")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="alice")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0.0, help="logins/s in all; 0: no limit")
    args = parser.parse_args()
    print(flood(args.port, args.user, args.seconds, args.threads, args.rate), flush=True)


if __name__ == "__main__":
    main()
