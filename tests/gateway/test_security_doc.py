"""docs/security.md: its TOML loads, its command serves TLS as the page says."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from clientmetrics.gateway.config_load import load_config
from clientmetrics.security.principal import PrincipalMapper
from tests.gateway.test_tls import api_versions_over_tls
from tests.procs import MIN_DEADLINE_S, free_port, stop_process
from tests.tlsfiles import TestCA

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BLOCK = re.compile(r"<!-- security-doc: (?P<tag>[^>]*?) -->\s*\n```\w*\n(?P<body>.*?)\n```", re.S)
BIN = Path(sys.executable).parent


def blocks() -> dict[str, str]:
    return {m["tag"].strip(): m["body"] for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def test_documented_proxy_settings_load_as_described(tmp_path: Path) -> None:
    path = tmp_path / "proxy.toml"
    path.write_text(blocks()["file=proxy.toml"])
    cfg = load_config(path, data_dir=tmp_path, environ={})
    assert [str(listener) for listener in cfg.listeners] == ["SSL://0.0.0.0:9092"]
    assert cfg.upstream_security.librdkafka() == {
        "security.protocol": "ssl",
        "ssl.ca.location": "pki/cluster-ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
    }


def test_documented_tls_gateway_serves_mtls(tmp_path: Path) -> None:
    found = blocks()
    plain, tls = free_port(), free_port()
    toml = found["file=gateway.toml"].replace(":9092", f":{plain}").replace(":9093", f":{tls}")
    (tmp_path / "gateway.toml").write_text(toml)
    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    client = ca.issue("client", common_name="Client1")
    rules = load_config(tmp_path / "gateway.toml", data_dir=tmp_path, environ={}).tls
    assert rules is not None
    # the page's example: this client is User:client1, anyone else keeps the subject
    assert PrincipalMapper(rules.principal_mapping_rules).principal(
        "CN=Client1,OU=Test,O=Acme"
    ) == ("User:client1")
    args = shlex.split(found["serve"])
    assert args[0] == "clientmetrics"
    proc = subprocess.Popen(
        [str(BIN / args[0]), *args[1:], "--log-format", "json"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + MIN_DEADLINE_S
        while time.monotonic() < deadline:
            line = json.loads(proc.stderr.readline() or b"{}")
            if line.get("event") == "gateway_started":
                break
        else:
            pytest.fail("the documented command did not start")
        # a client certificate is required: with one, answered; without, refused
        response = api_versions_over_tls(tls, ca.client_context(client))
        assert response is not None
        assert api_versions_over_tls(tls, ca.client_context()) is None
        # a librdkafka client bootstrapping on the SSL port is told the SSL port
        admin = AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{tls}",
                "security.protocol": "ssl",
                "ssl.ca.location": str(ca.ca),
                "ssl.certificate.location": str(client.certificate),
                "ssl.key.location": str(client.private_key),
                "log_level": 3,
            }
        )
        brokers = admin.list_topics(timeout=MIN_DEADLINE_S).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", tls)]
    finally:
        assert stop_process(proc, 20) == 0
