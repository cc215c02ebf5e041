"""Gateway configuration: TOML, environment and command line, validated where built."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from clientmetrics.cli import cli
from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import Address
from clientmetrics.gateway.config_load import load_config
from tests.procs import BIN


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gw.toml"
    path.write_text(text)
    return path


def test_defaults(tmp_path: Path) -> None:
    cfg = load_config(None, data_dir=tmp_path, environ={})
    assert cfg.listen == Address("127.0.0.1", 9092)
    assert cfg.telemetry.max_bytes == 1048576
    assert cfg.telemetry.accepted_compression_types == (4, 3, 1, 2)
    assert [e.name for e in cfg.exporters] == ["landing"]
    assert cfg.admin_listen is None


def test_toml_sections(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[gateway]
listen = "0.0.0.0:19092"
node_id = 7
admin_listen = "127.0.0.1:9464"

[telemetry]
"max.bytes" = 2048
accepted_compression_types = ["gzip", "zstd"]

[exporters.landing]
roll_seconds = 1.5
""",
    )
    cfg = load_config(path, data_dir=tmp_path, environ={})
    assert cfg.listen == Address("0.0.0.0", 19092)
    assert cfg.advertised == Address("127.0.0.1", 19092)
    assert cfg.node_id == 7
    assert cfg.admin_listen == Address("127.0.0.1", 9464)
    assert cfg.telemetry.max_bytes == 2048
    assert cfg.telemetry.accepted_compression_types == (1, 4)
    assert dict(cfg.exporters[0].options) == {"roll_seconds": 1.5}


def test_environment_then_command_line_override(tmp_path: Path) -> None:
    path = write(tmp_path, "[gateway]\nnode_id = 1\n[telemetry]\nmax_bytes = 10\n")
    env = {"CLIENTMETRICS_GATEWAY_NODE_ID": "2", "CLIENTMETRICS_TELEMETRY_MAX_BYTES": "4096"}
    assert load_config(path, data_dir=tmp_path, environ=env).node_id == 2
    assert load_config(path, data_dir=tmp_path, environ=env).telemetry.max_bytes == 4096
    cfg = load_config(path, data_dir=tmp_path, environ=env, overrides={"node_id": 3})
    assert cfg.node_id == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[gateway]\nlisten = 'nonsense'\n", "expected HOST:PORT"),
        ("[gateway]\nnode_id = 'x'\n", "node_id"),
        ("[gateway]\nnode_id = -1\n", "node_id"),
        ("[gateway]\nbogus = 1\n", "unknown settings: [gateway] bogus"),
        ("[telemetry]\nbogus = 1\n", "unknown settings: [telemetry] bogus"),
        ("[telemetry]\naccepted_compression_types = ['brotli']\n", "unknown compression type"),
        ("[telemetry]\nmax_bytes = 0\n", "max_bytes"),
        ("[nope]\n", "unknown settings: [nope]"),
        ("not toml [", "not valid TOML"),
        ("[gateway]\nsubscriptions_key_file = 'k'\n", "keeps subscriptions in SQLite"),
    ],
)
def test_bad_configuration_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_config(write(tmp_path, text), data_dir=tmp_path, environ={})


def test_missing_file_and_missing_data_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read config file"):
        load_config(tmp_path / "absent.toml", data_dir=tmp_path, environ={})
    with pytest.raises(ConfigurationError, match="data directory is required"):
        load_config(None, environ={})


