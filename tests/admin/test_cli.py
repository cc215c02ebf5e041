"""The console command as a subprocess against a real gateway: output, stderr, exit codes."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.admin import AdminConfig, AdminConnectionError, AsyncAdmin
from clientmetrics.admin.options import HEADLINE, help_text
from tests.admin.tool import run_tool, tool
from tests.procs import GatewayProcess, free_port, http_port

pytestmark = pytest.mark.integration

PREFIX = "Error while executing client metrics command : "
ONE_ACTION = "Command must include exactly one action: --alter, --delete, --describe or --list."


def test_alter_describe_list_delete_round_trip(gateway: GatewayProcess) -> None:
    code, out, err = tool(
        gateway,
        "--alter",
        "--name",
        "rt",
        "--metrics",
        "org.apache.kafka.producer.,org.apache.kafka.consumer.",
        "--interval",
        "60000",
        "--match",
        "client_id=app-.*,client_software_name=librdkafka",
    )
    assert (code, out, err) == (0, "Altered client metrics config for rt.\n", "")
    code, out, err = tool(gateway, "--describe", "--name", "rt")
    assert (code, err) == (0, "")
    assert out == (
        "Client metrics configs for rt are:\n"
        "  interval.ms=60000\n"
        "  match=client_id=app-.*,client_software_name=librdkafka\n"
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.\n"
    )
    assert "rt" in tool(gateway, "--list")[1].splitlines()
    assert tool(gateway, "--delete", "--name", "rt") == (
        0,
        "Deleted client metrics config for rt.\n",
        "",
    )
    assert "rt" not in tool(gateway, "--list")[1].splitlines()


def test_an_empty_option_value_deletes_that_key_only(gateway: GatewayProcess) -> None:
    tool(gateway, "--alter", "--name", "partial", "--metrics", "a.", "--interval", "1000")
    assert tool(gateway, "--alter", "--name", "partial", "--metrics", "")[0] == 0
    out = tool(gateway, "--describe", "--name", "partial")[1]
    # The deleted key is back at its default; the other key is untouched.
    assert out.splitlines()[1:] == ["  interval.ms=1000", "  match=", "  metrics="]


def test_list_and_describe_without_name_cover_every_subscription(
    fresh_gateway: GatewayProcess,
) -> None:
    assert tool(fresh_gateway, "--list") == (0, "\n", "")  # Kafka prints an empty line
    for name, interval in (("one", "1000"), ("two", "2000")):
        tool(fresh_gateway, "--alter", "--name", name, "--interval", interval)
    assert tool(fresh_gateway, "--list") == (0, "one\ntwo\n", "")
    code, out, _ = tool(fresh_gateway, "--describe")
    assert code == 0
    assert out == (
        "Client metrics configs for one are:\n  interval.ms=1000\n  match=\n  metrics=\n"
        "Client metrics configs for two are:\n  interval.ms=2000\n  match=\n  metrics=\n"
    )
    listed = json.loads(tool(fresh_gateway, "--list", "--output", "json")[1])
    assert listed == {"resources": ["one", "two"]}
    described = json.loads(tool(fresh_gateway, "--describe", "--output", "json")[1])
    first = described["resources"][0]
    assert first["name"] == "one"
    assert {"name": "interval.ms", "value": "1000", "source": "CLIENT_METRICS_CONFIG"} in first[
        "configs"
    ]
    assert {"name": "match", "value": "", "source": "DEFAULT_CONFIG"} in first["configs"]


def test_generate_name_creates_a_kafka_style_uuid_name(gateway: GatewayProcess) -> None:
    code, out, _ = tool(gateway, "--alter", "--generate-name", "--metrics", "org.apache.kafka.")
    assert code == 0
    found = re.fullmatch(r"Altered client metrics config for ([A-Za-z0-9_-]{22})\.\n", out)
    assert found is not None
    assert found.group(1) in tool(gateway, "--list")[1].splitlines()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--name", "", "--interval", "1000"],
            "Subscription name can't be empty",
        ),
        (
            ["--name", "v", "--interval", "10"],
            "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            ["--name", "v", "--interval", "3600001"],
            "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 "
            "(1 hour)",
        ),
        (["--name", "v", "--match", "10"], "Illegal client matching pattern: 10"),
        (
            ["--name", "v", "--match", "client_id="],
            "Illegal client matching pattern: client_id=",
        ),
        (
            ["--name", "v", "--match", "user=bob"],
            "Illegal client matching pattern: user=bob",
        ),
    ],
)
def test_validation_errors_are_kafkas_line_on_stdout(
    gateway: GatewayProcess, args: list[str], message: str
) -> None:
    assert tool(gateway, "--alter", *args) == (1, PREFIX + message + "\n", "")
    assert "v" not in tool(gateway, "--list")[1].splitlines()


USAGE_ERRORS = [
    ([], HEADLINE),
    (["--help"], HEADLINE),
    (["--bootstrap-server", "h:1"], ONE_ACTION),
    (["--bootstrap-server", "h:1", "--list", "--describe"], ONE_ACTION),
    (
        ["--bootstrap-server", "h:1", "--delete", "--name", "n", "--generate-name"],
        'Option "[delete]" can\'t be used with option "[generate-name]"',
    ),
    (
        ["--bootstrap-server", "h:1", "--delete", "--name", "n", "--interval", "1"],
        'Option "[delete]" can\'t be used with option "[interval]"',
    ),
    (
        ["--bootstrap-server", "h:1", "--describe", "--match", "client_id=x"],
        'Option "[describe]" can\'t be used with option "[match]"',
    ),
    (
        ["--bootstrap-server", "h:1", "--describe", "--metrics", "m"],
        'Option "[describe]" can\'t be used with option "[metrics]"',
    ),
    (
        ["--bootstrap-server", "h:1", "--list", "--name", "n"],
        'Option "[list]" can\'t be used with option "[name]"',
    ),
    (
        ["--bootstrap-server", "h:1", "--alter", "--name", "n", "--output", "json"],
        'Option "[alter]" can\'t be used with option "[output]"',
    ),
    (
        ["--bootstrap-server", "h:1", "--list", "--frobnicate"],
        "frobnicate is not a recognized option",
    ),
    (["--list", "--bootstrap-server"], "Option bootstrap-server requires an argument"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_print_the_message_and_usage_and_exit_1(args: list[str], message: str) -> None:
    result = run_tool(*args)
    assert (result.code, result.out) == (1, "")
    assert result.err == message + "\n" + help_text()


PLAIN_ERRORS = [
    (["--list"], "--bootstrap-server must be specified."),
    (
        ["--bootstrap-server", "h:1", "--alter"],
        "One of --name or --generate-name must be specified with --alter.",
    ),
    (
        ["--bootstrap-server", "h:1", "--alter", "--name", "n", "--generate-name"],
        "One of --name or --generate-name must be specified with --alter.",
    ),
    (
        ["--bootstrap-server", "h:1", "--delete"],
        "A client metrics resource name must be specified with --delete.",
    ),
    # Java's Integer.parseInt fails in checkArgs, before anything is sent (Kafka 4.4).
    (
        ["--bootstrap-server", "h:1", "--alter", "--name", "v", "--interval", "abc"],
        "Invalid interval value. Enter an integer, or leave empty to reset.",
    ),
    (
        ["--bootstrap-server", "h:1", "--alter", "--name", "v", "--interval", "2147483648"],
        "Invalid interval value. Enter an integer, or leave empty to reset.",
    ),
    (["--bootstrap-server", "nohost", "--list"], "Invalid url in bootstrap.servers: nohost"),
    (
        ["--bootstrap-server", "h:1", "--list", "--command-config", "/no/such/file"],
        "/no/such/file (No such file or directory)",
    ),
]


@pytest.mark.parametrize(("args", "message"), PLAIN_ERRORS)
def test_argument_errors_print_one_line_and_exit_1(args: list[str], message: str) -> None:
    result = run_tool(*args)
    assert (result.code, result.out, result.err) == (1, "", message + "\n")


def test_version_prints_the_version_and_exits_0() -> None:
    result = run_tool("--version")
    assert result.code == 0
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n", result.out)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n",
            "sasl.mechanism=SCRAM-SHA-512 needs a username and password: set sasl.jaas.config "
            "(ScramLoginModule) or sasl.username and sasl.password",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\n",
            "sasl.mechanism=GSSAPI is not supported by this tool; "
            "supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n",
            "sasl.mechanism=PLAIN needs a username and password: set sasl.jaas.config "
            "(PlainLoginModule) or sasl.username and sasl.password",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/x.jks\n",
            "ssl.truststore.type=JKS is not supported; "
            "use ssl.truststore.type=PEM with a PEM ssl.truststore.location",
        ),
        (
            "security.protocol=TLS\n",
            "Invalid value TLS for configuration security.protocol: String must be one of: "
            "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
    ],
)
def test_unsupported_transport_settings_are_one_clear_line(
    tmp_path: Path, props: str, message: str
) -> None:
    path = tmp_path / "admin.properties"
    path.write_text(props)
    result = run_tool("--bootstrap-server", "h:1", "--list", "--command-config", str(path))
    assert (result.code, result.out, result.err) == (1, "", message + "\n")


@pytest.fixture
def closed_port() -> int:
    return free_port()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A socket that accepts connections (in the backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_connection_refused_names_the_address(closed_port: int) -> None:
    started = time.monotonic()
    result = run_tool(
        "--bootstrap-server", f"127.0.0.1:{closed_port}", "--list", "--timeout", "60000"
    )
    # A refusal ends it at once, not after --timeout; the slack is the interpreter's start
    # on a busy machine (seconds at load 13-18).
    assert time.monotonic() - started < 30
    assert (result.code, result.err) == (1, "")
    assert result.out == (
        f"{PREFIX}Could not connect to bootstrap server 127.0.0.1:{closed_port} "
        "(Connection refused)\n"
    )


def test_an_unusable_host_name_is_reported_not_raised() -> None:
    result = run_tool("--bootstrap-server", "a..b:9092", "--list", "--timeout", "2000")
    assert (result.code, result.err) == (1, "")
    assert result.out == (
        f"{PREFIX}Could not connect to bootstrap server a..b:9092 (invalid host name)\n"
    )


def test_a_server_that_never_answers_times_out_within_the_timeout(silent_server: int) -> None:
    started = time.monotonic()
    result = run_tool(
        "--bootstrap-server", f"127.0.0.1:{silent_server}", "--describe", "--timeout", "1000"
    )
    elapsed = time.monotonic() - started
    # Interpreter start-up is included (seconds on a busy machine), so the bound only
    # tells --timeout from the default 30 s; test_a_silent_socket_times_out_on_time, in
    # process, tells it from anything later.
    assert 1.0 <= elapsed < 25.0
    assert (result.code, result.err) == (1, "")
    assert result.out == (
        f"{PREFIX}Could not connect to bootstrap server 127.0.0.1:{silent_server} "
        "(timed out after 1000 ms waiting for the ApiVersions response)\n"
    )


def test_an_http_port_is_one_line_at_once() -> None:
    # The default --timeout (30 s) is not waited out: the HTTP server's answer shows at once
    # that the port does not speak Kafka (a subprocess timeout of 20 s fails the test).
    with http_port() as port:
        result = run_tool("--bootstrap-server", f"127.0.0.1:{port}", "--list", timeout=20)
    assert (result.code, result.err) == (1, "")
    assert result.out == (
        f"{PREFIX}Could not connect to bootstrap server 127.0.0.1:{port} "
        "(not a Kafka broker: it answered '<!DOCTYPE HTML>')\n"
    )


async def test_a_silent_socket_times_out_on_time(silent_server: int) -> None:
    config = AdminConfig.from_properties(f"127.0.0.1:{silent_server}", timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(AdminConnectionError) as info:
        async with AsyncAdmin(config):
            pass
    # The bound says it gave up at its own timeout, not the default 30 s; it leaves room
    # for a busy machine's scheduling.
    assert 0.5 <= time.monotonic() - started < 15
    # The reason names the time given to this server, not what was left after connecting.
    assert info.value.failures == (
        (
            f"127.0.0.1:{silent_server}",
            "timed out after 500 ms waiting for the ApiVersions response",
        ),
    )
