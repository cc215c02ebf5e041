"""The dashboard command's write-action options, and its reaper of expired watches."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import structlog

from clientmetrics.addresses import is_loopback
from clientmetrics.admin import AdminConfig, AsyncAdmin, read_properties
from clientmetrics.cli_options import CommandError
from clientmetrics.dashboard.operators import MECHANISMS, OperatorConfig
from clientmetrics.dashboard.tls_serving import dashboard_tls
from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.gateway.tls import ReloadingContext
from clientmetrics.investigate.watches import reap

__all__ = [
    "REAP_EVERY_S",
    "Reaper",
    "operator_config",
    "operator_options",
    "reaper_from",
    "tls_from",
]

log = structlog.get_logger("clientmetrics.dashboard")
#: How often the dashboard deletes expired watches (well inside a minute of the expiry).
REAP_EVERY_S = 20.0
_SECRET_KEYS = ("sasl.jaas.config", "ssl.key.password", "ssl.keystore.password")


def operator_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--write-actions``, ``--operator-sasl-mechanism``, ``--operator-config``,
    ``--topic``, ``--tls-cert``/``--tls-key``, ``--reap-command-config``."""
    options = [
        click.option(
            "--write-actions",
            is_flag=True,
            help="Serve the investigate pages' write actions (watch, narrow, stop), done as "
            "the logged-in operator with their own SASL credentials on --bootstrap-server.",
        ),
        click.option(
            "--operator-sasl-mechanism",
            type=click.Choice(MECHANISMS),
            default="PLAIN",
            show_default=True,
            help="The SASL mechanism operators log in with.",
        ),
        click.option(
            "--operator-config",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="Client properties for operators' admin connections (security.protocol, "
            "ssl.*), without credentials: each operator gives their own.",
        ),
        click.option(
            "--topic",
            help="Live points from this telemetry topic (broker plugin, topic exporter), read "
            "with the operator's credentials, instead of the data dir's landing zone.",
        ),
        click.option("--topic-bootstrap-server", help="The topic's cluster, if not the same."),
        click.option(
            "--tls-cert",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="Serve HTTPS with this PEM certificate (chain), with --tls-key.",
        ),
        click.option(
            "--tls-key",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="The certificate's PEM private key (re-read, as the certificate, when changed).",
        ),
        click.option(
            "--reap-command-config",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="The dashboard's own client properties: with them it deletes expired "
            f"watches on --bootstrap-server at start and every {REAP_EVERY_S:.0f} s.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def operator_config(
    bootstrap: str | None,
    host: str,
    *,
    write_actions: bool,
    operator_sasl_mechanism: str,
    operator_config: Path | None,
    topic: str | None,
    topic_bootstrap_server: str | None,
    tls_cert: Path | None = None,
    **_: Any,
) -> OperatorConfig:
    """The operators' settings; a loud warning when writes are served in the clear off loopback."""
    props = read_properties(str(operator_config)) if operator_config else {}
    if any(key in props for key in _SECRET_KEYS):
        raise CommandError(
            "clientmetrics dashboard: --operator-config must not hold credentials "
            "(each operator logs in with their own)"
        )
    try:
        config = OperatorConfig(
            enabled=write_actions,
            bootstrap_server=bootstrap,
            mechanism=operator_sasl_mechanism,
            properties=props,
            topic=topic,
            topic_bootstrap_server=topic_bootstrap_server,
            tls=tls_cert is not None,
        )
    except ConfigurationError as exc:
        raise CommandError(f"clientmetrics dashboard: {exc}") from None
    if write_actions and tls_cert is None and not is_loopback(host):
        message = (
            f"WARNING: write actions are served WITHOUT TLS on {host}: operators' passwords "
            "and session cookies cross the network in the clear. Give --tls-cert and "
            "--tls-key, or serve on 127.0.0.1 behind a TLS-terminating proxy."
        )
        click.secho(message, fg="red", bold=True, err=True)
        log.warning("dashboard_writes_without_tls", host=host)
    return config


class Reaper:
    """Deletes expired watches now and every ``every_s``, on its own thread."""

    def __init__(self, config: AdminConfig, every_s: float = REAP_EVERY_S) -> None:
        self._config = config
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch-reaper", daemon=True)

    def start(self) -> None:
        """Reap now and then periodically until ``stop``."""
        self._thread.start()

    def stop(self) -> None:
        """Stop reaping (waits for a reap under way)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def reap_once(self) -> int:
        """Delete the watches expired now; how many. Failures are logged, not raised."""

        async def main() -> int:
            async with AsyncAdmin(self._config) as admin:
                gone = await reap(admin, int(time.time() * 1000))
            for watch in gone:
                log.info("dashboard_watch_reaped", watch=watch.name, owner=watch.owner)
            return len(gone)

        try:
            return asyncio.run(main())
        except ClientMetricsError as exc:
            log.warning("dashboard_reap_failed", reason=str(exc))
            return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.reap_once()
            self._stop.wait(self._every_s)


def tls_from(tls_cert: Path | None, tls_key: Path | None) -> ReloadingContext | None:
    """The dashboard's TLS context from ``--tls-cert`` and ``--tls-key`` (both or neither)."""
    if tls_cert is None and tls_key is None:
        return None
    if tls_cert is None or tls_key is None:
        raise CommandError("clientmetrics dashboard: --tls-cert and --tls-key go together")
    try:
        return dashboard_tls(tls_cert, tls_key)
    except ConfigurationError as exc:
        raise CommandError(f"clientmetrics dashboard: {exc}") from None


def reaper_from(bootstrap: str | None, command_config: Path | None) -> Reaper | None:
    """A reaper when ``--reap-command-config`` is given (it needs ``--bootstrap-server``)."""
    if command_config is None:
        return None
    if not bootstrap:
        raise CommandError(
            "clientmetrics dashboard: --reap-command-config needs --bootstrap-server"
        )
    try:
        props = read_properties(str(command_config))
        return Reaper(AdminConfig.from_properties(bootstrap, props))
    except ConfigurationError as exc:
        raise CommandError(f"clientmetrics dashboard: --reap-command-config: {exc}") from None
