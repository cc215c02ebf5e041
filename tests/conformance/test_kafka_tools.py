"""Kafka 4.4.0's own tools, and ours, against Apache Kafka and against the gateway.

The tools reach both servers on SASL_SSL (SCRAM-SHA-512, see conftest), so every run
goes through ``--command-config``: the very file the broker's launcher writes works for
the gateway too. ``kafka-client-metrics.sh`` (``ClientMetricsCommand``)
and ``kafka-configs.sh --entity-type client-metrics`` (``ConfigCommand``) run in one JVM
(``peers.kafka.tools.ToolSession``: a JVM start costs ~2 s here, a run in it ~0.1 s).

Kafka's tools must print the same against both servers: exit code, stdout and stderr
(the bootstrap address aside), but where a row of docs/kafka-differences.md says
otherwise. Our ``kafka-client-metrics`` must print what Kafka's prints, against either
server: the same exit code and stdout, and the same stderr once Kafka's Java stack
traces and log lines (which ours does not print) and our two added options in the
usage table are set aside.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from peers.kafka import KafkaBroker
from peers.kafka.tools import ToolSession

from clientmetrics.admin.cli import run as our_tool
from tests.conformance.conftest import ADMIN_PASSWORD
from tests.conformance.pair import documented_differences
from tests.procs import MIN_DEADLINE_S

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

Result = tuple[int, str, str]


class Runner:
    """Runs one tool invocation against both servers, Kafka's and ours."""

    def __init__(self, tools: ToolSession, servers: dict[str, str], config: str | None) -> None:
        self.tools = tools
        self.servers = servers
        #: The ``--command-config`` file (SASL_SSL), or None (PLAINTEXT).
        self.config = config

    def args(self, server: str, args: tuple[str, ...], bootstrap: bool = True) -> list[str]:
        if not bootstrap:
            return list(args)
        config = ["--command-config", self.config] if self.config else []
        return ["--bootstrap-server", self.servers[server], *config, *args]

    def kafkas(self, tool: str, args: tuple[str, ...], bootstrap: bool = True) -> dict[str, Result]:
        out = {}
        for server, address in self.servers.items():
            done = self.tools.run(tool, *self.args(server, args, bootstrap))
            # The address and the admin client's sequence number are the run's own.
            err = _ADMIN_ID.sub("adminclient-N", done.stderr.replace(address, "BOOTSTRAP"))
            out[server] = (done.returncode, done.stdout, err)
        return out

    def ours(self, args: tuple[str, ...], bootstrap: bool = True) -> dict[str, Result]:
        out = {}
        for server in self.servers:
            stdout, stderr = io.StringIO(), io.StringIO()
            code = our_tool(self.args(server, args, bootstrap), stdout, stderr)
            out[server] = (code, stdout.getvalue(), stderr.getvalue())
        return out

    def settle(self, name: str, tool: str = "client-metrics") -> None:
        """Kafka applies a change through its metadata log: wait until it describes
        ``name`` as the gateway (which applies it at once) does."""
        args = ("--describe", "--name", name)
        if tool == "configs":
            args = ("--describe", "--entity-type", "client-metrics", "--entity-name", name)
        deadline = time.monotonic() + MIN_DEADLINE_S
        while (seen := self.kafkas(tool, args))["kafka"] != seen["gateway"]:
            assert time.monotonic() < deadline, f"Kafka did not settle on {name}: {seen}"
            time.sleep(0.1)


_ADMIN_ID = re.compile(r"adminclient-\d+")
_JAVA_TRACE = re.compile(
    r"^[\w$.]+(?:Exception|Error)(?:: .*)?\n(?:(?:\tat |\t\.\.\. |Caused by: ).*\n)*\n?", re.M
)
_JAVA_LOG = re.compile(r"^ERROR [\s\S]*?\(org\.apache\.kafka\.tools\.\w+\)\n", re.M)
_OUR_OPTIONS = re.compile(r"^--(?:output|timeout) .*\n(?: {39}.*\n)*", re.M)


