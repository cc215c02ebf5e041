"""``[proxy] sasl``: who authenticates clients in proxy mode, said explicitly."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import GatewayConfig, load_config
from tests.procs import BIN

PROXY = (
    '[gateway]\nlisten = "SASL_PLAINTEXT://127.0.0.1:9092"\nupstream = "127.0.0.1:9093"\n'
    'store = "sqlite"\n'
)
SASL = '[sasl]\nmechanisms = ["SCRAM-SHA-512"]\n'
SASL_CLUSTER = '[upstream]\nsecurity_protocol = "SASL_PLAINTEXT"\n'


def load(tmp_path: Path, text: str) -> GatewayConfig:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return load_config(path, data_dir=tmp_path, environ={})


@pytest.mark.parametrize(
    ("text", "terminates"),
    [
        (PROXY, False),  # no [sasl]: the cluster authenticates (the default)
        (PROXY + '[proxy]\nsasl = "passthrough"\n', False),
        (PROXY + SASL_CLUSTER + '[proxy]\nsasl = "passthrough"\n', False),
        (PROXY + SASL, True),  # [sasl] alone still means terminate
        (PROXY + SASL + '[proxy]\nsasl = "terminate"\n', True),
    ],
)
def test_the_mode_in_force(tmp_path: Path, text: str, terminates: bool) -> None:
    assert load(tmp_path, text).proxy_sasl_terminates is terminates


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            PROXY + SASL + SASL_CLUSTER + '[proxy]\nsasl = "terminate"\n',
            '[proxy] sasl = "terminate" needs a cluster without SASL ([upstream] '
            'security_protocol is SASL_PLAINTEXT); use sasl = "passthrough"',
        ),
        (
            PROXY + SASL + SASL_CLUSTER,  # terminate implied by [sasl]
            '[proxy] sasl = "terminate" needs a cluster without SASL',
        ),
        (
            PROXY + '[proxy]\nsasl = "terminate"\n',
            '[proxy] sasl = "terminate" needs a [sasl] section naming the mechanisms',
        ),
        (
            PROXY + SASL + '[proxy]\nsasl = "passthrough"\n',
            '[proxy] sasl = "passthrough" leaves client authentication to the cluster; '
            "remove [sasl]",
        ),
        (PROXY + '[proxy]\nsasl = "inspect"\n', '[proxy] sasl must be "passthrough" or'),
        (PROXY + "[proxy]\nmode = 1\n", "unknown settings: [proxy] mode"),
        (SASL + '[proxy]\nsasl = "terminate"\n', "[proxy] needs proxy mode"),
    ],
)
def test_contradictions_are_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load(tmp_path, text)


def test_serve_refuses_terminate_towards_a_sasl_cluster_with_one_error(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(SASL + SASL_CLUSTER + '[proxy]\nsasl = "terminate"\n')
    result = subprocess.run(
        [
            *(str(BIN / "clientmetrics"), "serve", "--data-dir", str(tmp_path)),
            *("--config", str(config), "--store", "sqlite", "--upstream", "127.0.0.1:9"),
            *("--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--broker-port-base", "20000"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2  # as for every bad configuration
    (error,) = result.stderr.splitlines()
    assert error.startswith(
        'clientmetrics serve: [proxy] sasl = "terminate" needs a cluster without SASL'
    )
