"""The investigate workflow in the dashboard: find, watch, live view, narrow, stop.

Finding reads the landing zone, or the telemetry topic when the deployment
writes only that (``investigate.find_clients``); the write actions
call ``investigate.watches`` with the logged-in operator's own credentials
(``operators``), only when write actions are configured. Every POST needs the
session's CSRF token; every change is one audit log line with the operator's
name; a refusal by the gateway or the cluster is one line on the page.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from html import escape
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import pyarrow as pa
import structlog

from clientmetrics.admin import AdminConfig, AdminError, AsyncAdmin
from clientmetrics.dashboard import pages
from clientmetrics.dashboard.app_types import Response, html, redirect
from clientmetrics.dashboard.investigate_html import find_body, live_body, login_body
from clientmetrics.dashboard.login_throttle import LoginThrottle
from clientmetrics.dashboard.operators import (
    MAX_FIELD,
    OperatorConfig,
    Session,
    SessionStore,
    cookie_header,
    csrf_ok,
    session_id,
)
from clientmetrics.dashboard.watching import LiveWatch, LiveWatches
from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.investigate import watches as w
from clientmetrics.investigate.cli import refusal
from clientmetrics.investigate.find import (
    Query,
    Subscriptions,
    cluster_subscriptions,
    find_clients,
)
from clientmetrics.investigate.session import Tail
from clientmetrics.investigate.tail import LandingTail
from clientmetrics.pipeline.core.schemas import LANDING_ARROW

log = structlog.get_logger("clientmetrics.dashboard.audit")
T = TypeVar("T")
FIND_FIELDS = ("client_id", "client_id_pattern", "principal", "source_address",
               "software_name", "software_version", "group")  # fmt: skip
FIND_SINCE_S = 900


def _admin(config: AdminConfig, work: Callable[[AsyncAdmin], Awaitable[T]]) -> T:
    async def main() -> T:
        async with AsyncAdmin(config) as admin:
            return await work(admin)

    return asyncio.run(main())


class Investigate:
    """The pages under ``/investigate``; ``handle`` returns None for other paths."""

    def __init__(
        self, data_dir: Path, operators: OperatorConfig, clock: Callable[[], float] = time.time
    ) -> None:
        self._data_dir = data_dir
        self.operators = operators
        self._clock = clock
        self.sessions = SessionStore(operators.max_sessions, operators.session_idle_s, clock)
        self.throttle = LoginThrottle(operators.throttle, clock)
        self.live = LiveWatches(data_dir, clock)

    def handle(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        cookie: str | None,
        peer: str = "",
    ) -> Response | None:
        """Answer a request under /investigate (``query``: the query string or the form;
        ``peer``: the client's address, which logins are throttled by)."""
        if not path.startswith("/investigate"):
            return None
        session = self.sessions.get(session_id(cookie)) if self.operators.enabled else None
        if method == "GET":
            return self._get(path, query, session)
        if not self.operators.enabled:
            return html(
                pages.layout("Investigate", "/investigate", _line("Write actions are off.")), 403
            )
        if path == "/investigate/login":
            return self._login(query, peer)
        if not csrf_ok(session, query.get("csrf")):
            return html(
                pages.layout(
                    "Investigate", "/investigate", _line("Bad or missing CSRF token; log in again.")
                ),
                403,
            )
        assert session is not None  # csrf_ok is False without a session
        actions = {"/investigate/logout": self._logout, "/investigate/watch": self._watch}
        actions |= {"/investigate/narrow": self._narrow, "/investigate/stop": self._stop}
        action = actions.get(path)
        if action is None:
            return html(pages.layout("Not found", "", "<p>No such action.</p>"), 404)
        return action(session, query)

    def _get(self, path: str, query: Mapping[str, str], session: Session | None) -> Response:
        if path.startswith("/investigate/live/"):
            live = self.live.get(path.removeprefix("/investigate/live/"))
            if live is None:
                return Response(404, b'{"error": "no such watch"}\n', "application/json")
            after = int(query["after"]) if query.get("after", "").lstrip("-").isdigit() else -1
            data = json.dumps(live.poll(after, self._clock())).encode()
            return Response(200, data, "application/json")
        if path.startswith("/investigate/watch/"):
            live = self.live.get(path.removeprefix("/investigate/watch/"))
            if live is None:
                return html(
                    pages.layout("Watch", "/investigate", _line("No such watch here.")), 404
                )
            return html(
                pages.layout(f"Watch {live.watch.name}", "/investigate", live_body(live, session))
            )
        found = {k: query[k] for k in FIND_FIELDS if query.get(k)}
        now_ms = int(self._clock() * 1000)
        hits = None
        problem = ""
        if found:
            try:
                rows = self._recent_rows(session, now_ms - FIND_SINCE_S * 1000)
            except ClientMetricsError as exc:
                problem, rows = _line(f"investigate: {exc}"), LANDING_ARROW.empty_table()
            subs = self._subscriptions(session)
            hits = find_clients(rows, Query(**found), now_ms=now_ms, subscriptions=subs)
        body = (
            login_body(self.operators.enabled, session)
            + problem
            + find_body(found, hits, session, self.live.all())
        )
        return html(pages.layout("Investigate", "/investigate", body))

    def _recent_rows(self, session: Session | None, since_ms: int) -> pa.Table:
        """What ``find`` looks through: the telemetry topic's records when the deployment
        has one (read as the operator), else the landing zone."""
        topic = self.operators.topic
        if topic is None:
            return LandingTail(self._data_dir, since_ms=since_ms).read()
        from clientmetrics.investigate.topic import recent_rows

        if session is None:
            raise ConfigurationError(f"log in to find clients (topic {topic} is read as you)")
        bootstrap = self.operators.topic_bootstrap_server or self.operators.bootstrap_server
        assert bootstrap is not None  # a topic is only read with write actions on
        return recent_rows(bootstrap, topic, session.properties, since_ms)

    def _subscriptions(self, session: Session | None) -> Subscriptions:
        """The cluster's subscriptions (what each hit matches), as the operator sees them."""
        if session is None:
            return []
        try:
            return _admin(session.admin, cluster_subscriptions)
        except ClientMetricsError:
            return []

    def _login(self, form: Mapping[str, str], peer: str) -> Response:
        user, password = form.get("username", ""), form.get("password", "")
        wait = self.throttle.retry_after(peer, user[:MAX_FIELD])
        if wait:
            log.info("dashboard_login_throttled", operator=user[:64], peer=peer, retry_after=wait)
            line = _line(f"Too many failed logins: try again in {wait} s.")
            page = html(pages.layout("Investigate", "/investigate", line), 429)
            return Response(429, page.body, headers=(("Retry-After", str(wait)),))
        try:
            config = self.operators.admin_config(user, password)
            # Connecting authenticates; what the operator may do is the authorizer's call.
            _admin(config, lambda admin: asyncio.sleep(0))
        except ClientMetricsError as exc:
            self.throttle.failed(peer, user[:MAX_FIELD])
            log.info("dashboard_login_failed", operator=user[:64], peer=peer, reason=str(exc)[:200])
            body = _line(f"Login refused: {exc}") + login_body(True, None)
            return html(pages.layout("Investigate", "/investigate", body), 403)
        session = self.sessions.create(
            user, config, self.operators.client_properties(user, password)
        )
        log.info("dashboard_login", operator=user)
        return redirect("/investigate", cookie_header(session.sid, secure=self.operators.tls))

    def _logout(self, session: Session, form: Mapping[str, str]) -> Response:
        self.sessions.drop(session.sid)
        log.info("dashboard_logout", operator=session.operator)
        return redirect("/investigate", cookie_header("", secure=self.operators.tls, clear=True))

    def _watch(self, session: Session, form: Mapping[str, str]) -> Response:
        selectors = {}
        if form.get("client_id"):
            selectors["client_id"] = w.literal(form["client_id"])
        if form.get("source_address"):
            selectors["client_source_address"] = w.literal(form["source_address"])
        if form.get("instance"):
            try:
                selectors = {"client_instance_id": w.instance_pattern(form["instance"])}
            except ValueError as exc:
                return self._refused(str(exc))
        prefixes = [p.strip() for p in form.get("metrics", "").split(",") if p.strip()]
        try:
            interval_ms = int(float(form.get("interval_s", "10")) * 1000)
            expires_s = float(form.get("expires_min", "30")) * 60
        except ValueError:
            return self._refused("interval and expiry must be numbers")
        if not selectors or not prefixes or not 100 <= interval_ms <= 3_600_000:
            return self._refused(
                "a watch needs a client id, address or instance, a metric "
                "prefix and an interval between 0.1 s and 1 h"
            )
        if not 0 < expires_s <= 24 * 3600:
            return self._refused("the expiry must be within 24 h")
        try:
            tail = self._tail(session)
        except ClientMetricsError as exc:
            return self._refused(f"investigate: {exc}", session, "watch")
        expires_at_ms = int((self._clock() + expires_s) * 1000)
        try:
            watch = _admin(session.admin, lambda admin: w.create_watch(
                admin, owner=session.operator, selectors=selectors, metrics=prefixes,
                interval_ms=interval_ms, expires_at_ms=expires_at_ms))  # fmt: skip
        except AdminError as exc:
            return self._refused(refusal(exc), session, "watch")
        self.live.add(LiveWatch(watch, selectors, prefixes, tail, session.operator))
        log.info("dashboard_watch_created", operator=session.operator, watch=watch.name,
                 match=",".join(w.watch_match(selectors)), interval_ms=interval_ms)  # fmt: skip
        return redirect(f"/investigate/watch/{quote(watch.name)}")

    def _tail(self, session: Session) -> Tail:
        """Where the watch's points are read: the telemetry topic, as the operator, or the
        landing zone. Started before the watch exists, so its first pushes are seen."""
        topic = self.operators.topic
        if topic is None:
            return self.live.tail()
        from clientmetrics.investigate.topic import topic_tail

        bootstrap = self.operators.topic_bootstrap_server or self.operators.bootstrap_server
        assert bootstrap is not None  # write actions need --bootstrap-server
        return topic_tail(bootstrap, topic, session.properties)

    def _narrow(self, session: Session, form: Mapping[str, str]) -> Response:
        live = self.live.get(form.get("name", ""))
        instance = form.get("instance", "")
        if live is None or not instance:
            return self._refused("no such watch or instance")
        try:
            selectors = {"client_instance_id": w.instance_pattern(instance)}
        except ValueError as exc:
            return self._refused(str(exc))
        try:
            _admin(session.admin, lambda admin: w.narrow_watch(admin, live.watch, selectors))
        except AdminError as exc:
            return self._refused(refusal(exc), session, "narrow")
        live.narrow(instance, selectors)
        log.info("dashboard_watch_narrowed", operator=session.operator, watch=live.watch.name,
                 instance=instance)  # fmt: skip
        return redirect(f"/investigate/watch/{quote(live.watch.name)}")

    def _stop(self, session: Session, form: Mapping[str, str]) -> Response:
        name = form.get("name", "")
        if w.parse_watch_name(name) is None:
            return self._refused(f"{name} is not a watch")
        began = self.live.stopping(name)
        try:
            _admin(session.admin, lambda admin: w.stop_watch(admin, name))
        except AdminError as exc:
            self.live.stopped(name, None)
            return self._refused(refusal(exc), session, "stop")
        self.live.stopped(name, began)
        log.info("dashboard_watch_stopped", operator=session.operator, watch=name)
        return redirect(f"/investigate/watch/{quote(name)}")

    def _refused(self, line: str, session: Session | None = None, action: str = "") -> Response:
        if session is not None:
            log.info("dashboard_action_refused", operator=session.operator, action=action,
                     reason=line)  # fmt: skip
        body = _line(line) + '<p><a href="/investigate">Back to investigate</a></p>'
        return html(pages.layout("Investigate", "/investigate", body), 403)


def _line(text: str) -> str:
    return f"<p class=refusal id=refusal>{escape(text)}</p>"
