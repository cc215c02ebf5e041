"""``clientmetrics serve`` with a bad setup: one line on stderr naming the problem, exit 1."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from clientmetrics.gateway.config import GatewayConfig
from tests.procs import BIN, free_port

#: The product's bound: a gateway that cannot reach its upstream stops within the
#: connect timeout (a refused connection, at once). A test's clock also counts the
#: interpreter's start and imports, which took 10.6 s on a machine at load 13-18:
#: that slack is the machine's, not the gateway's.
UPSTREAM_BOUND_S = next(
    float(f.default) for f in fields(GatewayConfig) if f.name == "upstream_connect_timeout_s"
)
START_SLACK_S = 40.0


def serve(*args: str, cwd: Path) -> tuple[int, list[str]]:
    done = subprocess.run(
        [str(BIN / "clientmetrics"), "serve", "--log-format", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stderr.splitlines()


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_unreachable_upstream_fails_alike_whatever_the_store(tmp_path: Path) -> None:
    port = free_port()
    outcomes = []
    for store in ("topic", "sqlite"):
        started = time.monotonic()
        code, lines = serve(
            "--upstream", f"127.0.0.1:{port}", "--listen", "127.0.0.1:0", "--store", store,
            "--data-dir", str(tmp_path / store), cwd=tmp_path,
        )  # fmt: skip
        assert time.monotonic() - started < UPSTREAM_BOUND_S + START_SLACK_S
        outcomes.append((code, lines))
    assert outcomes[0] == outcomes[1]
    code, lines = outcomes[0]
    assert code == 1
    assert lines == [
        f"clientmetrics serve: cannot connect to upstream 127.0.0.1:{port}: "
        "[Errno 111] Connection refused"
    ]


def test_busy_admin_port_is_named(tmp_path: Path, busy_port: int) -> None:
    code, lines = serve(
        "--listen", "127.0.0.1:0", "--admin-listen", f"127.0.0.1:{busy_port}",
        "--data-dir", str(tmp_path / "data"), cwd=tmp_path,
    )  # fmt: skip
    assert (code, lines) == (
        1,
        [
            f"clientmetrics serve: cannot listen on 127.0.0.1:{busy_port} (--admin-listen): "
            "Address already in use"
        ],
    )


def test_busy_listen_port_is_named(tmp_path: Path, busy_port: int) -> None:
    code, lines = serve(
        "--listen", f"127.0.0.1:{busy_port}", "--admin-listen", "127.0.0.1:0",
        "--data-dir", str(tmp_path / "data"), cwd=tmp_path,
    )  # fmt: skip
    assert (code, lines) == (
        1,
        [f"clientmetrics serve: cannot listen on 127.0.0.1:{busy_port}: Address already in use"],
    )


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "cm-data").write_text("not a directory")
    code, lines = serve("--listen", "127.0.0.1:0", "--data-dir", "cm-data", cwd=tmp_path)
    assert (code, lines) == (
        2,  # a configuration error (a busy port is the machine's state: 1)
        ["clientmetrics serve: data directory cm-data is a file, not a directory"],
    )