def without_java(stderr: str) -> str:
    """Kafka's stderr without what only a JVM prints: stack traces and log lines."""
    return _JAVA_TRACE.sub("", _JAVA_LOG.sub("", stderr))


def without_ours(stderr: str) -> str:
    """Our stderr without the two options the usage table adds to Kafka's."""
    return _OUR_OPTIONS.sub("", stderr)


CM = "client-metrics"
ORDERS = "client_id=orders-.*,client_software_name=apache-kafka-java"
#: (arguments, the row they differ by or "", the resource they change or "").
Steps = tuple[tuple[tuple[str, ...], str, str], ...]
CLIENT_METRICS_STEPS: Steps = (
    (("--list",), "", ""),
    (("--alter", "--name", "orders", "--metrics", "org.apache.kafka.producer.,"
      "org.apache.kafka.consumer.", "--interval", "60000", "--match", ORDERS), "", "orders"),
    (("--describe", "--name", "orders"), "", ""),
    (("--alter", "--name", "everything", "--metrics", "*"), "", "everything"),
    (("--describe",), "", ""),
    (("--list",), "", ""),
    (("--alter", "--name", "orders", "--interval", "", "--match", ""), "", "orders"),
    (("--describe", "--name", "orders"), "", ""),
    (("--delete", "--name", "everything"), "", "everything"),
    (("--describe", "--name", "everything"), "", ""),
    (("--delete", "--name", "never-made"), "", ""),
    (("--alter", "--name", "orders", "--interval", "10"), "", ""),
    (("--alter", "--name", "orders", "--interval", "soon"), "", ""),
    (("--alter", "--name", "orders", "--match", "foo"), "", ""),
    (("--alter", "--name", "orders", "--metrics", ","), "", ""),
    (("--alter",), "", ""),
    (("--delete",), "", ""),
    (("--list", "--name", "orders"), "", ""),
    ((), "", ""),
    (("--list", "--verbose"), "", ""),
    (("--alter", "--name", "equals", "--match", "client_id=a=b"), "match-equals", "equals"),
    (("--delete", "--name", "equals"), "", "equals"),
    (("--alter", "--name", "orders", "--match", "client_id=a{1,3}"), "re2", ""),
    (("--list",), "", ""),
)  # fmt: skip
CONFIGS_STEPS: Steps = (
    (("--describe", "--entity-type", "client-metrics"), "", ""),
    (("--alter", "--entity-type", "client-metrics", "--entity-name", "cfg",
      "--add-config", "interval.ms=1000,metrics=[a.,b.]"), "", "cfg"),
    (("--describe", "--client-metrics", "cfg"), "", ""),
    (("--describe", "--entity-type", "client-metrics", "--entity-name", "cfg", "--all"), "", ""),
    (("--alter", "--entity-type", "client-metrics", "--entity-name", "cfg",
      "--delete-config", "interval.ms"), "", "cfg"),
    (("--describe", "--entity-type", "client-metrics", "--entity-name", "cfg"), "", ""),
    (("--alter", "--entity-type", "client-metrics", "--entity-name", "cfg",
      "--add-config", "bogus=1"), "", ""),
    (("--alter", "--entity-type", "client-metrics", "--entity-name", "cfg",
      "--add-config", "interval.ms=10"), "", ""),
    (("--alter", "--entity-type", "client-metrics", "--entity-default",
      "--add-config", "metrics=[x.]"), "", ""),
    (("--describe", "--entity-name", "cfg"), "", ""),
    (("--alter", "--entity-type", "client-metrics", "--entity-name", "cfg",
      "--delete-config", "metrics"), "", "cfg"),
    (("--describe", "--entity-type", "client-metrics"), "", ""),
)  # fmt: skip
#: Over SASL_SSL, with --command-config: each action once, and a refused change.
SECURE_CLIENT_METRICS_STEPS: Steps = (
    (
        ("--alter", "--name", "secure", "--metrics", "org.apache.kafka.", "--interval", "5000"),
        "",
        "secure",
    ),
    (("--describe", "--name", "secure"), "", ""),
    (("--alter", "--name", "secure", "--interval", "10"), "", ""),
    (("--delete", "--name", "secure"), "", ""),
)
SECURE_CONFIGS_STEPS: Steps = (
    (("--describe", "--entity-type", "client-metrics", "--entity-name", "orders"), "", ""),
)  # fmt: skip