def test_every_unknown_setting_is_reported_at_once(tmp_path: Path) -> None:
    text = (
        '[gateway]\nlisen = "127.0.0.1:1"\nnode_id = 1\n[telemetry]\nmax_byte = 3\n'
        '[tls]\ncertificate = "c"\nprivate_key = "k"\ncolour = 1\n[tsl]\n'
        '[sasl]\nmechanisms = ["OAUTHBEARER"]\n[sasl.oauthbearer]\njwks = "j"\nissuer = "i"\n'
        'audience = "a"\naudiance = "a"\n'
    )
    env = {"CLIENTMETRICS_GATEWAY_NODEID": "3", "CLIENTMETRICS_GATEWAY_NODE_ID": "2"}
    with pytest.raises(ConfigurationError) as info:
        load_config(write(tmp_path, text), data_dir=tmp_path, environ=env)
    assert str(info.value) == (
        "unknown settings: [tsl], [gateway] lisen, [telemetry] max_byte, [tls] colour, "
        "[sasl.oauthbearer] audiance, CLIENTMETRICS_GATEWAY_NODEID ([gateway] nodeid)"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"CLIENTMETRICS_GATEWAY_NODE_ID": "abc"},
            "[gateway] node_id: invalid value 'abc' (from CLIENTMETRICS_GATEWAY_NODE_ID)",
        ),
        (
            {"CLIENTMETRICS_TELEMETRY_MAX_BYTES": "0"},
            "(from CLIENTMETRICS_TELEMETRY_MAX_BYTES)",
        ),
        (
            {"CLIENTMETRICS_TLS_CERTIFICATE": "c", "CLIENTMETRICS_TLS_PRIVATE_KEY": "k",
             "CLIENTMETRICS_TLS_CLIENT_AUTH": "maybe"},
            "[tls] client_auth must be none, requested or required, got 'maybe' "
            "(from CLIENTMETRICS_TLS_CLIENT_AUTH)",
        ),
    ],
)  # fmt: skip
def test_a_bad_value_from_the_environment_names_the_variable(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_config(None, data_dir=tmp_path, environ=env)
    assert str(info.value).endswith(message)


def test_the_command_line_wins_and_is_not_blamed_on_the_environment(tmp_path: Path) -> None:
    env = {"CLIENTMETRICS_GATEWAY_NODE_ID": "7"}
    with pytest.raises(ConfigurationError) as info:
        load_config(None, data_dir=tmp_path, environ=env, overrides={"node_id": -1})
    assert "CLIENTMETRICS" not in str(info.value)


def test_config_errors_are_one_line_and_exit_2_wherever_found(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0"]
    # found while loading (in process: no gateway starts)
    bad = write(tmp_path, "[gateway]\nbogus = 1\n")
    loaded = CliRunner().invoke(cli, ["serve", "--config", str(bad), *args])
    assert (loaded.exit_code, loaded.stdout, loaded.stderr.splitlines()) == (
        2,
        "",
        ["clientmetrics serve: unknown settings: [gateway] bogus"],
    )
    # found at start: the JWKS file cannot be read
    (tmp_path / "oauth.toml").write_text(
        '[sasl]\nmechanisms = ["OAUTHBEARER"]\n[sasl.oauthbearer]\njwks = "absent.json"\n'
        'issuer = "i"\naudience = "a"\n'
    )
    started = subprocess.run(
        [str(BIN / "clientmetrics"), "serve", "--config", "oauth.toml", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (started.returncode, started.stdout, started.stderr.splitlines()) == (
        2,
        "",
        ["clientmetrics serve: cannot read JWKS file absent.json: No such file or directory"],
    )


def test_a_subscription_key_file_others_may_read_stops_the_start(tmp_path: Path) -> None:
    key = tmp_path / "subscriptions.key"
    key.write_text("k" * 64 + "\n")
    key.chmod(0o644)
    (tmp_path / "g.toml").write_text(
        f"[gateway]\nsubscriptions_bootstrap_servers = '127.0.0.1:1'\n"
        f"subscriptions_key_file = '{key}'\n"
    )
    started = subprocess.run(
        [str(BIN / "clientmetrics"), "serve", "--config", "g.toml", "--data-dir", "d",
         "--listen", "127.0.0.1:0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (started.returncode, started.stderr.splitlines()) == (
        2,
        [f"clientmetrics serve: subscriptions_key_file {key} is readable by others "
         "(mode 644); chmod 600 it"],
    )  # fmt: skip
