"""The Java client (kafka-clients 4.4.0) as a peer: build it, run it, read what it says.

``peers/java-client/`` is a small Maven project: a producer and a consumer group with
``enable.metrics.push=true``, any client settings (``--command-config``), printing JSON
lines (``started``, ``instance`` with each client's instance id, ``done``, ``closed``,
``error``, ``exit``). ::

    client = java_client(bootstrap, "--client-id", "app", "--role", "producer", "--close")
    client.start()
    ids = client.instance_ids(timeout=60)      # {"producer": "0f1e...-..."}
    client.stop()                              # closes the clients: a terminating push

Client ids are ``ID-producer`` and ``ID-consumer`` for ``--client-id ID``, and
``ID-share-consumer`` for ``--role share`` (a KIP-932 share consumer of ``--group``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from peers.build import maven_project, require
from peers.process import PeerProcess

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "java-client"
MAIN = "io.clientmetrics.peers.TelemetryPeer"
#: Small and quick to start: these clients need little heap and no C2 compiler.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


def java_client_jars() -> Path:
    """The folder with the peer's jar and its runtime dependencies (built once, cached)."""
    return maven_project(PROJECT, "java-client-peer", run_tests=True)


class JavaClient(PeerProcess):
    """A running Java client peer."""

    def instance_ids(self, timeout: float = 60.0) -> dict[str, str]:
        """Each client's canonical instance id by role, once every client started has one."""
        started = self.wait_event("started", timeout)
        roles = _roles(started)

        def all_known() -> dict[str, object] | None:
            found = {e["role"]: e["client_instance_id"] for e in self.events("instance")}
            missing = [e for e in self.events("no_instance") if e["role"] in roles]
            if missing:
                raise AssertionError(f"java client has no instance id: {missing}")
            return dict(found) if set(roles) <= set(found) else None

        found = self.wait_until(all_known, timeout, "instance ids")
        return {str(k): str(v) for k, v in found.items()}


def debug_log(logger: str) -> str:
    """The JVM option that logs ``logger`` (a class or package name) at DEBUG to stderr."""
    return f"-Dorg.slf4j.simpleLogger.log.{logger}=debug"


def _roles(started: dict[str, object]) -> tuple[str, ...]:
    options = started.get("options")
    role = "both"
    for option in options if isinstance(options, list) else ():
        if str(option).startswith("role="):
            role = str(option)[5:]
    if role == "share":
        return ("share-consumer",)
    return ("producer", "consumer") if role == "both" else (role,)


def java_client(
    bootstrap: str, *args: str, log_path: Path | None = None, jvm_options: Sequence[str] = ()
) -> JavaClient:
    """A Java client peer for ``bootstrap`` with the program's options ``args`` (not started).

    ``jvm_options`` come after ``JVM_OPTIONS``: e.g. a client logger's level, which
    slf4j-simple takes as ``-Dorg.slf4j.simpleLogger.log.<logger>=debug`` (``debug_log``).
    """
    java = require("java", "a JDK (apt-get install openjdk-17-jdk-headless)")
    jars = java_client_jars()
    classpath = ["-cp", f"{jars}/*", MAIN]
    argv = [java, *JVM_OPTIONS, *jvm_options, *classpath, "--bootstrap", bootstrap, *args]
    return JavaClient(argv, log_path=log_path)


__all__ = ["JavaClient", "debug_log", "java_client", "java_client_jars"]
