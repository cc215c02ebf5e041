"""[sasl] from TOML to a working SaslServer: JWKS from a file or a URL, credentials file."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config_load import load_config
from clientmetrics.gateway.sasl_setup import load_jwks, sasl_server_for
from clientmetrics.gateway.users_cli import users
from clientmetrics.security import Authenticated
from tests.security.jwts import AUDIENCE, ISSUER, Signer, client_first

NOW_S = 1_900_000_000


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer()


@pytest.fixture
def jwks_url(signer: Signer) -> Iterator[str]:
    body = json.dumps(signer.jwks()).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/jwks.json":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def config_file(tmp_path: Path, jwks: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"""
[sasl]
mechanisms = ["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"]

[sasl.oauthbearer]
jwks = "{jwks}"
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
"""
    )
    return path


@pytest.mark.parametrize("where", ["file", "url"])
def test_toml_to_mechanisms(tmp_path: Path, signer: Signer, jwks_url: str, where: str) -> None:
    jwks_file = tmp_path / "jwks.json"
    jwks_file.write_text(json.dumps(signer.jwks()))
    source = str(jwks_file) if where == "file" else f"{jwks_url}/jwks.json"
    config = load_config(config_file(tmp_path, source), data_dir=tmp_path)
    from click.testing import CliRunner

    assert (
        CliRunner()
        .invoke(users, ["add", "ann", "--data-dir", str(tmp_path), "--password", "pw1"])
        .exit_code
        == 0
    )
    server = sasl_server_for(config)
    assert server is not None
    assert server.mechanisms == ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER")
    exchange = server.start("OAUTHBEARER")
    exchange.respond(client_first(signer.token(NOW_S, sub="svc")), now_ms=NOW_S * 1000)
    assert exchange.outcome == Authenticated("User:svc", expires_at_ms=(NOW_S + 600) * 1000)
    exchange = server.start("PLAIN")
    exchange.respond(b"\0ann\0pw1", now_ms=0)
    assert exchange.outcome == Authenticated("User:ann")


def test_no_sasl_section_no_server(tmp_path: Path) -> None:
    assert sasl_server_for(load_config(None, data_dir=tmp_path)) is None


def test_jwks_errors_are_clear(tmp_path: Path, jwks_url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot read JWKS file .*missing\.json"):
        load_jwks(str(tmp_path / "missing.json"))
    with pytest.raises(ConfigurationError, match="HTTP 404"):
        load_jwks(f"{jwks_url}/nope")
    (tmp_path / "bad.json").write_text('{"no": "keys"}')
    with pytest.raises(ConfigurationError, match="has no 'keys' list"):
        load_jwks(str(tmp_path / "bad.json"))
    config = load_config(config_file(tmp_path, str(tmp_path / "missing.json")), data_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="cannot read JWKS file"):
        sasl_server_for(config)


def test_config_sections_are_validated_at_load(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[sasl]\nmechanisms = ["GSSAPI"]\n')
    with pytest.raises(ConfigurationError, match="unsupported mechanism"):
        load_config(path, data_dir=tmp_path)
    path.write_text('[authorization]\nsuper_users = ["admin"]\n')
    with pytest.raises(ConfigurationError, match="TYPE:NAME"):
        load_config(path, data_dir=tmp_path)
    path.write_text("[gateway]\nmax_subscriptions = 0\n")
    with pytest.raises(ConfigurationError, match="max_subscriptions"):
        load_config(path, data_dir=tmp_path)
