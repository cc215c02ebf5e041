"""The dashboard: a router from GET requests to pages, and a small threaded HTTP server.

``Dashboard.handle`` is plain request-in, response-out, so every page is testable
without sockets; ``DashboardServer`` only adapts it to ``http.server``. The
dashboard never writes: tables and the subscription store are only read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pyarrow.compute as pc
import structlog

from clientmetrics.dashboard import pages
from clientmetrics.dashboard.alerts import Alert, episodes, open_counts
from clientmetrics.dashboard.app_types import Response, html
from clientmetrics.dashboard.findings import client_findings, findings_page
from clientmetrics.dashboard.fleet import FleetSource, fleet_page
from clientmetrics.dashboard.inventory import (
    LANDING_LABELS,
    InventoryQuery,
    inventory_page,
    newest_push,
    with_landed_clients,
    with_status,
)
from clientmetrics.dashboard.investigate import Investigate
from clientmetrics.dashboard.operators import OperatorConfig
from clientmetrics.dashboard.series import SeriesReader, landing_reader
from clientmetrics.dashboard.software import LANDED_COLUMNS, software_page, software_table
from clientmetrics.dashboard.sources import (
    GatewayMetrics,
    SubscriptionView,
    subscriptions_from_admin,
    subscriptions_from_sqlite,
)
from clientmetrics.dashboard.tables import TableFiles, TableReader
from clientmetrics.dashboard.tls_serving import TlsServing
from clientmetrics.errors import ClientMetricsError
from clientmetrics.gateway.tls import ReloadingContext
from clientmetrics.pipeline.core.coverage import COVERAGE_INPUT

log = structlog.get_logger("clientmetrics.dashboard")
#: Largest POST body read (the forms are a few fields).
MAX_FORM = 16 * 1024

#: How far back the landing zone is read for what the tables do not have yet.
LANDING_RECENT_S = 900.0


@dataclass(frozen=True, slots=True)
class DashboardConfig:
    """What the dashboard reads."""

    data_dir: Path
    #: The pipeline's tables [DATA/tables].
    tables_dir: Path | None = None
    #: Read subscriptions through the admin API from here instead of the SQLite store.
    bootstrap_server: str | None = None
    #: A gateway's Prometheus ``/metrics`` URL.
    gateway_metrics_url: str | None = None

    @property
    def tables(self) -> Path:
        """Where the pipeline's tables are."""
        return self.tables_dir or self.data_dir / "tables"