def compare(runner: Runner, tool: str, steps: Steps) -> None:
    """Each step: Kafka's tool alike against both servers (or differing by its row),
    and ours (for client-metrics) printing what Kafka's printed, against each."""
    for args, row, changes in steps:
        what = f"{tool} {' '.join(args)}"
        theirs = runner.kafkas(tool, args)
        if row:
            assert row in documented_differences(), row
            assert theirs["kafka"] != theirs["gateway"], f"{what}: no longer differs"
        else:
            assert theirs["kafka"] == theirs["gateway"], what
        if tool == CM:
            for server, (code, out, err) in runner.ours(args).items():
                k_code, k_out, k_err = theirs[server]
                assert (code, out) == (k_code, k_out), f"ours, {server}: {what}"
                assert without_ours(err) == without_java(k_err), f"ours, {server}: {what}"
        if changes and not row:
            runner.settle(changes, tool)


def test_kafkas_tools_and_ours_print_alike_against_kafka_and_the_gateway(
    tools: ToolSession, ports: dict[str, int]
) -> None:
    runner = Runner(tools, {name: f"127.0.0.1:{port}" for name, port in ports.items()}, None)
    compare(runner, CM, CLIENT_METRICS_STEPS)
    compare(runner, "configs", CONFIGS_STEPS)
    # Without --bootstrap-server (no connection is made).
    for args in (("--list",), ()):
        theirs = runner.kafkas(CM, args, bootstrap=False)
        assert theirs["kafka"] == theirs["gateway"]
        ours = runner.ours(args, bootstrap=False)["kafka"]
        assert (ours[0], ours[1], without_ours(ours[2])) == (
            theirs["kafka"][0], theirs["kafka"][1], without_java(theirs["kafka"][2]),
        )  # fmt: skip


def test_the_tools_alike_over_sasl_ssl_with_command_config(
    tools: ToolSession, kafka: KafkaBroker, secure: dict[str, str]
) -> None:
    runner = Runner(tools, secure, str(kafka.command_config()))
    compare(runner, CM, SECURE_CLIENT_METRICS_STEPS)
    compare(runner, "configs", SECURE_CONFIGS_STEPS)
    # A wrong password.
    wrong = kafka.workdir / "wrong-password.properties"
    wrong.write_text(Path(runner.config or "").read_text().replace(ADMIN_PASSWORD, "wrong"))
    compare(Runner(tools, secure, str(wrong)), CM, (((("--list",), "", "")),))


def test_generated_names_are_kafkas_uuids_on_both(
    tools: ToolSession, ports: dict[str, int]
) -> None:
    runner = Runner(tools, {name: f"127.0.0.1:{port}" for name, port in ports.items()}, None)
    args = ("--alter", "--generate-name", "--metrics", "org.apache.kafka.")
    made = {**{f"kafka tool, {s}": r for s, r in runner.kafkas(CM, args).items()},
            **{f"ours, {s}": r for s, r in runner.ours(args).items()}}  # fmt: skip
    for who, (code, out, err) in made.items():
        found = re.fullmatch(r"Altered client metrics config for ([\w-]{22})\.\n", out)
        assert (code, err, found is not None) == (0, "", True), who
        server = who.rsplit(", ", 1)[1]
        assert found is not None
        name = found.group(1)
        deleted = tools.run(CM, *runner.args(server, ("--delete", "--name", name)))
        assert (deleted.returncode, deleted.stdout) == (
            0, f"Deleted client metrics config for {name}.\n"
        ), who  # fmt: skip
