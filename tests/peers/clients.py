"""What the peer tests share: starting the real clients, and reading what they landed."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from peers.build import PeerUnavailable
from peers.franz_go import franz_go
from peers.java_client import JavaClient, java_client
from peers.process import PeerProcess

from clientmetrics.telemetry.otlp_arrow import decode_points
from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import recv_frame
from tests.landed import landed_rows, metric_names
from tests.procs import MIN_DEADLINE_S

Row = dict[str, object]


@contextmanager
def running(peer: Callable[[], PeerProcess]) -> Iterator[PeerProcess]:
    """Start a peer (skip the test if it cannot be built here); stop it by PID at the end."""
    try:
        process = peer()
    except PeerUnavailable as exc:
        pytest.skip(f"peer not available here: {exc}")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@contextmanager
def java(
    bootstrap: str, tmp: Path, *args: str, jvm_options: Sequence[str] = ()
) -> Iterator[JavaClient]:
    """The Java client peer with ``args``, its stderr (the client's log) in ``tmp``."""
    log = tmp / f"java-{uuid.uuid4().hex[:6]}.log"
    with running(
        lambda: java_client(bootstrap, *args, log_path=log, jvm_options=jvm_options)
    ) as process:
        assert isinstance(process, JavaClient)
        yield process


@contextmanager
def franz(bootstrap: str, tmp: Path, *args: str) -> Iterator[PeerProcess]:
    """The franz-go peer with ``args``, its stderr in ``tmp``."""
    log = tmp / f"franz-{uuid.uuid4().hex[:6]}.log"
    with running(lambda: franz_go(bootstrap, *args, log_path=log)) as process:
        yield process


def rows_by_client(data_dir: Path) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in landed_rows(data_dir):
        out.setdefault(str(row["client_id"]), []).append(row)
    return out


def names(rows: list[Row]) -> set[str]:
    found: set[str] = set()
    for row in rows:
        found |= metric_names(bytes(row["payload"]))  # type: ignore[arg-type]
    return found


def node_labels(rows: list[Row]) -> set[str]:
    """Every value of the per-broker label in these pushes, as the pipeline decodes them."""
    payloads = pa.array([bytes(r["payload"]) for r in rows], pa.binary())  # type: ignore[arg-type]
    points = decode_points(payloads).points.column("attributes").to_pylist()
    return {value for attrs in points for key, value in attrs if key == "node.id"}


def requested_metrics(port: int, client_id: str) -> list[str]:
    """RequestedMetrics of a fresh GetTelemetrySubscriptions v0 as ``client_id``."""
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
        sock.sendall(encode_request(RequestHeader(71, 0, 1, client_id), get))
        _, body = decode_response(71, 0, recv_frame(sock))
    assert int(body.error_code) == 0
    return list(body.requested_metrics)
