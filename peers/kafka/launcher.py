"""Apache Kafka 4.4.0 in KRaft combined mode, from Maven's jars, on 127.0.0.1, by PID.

One launcher for the tests, the benchmarks and ``make kafka``::

    broker = KafkaBroker(workdir).start()      # PLAINTEXT, the test telemetry plugin
    broker.bootstrap                           # "127.0.0.1:PORT"
    broker.stop()

Options: ``listener="SASL_SSL"`` with SCRAM ``users`` (SCRAM-SHA-256 and -512, created
when the storage is formatted), TLS from a :class:`TlsFiles` the caller made,
``authorizer=True`` for ``StandardAuthorizer`` with ``super_users``; ``plugins`` on the
classpath and ``metric.reporters`` (the broker advertises GetTelemetrySubscriptions and
PushTelemetry only with a telemetry plugin; the default is the minimal one in
``test-plugin/``). The broker's log stays in ``workdir/broker.log`` (each start appends to
it and waits for its own start line); ``log_tail()`` shows its end when a test fails.
Kafka's command-line tools run from the same jars (``tool``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from peers.build import ROOT, PeerUnavailable, javac_jar, maven_dependencies, maven_project, require
from peers.free_ports import free_port

HERE = Path(__file__).resolve().parent
#: The clientmetrics broker plugin users install (docs/kafka-plugin.md).
BROKER_PLUGIN = ROOT / "broker-plugin"
PLUGIN_CLASS = "io.clientmetrics.plugin.ClientMetricsPlugin"
LEGACY_PLUGIN_CLASS = "io.clientmetrics.plugin.ClientMetricsLegacyPlugin"
VERSION = "4.4.0"
#: A release with only KIP-714's receiver interface (3.7 to 4.1) that resolves here: the
#: broker plugin's tests run its legacy entry class on it.
LEGACY_VERSION = "3.9.2"
#: The class names of the tools a user runs as ``kafka-*.sh``, from ``kafka-tools`` 4.4.0.
TOOLS = {
    "client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "configs": "org.apache.kafka.tools.ConfigCommand",
    "acls": "org.apache.kafka.tools.AclCommand",
    "api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "storage": "kafka.tools.StorageTool",
}
#: What Kafka logs once it serves (one line per start; the log is appended to).
STARTED_LINE = "Kafka Server started"
#: Every SCRAM user gets credentials for both mechanisms.
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ADMIN = "admin"


def kafka_jars(version: str = VERSION) -> Path:
    """The folder of Kafka's jars (broker, tools, logging), fetched once and cached.

    4.4.0 unless ``version`` names another release (the broker plugin's tests load it on an
    older broker too; the same POM with ``kafka.version`` overridden).
    """
    if version == VERSION:
        return maven_dependencies(HERE / "pom.xml", f"kafka-{VERSION}")
    return maven_dependencies(HERE / "pom.xml", f"kafka-{version}", {"kafka.version": version})


@dataclass(frozen=True)
class Plugin:
    """A jar (or several) put on the broker's classpath and a class put on ``metric.reporters``."""

    jars: tuple[Path, ...]
    class_name: str
    #: Broker properties the plugin reads (its own prefix).
    properties: Mapping[str, str] = field(default_factory=dict)


def minimal_plugin(record_file: Path | None = None) -> Plugin:
    """The minimal telemetry plugin; with ``record_file`` it appends each push as a JSON line."""
    source = HERE / "test-plugin" / "TestTelemetryPlugin.java"
    jar = javac_jar([source], kafka_jars(), "kafka-test-plugin")
    props = {} if record_file is None else {"test.telemetry.record.file": str(record_file)}
    return Plugin((jar,), "TestTelemetryPlugin", props)


def plugin_jar() -> Path:
    """The broker plugin's jar, built by Maven with its JUnit tests (which must pass)."""
    vectors = ROOT / "tests" / "data" / "record-format" / "vectors.json"
    built = maven_project(
        BROKER_PLUGIN, "clientmetrics-kafka-plugin", run_tests=True, inputs=[vectors]
    )
    (jar,) = built.glob("clientmetrics-kafka-plugin-*.jar")
    return jar


