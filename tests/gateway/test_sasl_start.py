"""The gateway builds [sasl] at start: a JWKS it cannot read stops it; SIGHUP re-reads it."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.procs import BIN, GatewayProcess, wait_for
from tests.security.jwts import AUDIENCE, ISSUER, Signer

pytestmark = pytest.mark.integration


def sasl_toml(jwks: Path) -> str:
    return (
        '[sasl]\nmechanisms = ["OAUTHBEARER"]\n[sasl.oauthbearer]\n'
        f'jwks = "{jwks}"\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\n'
    )


def test_an_unreadable_jwks_stops_the_start(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(sasl_toml(tmp_path / "missing.json"))
    result = subprocess.run(
        [str(BIN / "clientmetrics"), "serve", "--listen", "127.0.0.1:0", "--data-dir",
         str(tmp_path), "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2  # a configuration error, found at start
    assert result.stderr.splitlines()[-1] == (
        f"clientmetrics serve: cannot read JWKS file {tmp_path / 'missing.json'}: "
        "No such file or directory"
    )


def test_sighup_rereads_the_jwks(tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(Signer().jwks()))
    gw = GatewayProcess(tmp_path / "data", config_text=sasl_toml(jwks)).start()
    try:
        assert gw.proc is not None
        jwks.write_text(json.dumps(Signer(kid="k2").jwks()))
        gw.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: gw.events("jwks_reloaded"), 10, what="the JWKS reload")
        jwks.write_text("not json")
        gw.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: gw.events("jwks_reload_failed"), 10, what="the failed reload")
        assert gw.proc.poll() is None
    finally:
        assert gw.stop() == 0


def test_a_warning_for_listeners_open_to_anyone(tmp_path: Path) -> None:
    from tests.tlsfiles import TestCA

    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    tls = (
        f'[tls]\ncertificate = "{ca.root / "server.crt"}"\n'
        f'private_key = "{ca.root / "server.key"}"\n'
    )
    gw = GatewayProcess(tmp_path / "data", tls, extra_args=("--listen", "SSL://0.0.0.0:0")).start()
    try:
        [warning] = gw.events("listeners_unauthenticated")
        assert warning["listeners"] == ["SSL://0.0.0.0:0"]  # not the loopback PLAINTEXT one
    finally:
        assert gw.stop() == 0


def test_a_jwks_url_is_fetched_again_periodically(tmp_path: Path) -> None:
    import http.server
    import threading

    fetches: list[str] = []
    body = json.dumps(Signer().jwks()).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetches.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    toml = sasl_toml(Path("x")).replace('"x"', f'"{url}"') + "jwks_refresh_s = 0.3\n"
    gw = GatewayProcess(tmp_path / "data", config_text=toml).start()
    try:
        wait_for(lambda: len(gw.events("jwks_reloaded")) >= 2, 15, what="two refreshes")
        assert len(fetches) >= 3  # at start, then every 0.3 s
    finally:
        assert gw.stop() == 0
        server.shutdown()
        server.server_close()