class Dashboard:
    """Answers the dashboard's pages from the data directory."""

    def __init__(
        self,
        config: DashboardConfig,
        clock: Callable[[], float] = time.time,
        operators: OperatorConfig | None = None,
    ) -> None:
        self.config = config
        self.investigate = Investigate(config.data_dir, operators or OperatorConfig(), clock)
        self._clock = clock
        self._tables = TableReader(config.tables)
        self._landing = landing_reader(config.data_dir)
        self._fleet = FleetSource(config.data_dir, self._tables, clock, LANDING_RECENT_S)
        self._series = SeriesReader(self._tables, self._landing, clock)
        self._gateway = (
            GatewayMetrics(config.gateway_metrics_url) if config.gateway_metrics_url else None
        )
        self._alerts: tuple[TableFiles, list[Alert]] | None = None
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The dashboard's clock, as an aware UTC datetime."""
        return datetime.fromtimestamp(self._clock(), UTC)

    def handle(
        self,
        target: str,
        method: str = "GET",
        form: str = "",
        cookie: str | None = None,
        peer: str = "",
    ) -> Response:
        """Answer ``method target`` (path and query string; ``form``: a POST's body;
        ``peer``: the client's address)."""
        url = urlsplit(target)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        path = url.path.rstrip("/") or "/"
        if method == "POST":
            query = {key: values[-1] for key, values in parse_qs(form).items()}
        answer = self.investigate.handle(method, path, query, cookie, peer)
        if answer is not None:
            return answer
        if method != "GET":  # only the investigate pages take POSTs
            return Response(405, b"read-only\n", "text/plain; charset=utf-8")
        if path == "/":
            return html(self._inventory(query))
        if path.startswith("/client/"):
            instance_id = unquote(path.removeprefix("/client/"))
            page = self._client(instance_id, query)
            if page is None:
                body = f"<p>No client with instance id <code>{escape(instance_id)}</code>.</p>"
                return html(pages.layout("Unknown client", "/", body), 404)
            return html(page)
        if path == "/alerts":
            status = query.get("status", "open")
            status = status if status in ("open", "resolved", "all") else "open"
            return html(pages.alerts_page(self.alerts(), status))
        if path == "/fleet":
            return html(fleet_page(self._fleet.view()))
        if path == "/findings":
            return html(findings_page(self.alerts()))
        if path == "/software":
            return html(self._software())
        if path == "/subscriptions":
            return html(self._subscriptions())
        if path == "/gateway":
            sample = self._gateway.sample() if self._gateway else None
            return html(pages.gateway_page(self.config.gateway_metrics_url, sample))
        if path == "/healthz":
            return Response(200, b"ok\n", "text/plain; charset=utf-8")
        return html(pages.layout("Not found", "", "<p>No such page.</p>"), 404)

    def alerts(self) -> list[Alert]:
        """Alert episodes, newest first (re-folded only when the alerts table changed)."""
        files = self._tables.list_files("alerts")
        with self._lock:
            if self._alerts is not None and self._alerts[0] == files:
                return self._alerts[1]
        folded = episodes(self._tables.read("alerts"))
        with self._lock:
            self._alerts = (files, folded)
        return folded

    def _inventory(self, query: dict[str, str]) -> str:
        request = InventoryQuery(
            search=query.get("q", ""),
            sort=query.get("sort", "last_seen"),
            descending=query.get("desc", "1") != "0",
            page=_int(query.get("page"), 1),
        )
        recent = self._clock() - LANDING_RECENT_S
        clients = with_landed_clients(
            self._tables.read("clients"), self._landing.read_recent(LANDING_LABELS, recent)
        )
        if clients is None:
            body = (
                "<p class=muted id=summary>No clients yet: nothing landed in the last "
                f"{LANDING_RECENT_S / 60:.0f} minutes and the pipeline has not written "
                f"<code>{self.config.tables}/clients</code>.</p>"
            )
            return pages.layout("Clients", "/", body)
        as_of = newest_push(clients) or self.now()
        table = with_status(clients, open_counts(self.alerts()), as_of)
        return pages.inventory(inventory_page(table, request))

    def _client(self, instance_id: str, query: dict[str, str]) -> str | None:
        """The client's page; None when no table, landed push or alert knows it."""
        window = query.get("window", "15m")
        window = window if window in pages.WINDOWS else "15m"
        seconds = pages.WINDOWS[window]
        since = self.now() - timedelta(seconds=seconds) if seconds is not None else None
        details: dict[str, Any] | None = None
        clients = self._tables.read("clients")
        if clients is not None:
            mine = clients.filter(pc.equal(clients.column("client_instance_id"), instance_id))
            details = mine.slice(0, 1).to_pylist()[0] if mine.num_rows else None
        charts = self._series.charts(instance_id, since)
        alerts = [a for a in self.alerts() if a.client_instance_id == instance_id]
        if details is None and not alerts and not self._series.charts(instance_id, None):
            return None
        return pages.client(instance_id, details, charts, alerts, window, client_findings(alerts))

    def _software(self) -> str:
        recent = self._clock() - LANDING_RECENT_S
        points = self._tables.read("points", COVERAGE_INPUT)
        landed = self._landing.read_recent(LANDED_COLUMNS, recent)
        return software_page(software_table(points, landed))

    def _subscriptions(self) -> str:
        bootstrap = self.config.bootstrap_server
        store = self.config.data_dir / "subscriptions.db"
        found: list[SubscriptionView] = []
        error = None
        try:
            if bootstrap is not None:
                found = subscriptions_from_admin(bootstrap)
            else:
                found = subscriptions_from_sqlite(store)
        except ClientMetricsError as exc:
            error = str(exc)
        source = f"the admin API at {bootstrap}" if bootstrap else str(store)
        shown_bootstrap = bootstrap or "127.0.0.1:9092"
        return pages.subscriptions_page(found, source, shown_bootstrap, error)


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        try:
            response = self.server.dashboard.handle(
                self.path, "GET", "", self.headers.get("Cookie")
            )
        except Exception:  # a page failing must not take the server down
            log.exception("dashboard_page_failed", path=self.path)
            response = Response(500, b"internal error\n", "text/plain; charset=utf-8")
        self._send(response)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 <= length <= MAX_FORM:
            self._send(Response(413, b"form too large\n", "text/plain; charset=utf-8"))
            return
        form = self.rfile.read(length).decode("utf-8", "replace")
        try:
            response = self.server.dashboard.handle(
                self.path, "POST", form, self.headers.get("Cookie"), self.client_address[0]
            )
        except Exception:  # an action failing must not take the server down
            log.exception("dashboard_action_failed", path=self.path.split("?")[0])
            response = Response(500, b"internal error\n", "text/plain; charset=utf-8")
        self._send(response)

    def _refuse(self) -> None:
        self._send(Response(405, b"not allowed\n", "text/plain; charset=utf-8"))

    do_PUT = do_DELETE = do_PATCH = _refuse

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("dashboard_request", line=format % args)


class DashboardServer(TlsServing, ThreadingHTTPServer):
    """``http.server`` serving a ``Dashboard``; binds 127.0.0.1 unless told otherwise;
    over TLS with ``tls`` (``tls_serving.dashboard_tls``)."""

    daemon_threads = True

    def __init__(
        self,
        dashboard: Dashboard,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ReloadingContext | None = None,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.dashboard = dashboard
        self.tls = tls
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The dashboard's address."""
        host, port = self.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}/"

    def start(self) -> None:
        """Serve on a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="dashboard", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()