def clientmetrics_plugin(
    properties: Mapping[str, str] | None = None, *, legacy: bool = False
) -> Plugin:
    """The clientmetrics broker plugin with ``properties`` (names without ``clientmetrics.``).

    ``legacy`` loads the KIP-714 receiver class (Kafka 3.7 to 4.1) instead of the
    KIP-1217 exporter one.
    """
    props = {f"clientmetrics.{k}": v for k, v in (properties or {}).items()}
    return Plugin((plugin_jar(),), LEGACY_PLUGIN_CLASS if legacy else PLUGIN_CLASS, props)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for a TLS listener: the CA clients trust, the broker's chain and key."""

    ca: Path
    certificate: Path
    private_key: Path


def _pkcs8(key_pem: bytes) -> bytes:
    """Kafka's PEM key store takes PKCS#8 keys only; trustme writes traditional ones."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class KafkaBroker:
    """One Apache Kafka 4.4.0 node (broker and controller) with its data in ``workdir``."""

    workdir: Path
    #: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: the one listener clients use.
    listener: str = "PLAINTEXT"
    #: SCRAM users (name -> password); ``admin`` is added for SASL listeners.
    users: Mapping[str, str] = field(default_factory=dict)
    admin_password: str = "admin-secret"
    tls: TlsFiles | None = None
    #: Ask TLS clients for a certificate (mutual TLS); its subject becomes the principal.
    client_auth: bool = False
    authorizer: bool = False
    super_users: Sequence[str] = ("User:admin",)
    #: Telemetry and other reporter plugins; None: the minimal test plugin.
    plugins: Sequence[Plugin] | None = None
    #: Another Apache Kafka release to run (its storage is formatted with its own tools).
    version: str = VERSION
    #: Open JMX (no authentication) on a free loopback port, read with ``jmx_values``
    #: and ``jmx_counts``.
    jmx: bool = False
    jmx_port: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)
    jvm_options: Sequence[str] = ("-Xms256m", "-Xmx1g", "-XX:+UseSerialGC")
    port: int = 0
    controller_port: int = 0
    #: Also listen on PLAINTEXT (listener name PLAIN) beside a secured ``listener``: for
    #: tests that send raw frames and run tools over TLS and SASL against one broker.
    also_plaintext: bool = False
    plaintext_port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    #: Seconds from launch to "Kafka Server started" and resident memory then, in MiB.
    startup_seconds: float = 0.0
    rss_mib: float = 0.0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl(self) -> bool:
        return self.listener.startswith("SASL_")

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        """Format the storage (first start only) and start the node; wait until it serves."""
        require("java", "a JDK (apt-get install openjdk-17-jdk-headless)")
        jars = kafka_jars(self.version)
        if self.plugins is None:
            self.plugins = (minimal_plugin(),)
        if self.listener.endswith("SSL") and self.tls is None:
            raise ValueError(f"a {self.listener} listener needs tls=TlsFiles(...)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        if self.also_plaintext:
            self.plaintext_port = self.plaintext_port or free_port()
        self.controller_port = self.controller_port or free_port()
        if self.jmx:
            self.jmx_port = self.jmx_port or free_port()
        config = self.workdir / "server.properties"
        config.write_text(self._server_properties())
        if not (self.workdir / "data" / "meta.properties").exists():
            self._format(jars, config)
        began = time.monotonic()
        # The log is kept across starts (appended to): this run's start line is the one
        # written after this offset, not a previous run's.
        since = _size(self.log_path)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it from here
        try:
            self.proc = subprocess.Popen(
                [
                    "java",
                    *self.jvm_options,
                    *self._jmx_options(),
                    f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",
                    "-cp",
                    self._classpath(jars),
                    "kafka.Kafka",
                    str(config),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in `make kafka` reaches Python first
            )
        finally:
            log.close()
        try:
            self._wait_started(began, timeout, since)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self.rss_mib = _rss_mib(self.proc.pid)
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM by PID (a clean shutdown), SIGKILL if it lingers. The exit code."""
        if self.proc is None:
            return 0
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        return int(proc.returncode)

    def kill(self) -> None:
        """SIGKILL: the broker vanishes mid-flight."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self, timeout: float = 90.0) -> KafkaBroker:
        """Stop and start again on the same ports with the same data."""
        self.stop()
        return self.start(timeout)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def summary(self) -> str:
        """One line: what runs where, how long it took to start and how much memory it holds."""
        return (
            f"kafka {self.version} ready in {self.startup_seconds:.1f} s "
            f"(RSS {self.rss_mib:.0f} MiB) at {self.listener}://{self.bootstrap}, "
            f"pid {self.proc.pid if self.proc else '-'}, log {self.log_path}"
        )

    # -- clients -----------------------------------------------------------------------

    def client_config(self, user: str | None = None) -> dict[str, str]:
        """librdkafka (confluent-kafka) settings to reach this broker as ``user``."""
        config = {"bootstrap.servers": self.bootstrap, "security.protocol": self.listener}
        if self.tls is not None:
            config["ssl.ca.location"] = str(self.tls.ca)
        if self.sasl:
            name = user or ADMIN
            config |= {
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": name,
                "sasl.password": self._password(name),
            }
        return config

    def java_properties(self, user: str | None = None) -> dict[str, str]:
        """Java client (and tool ``--command-config``) settings to reach this broker as ``user``."""
        props = {"security.protocol": self.listener}
        if self.tls is not None:
            props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.tls.ca)}
        if self.sasl:
            name = user or ADMIN
            props |= {
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": _scram_jaas(name, self._password(name)),
            }
        return props

    def command_config(self, user: str | None = None) -> Path:
        """A properties file for a tool's ``--command-config`` (written into the workdir)."""
        path = self.workdir / f"client-{user or ADMIN}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.java_properties(user).items()))
        return path

    def tool(
        self, name: str, *args: str, timeout: float = 120.0, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's tools (``TOOLS``) from the same jars; output as text."""
        return run_tool(name, *args, timeout=timeout, check=check)

    def jmx_values(self, object_name: str) -> dict[str, float]:
        """The numeric attributes of one MBean, read once through Kafka's ``JmxTool``."""
        prefix = f"{object_name}:"
        return {
            key[len(prefix) :]: float(value)
            for key, value in self._jmx_read("--object-name", object_name)
            if key.startswith(prefix)
        }

    def jmx_counts(self, pattern: str, attribute: str = "Count") -> dict[str, float]:
        """``attribute`` of every MBean matching ``pattern`` (``*`` wildcards), by name."""
        suffix = f":{attribute}"
        return {
            key[: -len(suffix)]: float(value)
            for key, value in self._jmx_read("--object-name", pattern, "--attributes", attribute)
            if key.endswith(suffix)
        }

    def _jmx_read(self, *args: str) -> list[tuple[str, str]]:
        """``JmxTool`` once with ``args``: its ``name:attribute=value`` lines."""
        if not self.jmx:
            raise ValueError("start the broker with jmx=True to read JMX")
        url = f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self.jmx_port}/jmxrmi"
        proc = run_tool(
            "org.apache.kafka.tools.JmxTool",
            *("--jmx-url", url, *args, "--one-time", "true", "--report-format", "properties"),
            check=True,
        )
        lines = (line.rpartition("=") for line in proc.stdout.splitlines())
        return [(key, value) for key, _, value in lines]

    # -- internals ---------------------------------------------------------------------

    def _jmx_options(self) -> list[str]:
        if not self.jmx:
            return []
        return [
            f"-Dcom.sun.management.jmxremote.port={self.jmx_port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={self.jmx_port}",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1",
            "-Djava.rmi.server.hostname=127.0.0.1",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false",
        ]

    def _password(self, user: str) -> str:
        if user == ADMIN:
            return self.admin_password
        return self.users[user]

    def _classpath(self, jars: Path) -> str:
        extra = [str(jar) for plugin in self.plugins or () for jar in plugin.jars]
        return os.pathsep.join([f"{jars}/*", *extra])

    def _server_properties(self) -> str:
        name = self.listener
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": f"{name}://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"{name}://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": name,
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{name}:{name}",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        if self.tls is not None:
            keystore = self.workdir / "broker-keystore.pem"
            keystore.write_bytes(
                _pkcs8(self.tls.private_key.read_bytes()) + self.tls.certificate.read_bytes()
            )
            props |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls.ca),
                "ssl.client.auth": "required" if self.client_auth else "none",
            }
        if self.sasl:
            lname = name.lower()
            props |= {
                "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            }
            for mech in SCRAM_MECHANISMS:
                props[f"listener.name.{lname}.{mech.lower()}.sasl.jaas.config"] = _scram_jaas(
                    ADMIN, self.admin_password
                )
        if self.also_plaintext and name != "PLAINTEXT":
            plain = f"PLAIN://127.0.0.1:{self.plaintext_port}"
            props["listeners"] += f",{plain}"
            props["advertised.listeners"] += f",{plain}"
            props["listener.security.protocol.map"] += ",PLAIN:PLAINTEXT"
        if self.authorizer:
            # The controller listener is PLAINTEXT on loopback: the node's own requests to
            # itself arrive there as ANONYMOUS and need CLUSTER_ACTION.
            supers = [*self.super_users, "User:ANONYMOUS"]
            props |= {
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": ";".join(supers),
            }
        if self.plugins:
            props["metric.reporters"] = ",".join(p.class_name for p in self.plugins)
            for plugin in self.plugins:
                props |= dict(plugin.properties)
        props |= dict(self.properties)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _format(self, jars: Path, config: Path) -> None:
        cluster_id = _java(jars, TOOLS["storage"], "random-uuid").stdout.strip().splitlines()[-1]
        args = ["format", "--standalone", "-t", cluster_id, "-c", str(config)]
        if self.sasl:
            for user, password in {ADMIN: self.admin_password, **self.users}.items():
                for mech in SCRAM_MECHANISMS:
                    args += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        proc = _java(jars, TOOLS["storage"], *args)
        if proc.returncode != 0:
            raise RuntimeError(f"formatting Kafka's storage failed: {proc.stdout}{proc.stderr}")

    def _wait_started(self, began: float, timeout: float, since: int) -> None:
        """Until the log has a start line after byte ``since`` (this run's)."""
        assert self.proc is not None
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"kafka exited with {self.proc.returncode}; log {self.log_path}:\n"
                    + self.log_tail(30)
                )
            if logged_since(self.log_path, since, STARTED_LINE):
                return
            time.sleep(0.1)
        raise RuntimeError(f"kafka did not start in {timeout:.0f} s; log {self.log_path}")


def logged_since(path: Path, offset: int, text: str) -> bool:
    """Whether ``text`` is in the file at ``path`` after its first ``offset`` bytes."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return text.encode() in file.read()
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _scram_jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )


def _java(
    jars: Path, main: str, *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "java",
            "-Xshare:auto",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={HERE / 'tools-log4j2.properties'}",
            "-cp",
            f"{jars}/*",
            main,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_tool(
    name: str, *args: str, timeout: float = 120.0, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """One of Kafka 4.4.0's command-line tools (see ``TOOLS``) with these arguments."""
    require("java", "a JDK (apt-get install openjdk-17-jdk-headless)")
    proc = _java(kafka_jars(), TOOLS.get(name, name), *args, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"kafka {name} {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


__all__ = [
    "LEGACY_VERSION",
    "STARTED_LINE",
    "TOOLS",
    "VERSION",
    "KafkaBroker",
    "PeerUnavailable",
    "Plugin",
    "TlsFiles",
    "clientmetrics_plugin",
    "kafka_jars",
    "logged_since",
    "minimal_plugin",
    "plugin_jar",
    "run_tool",
]
