"""Kafka 4.4.0's command-line tools, many runs in one JVM.

A tool's JVM takes ~2 s to start on the project's machines, so a test that runs a tool
dozens of times runs them through ``ToolSession``: one JVM (``tool-harness/``) that
calls each tool's ``main`` with its output captured and Kafka's exit procedure
replaced, so each run gives the exit code, stdout and stderr the tool's own process
would have::

    with ToolSession() as tools:
        result = tools.run("client-metrics", "--bootstrap-server", bootstrap, "--list")
        result.returncode, result.stdout, result.stderr
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from types import TracebackType

from peers.build import javac_jar, require
from peers.kafka.launcher import HERE, TOOLS, kafka_jars

__all__ = ["ToolSession", "harness_jar"]

#: Unlike a one-shot tool, the harness lives for many runs: full JIT pays off.
JVM_OPTIONS: tuple[str, ...] = ("-Djava.security.egd=file:/dev/./urandom",)


def harness_jar() -> Path:
    """The harness compiled against Kafka 4.4.0's jars (cached)."""
    return javac_jar(
        [HERE / "tool-harness" / "ToolHarness.java"], kafka_jars(), "kafka-tool-harness"
    )


class ToolSession:
    """One JVM running Kafka's tools one after the other (not thread-safe)."""

    def __init__(self, timeout: float = 120.0) -> None:
        require("java", "a JDK (apt-get install openjdk-17-jdk-headless)")
        jars, jar = kafka_jars(), harness_jar()
        self._timeout = timeout
        self._proc = subprocess.Popen(
            [
                "java",
                "-Xshare:auto",
                *JVM_OPTIONS,
                f"-Dlog4j2.configurationFile={HERE / 'tools-log4j2.properties'}",
                "-cp",
                f"{jars}/*:{jar}",
                "ToolHarness",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The harness's own stderr (a JVM warning, a crash) is drained, never blocks it.
        self.stderr_lines: list[str] = []
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()

    def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self.stderr_lines.append(line)

    def run(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Tool ``name`` (a key of ``TOOLS`` or a main class) with ``args``."""
        proc = self._proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        argv = [TOOLS.get(name, name), *args]
        proc.stdin.write(json.dumps(argv) + "\n")
        proc.stdin.flush()
        timer = threading.Timer(self._timeout, proc.kill)
        timer.start()
        try:
            line = proc.stdout.readline()
        finally:
            timer.cancel()
        if not line:
            raise RuntimeError(f"the tool harness died: {''.join(self.stderr_lines[-20:])}")
        result = json.loads(line)
        return subprocess.CompletedProcess(argv, result["exit"], result["out"], result["err"])

    def close(self) -> None:
        """End the JVM (stdin closed, it exits; killed if it lingers)."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> ToolSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
