"""Authorization with real principals: client certificates on an SSL listener.

``kafka-client-metrics --command-config`` as the super user alters; as a user
without ALTER_CONFIGS it gets CLUSTER_AUTHORIZATION_FAILED and exits 1; after an
ACL is added to the TOML file and the gateway gets SIGHUP, the same user alters.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.admin.tool import run_tool
from tests.procs import GatewayProcess, wait_for
from tests.tlsfiles import TestCA

pytestmark = pytest.mark.integration

REFUSED = "Error while executing client metrics command : Cluster authorization failed.\n"


def config(ca: TestCA, acls: str) -> str:
    return f"""
[tls]
certificate = "{ca.root / "server.crt"}"
private_key = "{ca.root / "server.key"}"
ca = "{ca.ca}"
client_auth = "required"
principal_mapping_rules = "RULE:^CN=([^,]+),OU=Test,O=Acme$/$1/L"

[authorization]
super_users = ["User:admin"]
acls = [{acls}]
"""


def properties(tmp_path: Path, ca: TestCA, user: str) -> Path:
    pem = ca.issue(user, common_name=user.capitalize())
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SSL\n"
        f"ssl.ca.location={ca.ca}\n"
        f"ssl.certificate.location={pem.certificate}\n"
        f"ssl.key.location={pem.private_key}\n"
    )
    return path


def test_super_user_acl_and_reload(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    gw = GatewayProcess(
        tmp_path / "data", config(ca, ""), extra_args=("--listen", "SSL://127.0.0.1:0")
    ).start()
    try:
        listeners = gw.events("gateway_started")[0]["listeners"]
        assert isinstance(listeners, dict)
        ssl_bootstrap = str(listeners["SSL"]).replace("0.0.0.0", "127.0.0.1")
        admin, bob = properties(tmp_path, ca, "admin"), properties(tmp_path, ca, "bob")

        def tool(props: Path, *args: str) -> tuple[int, str]:
            result = run_tool(
                "--bootstrap-server", ssl_bootstrap, "--command-config", str(props), *args
            )
            return result.code, result.out

        alter = ("--alter", "--name", "fleet", "--metrics", "org.apache.kafka.")
        assert tool(admin, *alter) == (0, "Altered client metrics config for fleet.\n")
        assert tool(bob, *alter) == (1, REFUSED)
        assert tool(bob, "--describe", "--name", "fleet") == (1, REFUSED)

        grant = '{principal = "User:bob", operation = "ALTER_CONFIGS", permission = "allow"}'
        (gw.data_dir / "gateway.toml").write_text(config(ca, grant))
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: gw.events("authorization_reloaded"), 10, what="the reload")
        assert tool(bob, *alter) == (0, "Altered client metrics config for fleet.\n")
        code, out = tool(bob, "--describe", "--name", "fleet")
        assert (code, out.splitlines()[3]) == (0, "  metrics=org.apache.kafka.")
    finally:
        assert gw.stop() == 0
