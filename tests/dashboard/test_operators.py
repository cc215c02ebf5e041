"""Operators' sessions, cookies and CSRF tokens, and the write actions' guards (no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clientmetrics.addresses import is_loopback
from clientmetrics.dashboard import Dashboard, DashboardConfig
from clientmetrics.dashboard.operators import (
    OperatorConfig,
    SessionStore,
    cookie_header,
    csrf_ok,
    session_id,
)
from clientmetrics.errors import ConfigurationError

ENABLED = OperatorConfig(enabled=True, bootstrap_server="127.0.0.1:1")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sessions_are_bounded_and_expire_when_idle() -> None:
    clock = Clock()
    store = SessionStore(limit=2, idle_s=60, clock=clock)
    admin = ENABLED.admin_config("alice", "pw")
    a, b = store.create("alice", admin), store.create("bob", admin)
    assert store.get(a.sid) is a  # a is now the most recently used
    c = store.create("carol", admin)  # full: the least recently used (b) goes
    assert (len(store), store.get(b.sid), store.get(a.sid), store.get(c.sid)) == (2, None, a, c)
    clock.now += 59
    assert store.get(a.sid) is a
    clock.now += 30  # c idle 89 s, a idle 30 s
    assert (store.get(c.sid), store.get(a.sid)) == (None, a)
    store.drop(a.sid)
    assert (store.get(a.sid), store.get(None), store.get("forged")) == (None, None, None)
    assert a.sid != a.csrf
    assert len(a.sid) >= 40


def test_cookie_is_httponly_samesite_strict_and_secure_over_tls() -> None:
    assert cookie_header("S", secure=False) == "cm_session=S; Path=/; HttpOnly; SameSite=Strict"
    assert cookie_header("S", secure=True).endswith("; SameSite=Strict; Secure")
    assert "Max-Age=0" in cookie_header("", secure=False, clear=True)
    assert session_id("a=1; cm_session=xyz; b=2") == "xyz"
    assert session_id("cm_session=") is None
    assert session_id(None) is None


def test_csrf_token_must_be_the_sessions() -> None:
    store = SessionStore(4, 60, Clock())
    session = store.create("alice", ENABLED.admin_config("alice", "pw"))
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, session.csrf[:-1] + "x")
    assert not csrf_ok(session, None)
    assert not csrf_ok(None, session.csrf)


def test_operator_credentials_go_to_the_admin_connection_and_nowhere_else() -> None:
    config = OperatorConfig(True, "127.0.0.1:9092", mechanism="SCRAM-SHA-512")
    admin = config.admin_config("alice", "s3cret")
    assert admin.sasl is not None
    assert type(admin.sasl).__name__ == "SaslScram"
    session = SessionStore(4, 60, Clock()).create("alice", admin)
    assert "s3cret" not in repr(session)
    with pytest.raises(ConfigurationError, match="quotes"):
        config.admin_config('al"ice', "x")
    with pytest.raises(ConfigurationError, match="--bootstrap-server"):
        OperatorConfig(enabled=True)
    with pytest.raises(ConfigurationError, match="mechanism"):
        OperatorConfig(mechanism="GSSAPI")


def test_write_actions_are_off_unless_configured(tmp_path: Path) -> None:
    dash = Dashboard(DashboardConfig(tmp_path))
    page = dash.handle("/investigate")
    assert page.status == 200
    assert b"Write actions are off" in page.body
    assert b"id=login" not in page.body
    for action in ("login", "watch", "stop", "narrow"):
        refused = dash.handle(f"/investigate/{action}", "POST", "username=a&password=b")
        assert (refused.status, b"Write actions are off." in refused.body) == (403, True)
    assert dash.handle("/", "POST").status == 405


def test_a_post_without_the_sessions_csrf_token_is_refused(tmp_path: Path) -> None:
    dash = Dashboard(DashboardConfig(tmp_path), operators=ENABLED)
    session = dash.investigate.sessions.create("alice", ENABLED.admin_config("alice", "pw"))
    cookie = f"cm_session={session.sid}"
    for form in ("name=x", f"name=x&csrf={session.csrf}x"):
        refused = dash.handle("/investigate/stop", "POST", form, cookie)
        assert refused.status == 403
        assert b"CSRF" in refused.body
    # The right token without the cookie (a cross-site form) is refused as well.
    assert dash.handle("/investigate/stop", "POST", f"csrf={session.csrf}").status == 403
    # With both, the action itself runs: a name that is no watch is refused before any RPC.
    bad = dash.handle("/investigate/stop", "POST", f"name=baseline&csrf={session.csrf}", cookie)
    assert (bad.status, b"baseline is not a watch" in bad.body) == (403, True)
    page = dash.handle("/investigate", cookie=cookie)
    assert b"Logged in as alice" in page.body
    assert session.csrf.encode() in page.body


def test_a_login_the_cluster_refuses_starts_no_session(tmp_path: Path) -> None:
    dash = Dashboard(DashboardConfig(tmp_path), operators=ENABLED)  # nothing listens on :1
    refused = dash.handle("/investigate/login", "POST", "username=alice&password=pw")
    assert refused.status == 403
    assert b"Login refused" in refused.body
    assert not any(name == "Set-Cookie" for name, _ in refused.headers)
    assert b"pw" not in refused.body.replace(b"password", b"")
    assert len(dash.investigate.sessions) == 0


def test_loopback_hosts() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.1.2.3")] == [
        True, True, True, False, False,
    ]  # fmt: skip


def test_the_command_refuses_bad_write_settings_and_warns_without_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from click.testing import CliRunner

    from clientmetrics.dashboard.cli import dashboard
    from clientmetrics.dashboard.operator_cli import operator_config

    data = ["--data-dir", str(tmp_path), "--listen", "127.0.0.1:0"]
    done = CliRunner().invoke(dashboard, [*data, "--write-actions"])
    assert done.exit_code != 0
    assert "write actions need --bootstrap-server" in done.output
    secret = tmp_path / "ops.properties"
    secret.write_text('sasl.jaas.config=x required username="a" password="b";\n')
    done = CliRunner().invoke(
        dashboard, [*data, "--write-actions", "--bootstrap-server", "h:1", "--operator-config",
                    str(secret)],
    )  # fmt: skip
    assert done.exit_code != 0
    assert "must not hold credentials" in done.output
    common = {"operator_sasl_mechanism": "PLAIN", "operator_config": None, "topic": None}
    common["topic_bootstrap_server"] = None
    operator_config("h:1", "0.0.0.0", write_actions=True, **common)
    assert "WARNING: write actions are served WITHOUT TLS on 0.0.0.0" in capsys.readouterr().err
    operator_config("h:1", "127.0.0.1", write_actions=True, **common)
    operator_config("h:1", "0.0.0.0", write_actions=False, **common)
    assert capsys.readouterr().err == ""
