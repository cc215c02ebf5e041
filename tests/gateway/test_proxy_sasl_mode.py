"""``[proxy] sasl``: who authenticates clients in proxy mode, said explicitly."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.config_load import load_config
from tests.procs import BIN

PROXY = (
    '[gateway]\nlisten = "SASL_PLAINTEXT://127.0.0.1:9092"\nupstream = "127.0.0.1:9093"\n'
    'store = "sqlite"\n'
)
SASL = '[sasl]\nmechanisms = ["SCRAM-SHA-512"]\n'
SASL_CLUSTER = '[upstream]\nsecurity_protocol = "SASL_PLAINTEXT"\n'
LOGIN = 'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "gw"\nsasl_password = "gw-secret"\n'


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
        # The gateway's own login on each upstream link makes a SASL cluster possible.
        (PROXY + SASL + SASL_CLUSTER + LOGIN + '[proxy]\nsasl = "terminate"\n', True),
    ],
)
def test_the_mode_in_force(tmp_path: Path, text: str, terminates: bool) -> None:
    assert load(tmp_path, text).proxy_sasl_terminates is terminates


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            PROXY + SASL + SASL_CLUSTER + '[proxy]\nsasl = "terminate"\n',
            '[proxy] sasl = "terminate" towards a SASL cluster ([upstream] '
            "security_protocol is SASL_PLAINTEXT) needs the gateway's own login: [upstream] "
            "sasl_mechanism, sasl_username and sasl_password",
        ),
        (
            PROXY + SASL + SASL_CLUSTER,  # terminate implied by [sasl]
            '[proxy] sasl = "terminate" towards a SASL cluster',
        ),
        (PROXY + '[proxy]\ntelemetry = "both"\n', '[proxy] telemetry must be "gateway" or'),
        ('[proxy]\ntelemetry = "cluster"\n', "[proxy] needs proxy mode"),
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


def test_telemetry_mode(tmp_path: Path) -> None:
    assert load(tmp_path, PROXY).gateway_telemetry
    config = load(tmp_path, PROXY + '[proxy]\ntelemetry = "cluster"\n')
    assert (config.proxy_telemetry, config.gateway_telemetry) == ("cluster", False)
    # No subscriptions are kept then, so the topic store needs no login on a SASL cluster.
    topic_store = PROXY.replace('store = "sqlite"\n', "") + SASL_CLUSTER
    with pytest.raises(ConfigurationError, match="the topic store on a SASL upstream needs"):
        load(tmp_path, topic_store)
    assert not load(tmp_path, topic_store + '[proxy]\ntelemetry = "cluster"\n').gateway_telemetry


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
        'clientmetrics serve: [proxy] sasl = "terminate" towards a SASL cluster'
    )
