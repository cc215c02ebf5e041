"""Write actions against a real gateway with SASL and [authorization]: the operator's own
credentials decide, a refusal is one line on the page, every change is an audit line."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import quote, urlencode
from urllib.request import Request, urlopen

import pytest
from structlog.testing import capture_logs

from clientmetrics.admin import AdminConfig, AsyncAdmin
from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.dashboard.login_throttle import ThrottleConfig
from clientmetrics.dashboard.operators import OperatorConfig
from clientmetrics.investigate import list_watches
from tests.plain_flood import add_user
from tests.procs import GatewayProcess

pytestmark = pytest.mark.integration

AUTHZ = """
[sasl]
mechanisms = ["PLAIN"]
[authorization]
super_users = ["User:alice"]
acls = [{principal = "User:bob", operation = "DESCRIBE_CONFIGS", permission = "allow"}]
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    data = tmp_path_factory.mktemp("authz") / "data"
    add_user(data, "alice", "alice-pw")
    add_user(data, "bob", "bob-pw")
    gw = GatewayProcess(data, AUTHZ, listen_protocol="SASL_PLAINTEXT").start()
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def login(dash: Dashboard, user: str, password: str) -> tuple[str, str]:
    """(cookie, csrf token) of a logged-in operator."""
    answer = dash.handle("/investigate/login", "POST", f"username={user}&password={password}")
    assert answer.status == 303, answer.body
    (cookie,) = [v for k, v in answer.headers if k == "Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    jar = cookie.split(";")[0]
    page = dash.handle("/investigate", cookie=jar).body.decode()
    token = re.search(r'name=csrf value="([^"]+)"', page)
    assert token is not None
    assert f"Logged in as {user}" in page
    return jar, token[1]


def test_refused_and_allowed_watches(gateway: GatewayProcess, tmp_path: Path) -> None:
    operators = OperatorConfig(enabled=True, bootstrap_server=gateway.bootstrap)
    dash = Dashboard(DashboardConfig(tmp_path), operators=operators)
    wrong = dash.handle("/investigate/login", "POST", "username=bob&password=nope")
    assert wrong.status == 403
    assert b"Login refused" in wrong.body

    form = "client_id=lagging-consumer&source_address=127.0.0.1&metrics=org.apache.kafka."
    form += "consumer.&interval_s=10&expires_min=30&csrf="
    bob, bob_token = login(dash, "bob", "bob-pw")
    with capture_logs() as logs:
        refused = dash.handle("/investigate/watch", "POST", form + bob_token, bob)
    assert refused.status == 403
    line = re.search(r"<p class=refusal id=refusal>([^<]*)</p>", refused.body.decode())
    assert line is not None
    assert (
        line[1] == "investigate: CLUSTER_AUTHORIZATION_FAILED (31): Cluster authorization failed."
    )
    assert [(e["event"], e["operator"]) for e in logs] == [("dashboard_action_refused", "bob")]

    alice, alice_token = login(dash, "alice", "alice-pw")
    with capture_logs() as logs:
        made = dash.handle("/investigate/watch", "POST", form + alice_token, alice)
        assert made.status == 303
        (location,) = [v for k, v in made.headers if k == "Location"]
        name = location.removeprefix("/investigate/watch/")
        assert re.fullmatch(r"investigate\.alice\.[0-9]{8}T[0-9]{6}Z\.[0-9a-f]{8}", name)
        page = dash.handle(location, cookie=alice).body.decode()
        assert "client_id=lagging-consumer, client_source_address=127\\.0\\.0\\.1" in page
        # bob may not delete alice's watch either
        denied = dash.handle(
            "/investigate/stop", "POST", f"name={quote(name)}&csrf={bob_token}", bob
        )
        assert denied.status == 403
        assert b"CLUSTER_AUTHORIZATION_FAILED" in denied.body
        assert asyncio.run(watches_on(operators.admin_config("alice", "alice-pw"))) == [name]
        stopped = dash.handle("/investigate/stop", "POST", f"name={name}&csrf={alice_token}", alice)
        assert stopped.status == 303
    events = [(e["event"], e["operator"]) for e in logs]
    assert events == [
        ("dashboard_watch_created", "alice"),
        ("dashboard_action_refused", "bob"),
        ("dashboard_watch_stopped", "alice"),
    ]
    assert all("alice-pw" not in str(e) and "bob-pw" not in str(e) for e in logs)
    listing = dash.handle("/investigate", cookie=alice).body.decode()
    assert name in listing
    assert "stopped" in listing
    admin = operators.admin_config("alice", "alice-pw")
    assert asyncio.run(watches_on(admin)) == []


async def watches_on(config: AdminConfig) -> list[str]:
    async with AsyncAdmin(config) as admin:
        return [w.name for w in await list_watches(admin)]


def test_failed_logins_are_throttled_per_address_and_per_user(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    """Over HTTP: five wrong passwords from one address, then 429 with Retry-After, and
    the right password is not even tried; the user name is locked from other addresses
    too, other users from other addresses are not."""
    operators = OperatorConfig(
        enabled=True, bootstrap_server=gateway.bootstrap,
        throttle=ThrottleConfig(max_failures=5, window_s=120),
    )  # fmt: skip
    served = DashboardServer(Dashboard(DashboardConfig(tmp_path), operators=operators))
    served.start()

    def post(user: str, password: str) -> tuple[int, dict[str, str], str]:
        body = urlencode({"username": user, "password": password}).encode()
        request = Request(f"{served.url}investigate/login", body, method="POST")
        try:
            with urlopen(request, timeout=60) as answer:
                return answer.status, dict(answer.headers), answer.read().decode()
        except HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()

    try:
        with capture_logs() as logs:
            for _ in range(5):
                assert post("bob", "nope")[0] == 403
            status, headers, page = post("bob", "bob-pw")
        assert status == 429
        assert 100 <= int(headers["Retry-After"]) <= 120
        assert f"Too many failed logins: try again in {headers['Retry-After']} s." in page
        logins = [e for e in logs if e["event"].startswith("dashboard_login")]
        assert [e["event"] for e in logins] == ["dashboard_login_failed"] * 5 + [
            "dashboard_login_throttled"
        ]
        assert {e["peer"] for e in logins} == {"127.0.0.1"}
        assert post("alice", "alice-pw")[0] == 429  # this address is locked for everyone
    finally:
        served.stop()
    dash = served.dashboard
    form = "username=bob&password=bob-pw"
    assert dash.handle("/investigate/login", "POST", form, peer="192.0.2.7").status == 429
    form = "username=alice&password=alice-pw"
    assert dash.handle("/investigate/login", "POST", form, peer="192.0.2.7").status == 303
