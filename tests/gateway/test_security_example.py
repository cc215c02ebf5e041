"""docs/security.md's two complete examples, run as written in an empty directory.

Blocks tagged ``<!-- security-example: MODE -->`` are taken in order: ``file=NAME``
is written to NAME, ``run`` runs with bash (must exit 0), ``serve ready=TEXT``
starts a server (stopped by PID at the end) and waits for TEXT in its log,
``console`` runs each ``$`` command and compares its output with the lines under
it. The fixed ports are replaced by free ones; the virtualenv's scripts are on
``PATH``, as after ``. .venv/bin/activate``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.procs import BIN, MIN_DEADLINE_S, free_port, stop_process

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BLOCK = re.compile(
    r"<!-- security-example: (?P<mode>[\w=.-]+)(?P<opts>[^>]*?)-->\s*\n```\w*\n(?P<body>.*?)\n```",
    re.S,
)
PORTS = (9094, 9095)


def console_steps(body: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of each ``$`` line, continuations joined."""
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and steps[-1][0].endswith("\\"):
            steps[-1] = (steps[-1][0][:-1] + " " + line.strip(), [])
        else:
            steps[-1][1].append(line)
    return steps


def test_the_security_examples_run_as_written(tmp_path: Path) -> None:
    ports = {port: free_port() for port in PORTS}

    def local(text: str) -> str:
        return re.sub(r"\b(9094|9095)\b", lambda m: str(ports[int(m[1])]), text)

    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    servers: list[tuple[subprocess.Popen[bytes], Path]] = []
    blocks = list(BLOCK.finditer(DOC.read_text(encoding="utf-8")))
    assert [b["mode"] for b in blocks].count("serve") == 2
    try:
        for block in blocks:
            mode, body = block["mode"], local(block["body"])
            if mode.startswith("file="):
                (tmp_path / mode.removeprefix("file=")).write_text(body + "\n")
            elif mode == "run":
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", body],
                    cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                    check=False,
                )  # fmt: skip
                assert done.returncode == 0, body + done.stderr
            elif mode == "serve":
                ready = re.search(r'ready="([^"]+)"', block["opts"])
                assert ready is not None
                log = tmp_path / f"server-{len(servers)}.log"
                with log.open("wb") as out:
                    proc = subprocess.Popen(
                        ["bash", "-c", "exec " + body], cwd=tmp_path, env=env,
                        stdout=out, stderr=out,
                    )  # fmt: skip
                servers.append((proc, log))
                deadline = time.monotonic() + MIN_DEADLINE_S
                while ready[1] not in log.read_text(errors="replace"):
                    assert proc.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.1)
            elif mode == "console":
                for command, expected in console_steps(body):
                    done = subprocess.run(
                        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=60, check=False,
                    )  # fmt: skip
                    assert (done.stdout + done.stderr).splitlines() == expected, command
            else:
                pytest.fail(f"unknown security-example mode {mode!r}")
        # A wrong password, for the audit trail below.
        wrong = (tmp_path / "ops.properties").read_text().replace("ops-secret", "guess")
        (tmp_path / "wrong.properties").write_text(wrong)
        done = subprocess.run(
            ["kafka-client-metrics", "--bootstrap-server", f"127.0.0.1:{ports[9094]}",
             "--command-config", "wrong.properties", "--list"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 1
    finally:
        for proc, _ in servers:
            stop_process(proc, 20)  # type: ignore[arg-type]
    # The audit trail (info): who changed which subscription from where, who was refused,
    # and which user a failed login tried.
    events = [json.loads(line) for line in servers[0][1].read_text().splitlines()]
    (changed,) = [e for e in events if e["event"] == "subscription_changed"]
    assert changed["principal"] == "User:ops"
    assert changed["source"].startswith("127.0.0.1:")
    assert (changed["subscription"], changed["before"]) == ("producers", {})
    assert changed["after"] == {"metrics": "org.apache.kafka.producer.", "interval.ms": "30000"}
    (refused,) = [e for e in events if e["event"] == "subscription_change_refused"]
    assert (refused["principal"], refused["subscription"]) == ("User:app", "producers")
    assert (refused["level"], refused["error_code"]) == ("info", 31)
    failed = [e for e in events if e.get("reason") == "authentication_failed"]
    assert [(e["user"], e["level"]) for e in failed] == [("User:ops", "info")]
