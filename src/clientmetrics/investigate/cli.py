"""``clientmetrics investigate``: KIP-714's reactive monitoring from a terminal.

find clients by what their owner knows, watch them (a temporary subscription,
live points), stop, list and reap watches. Errors are one line; a refusal by the
authorizer exits 1 with the broker's message.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from clientmetrics.admin import AdminConfig, AdminError, AsyncAdmin, read_properties
from clientmetrics.cli_options import DEFAULT_DATA_DIR, BadConfiguration, CommandError
from clientmetrics.errors import ConfigurationError
from clientmetrics.investigate import watches as w
from clientmetrics.investigate.find import Query, cluster_subscriptions, find_clients
from clientmetrics.investigate.session import WatchSession

if TYPE_CHECKING:
    import pyarrow as pa

    from clientmetrics.investigate.topic import TopicTail

T = TypeVar("T")
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
#: How long ``find`` looks back in the landing zone at most (the tail reads two hours' files).
MAX_SINCE_S = 3600.0


def parse_duration(text: str, what: str) -> float:
    """``500ms``, ``10s``, ``30m``, ``1h`` -> seconds; anything else is a one-line error."""
    found = _DURATION.match(text.strip())
    if found is None:
        raise BadConfiguration(f"{what} must be a duration like 10s, 30m or 1h, not {text!r}")
    return float(found[1]) * _UNITS[found[2]]


def _admin_config(bootstrap: str | None, command_config: Path | None) -> AdminConfig:
    if not bootstrap:
        raise BadConfiguration("--bootstrap-server is required")
    try:
        props = read_properties(str(command_config)) if command_config else {}
        return AdminConfig.from_properties(bootstrap, props)
    except ConfigurationError as exc:
        raise BadConfiguration(f"--command-config: {exc}") from exc


def _run(config: AdminConfig, work: Callable[[AsyncAdmin], Awaitable[T]]) -> T:
    async def main() -> T:
        async with AsyncAdmin(config) as admin:
            return await work(admin)

    try:
        return asyncio.run(main())
    except AdminError as exc:
        raise CommandError(refusal(exc)) from None


def refusal(exc: AdminError) -> str:
    """An admin failure as the command's one line: Kafka's code name and number, its message."""
    return f"investigate: {exc.error_code.name} ({int(exc.error_code)}): {exc}"


def _owner(command_config: Path | None, given: str | None) -> str:
    if given:
        return given
    if command_config:
        props = read_properties(str(command_config))
        user = re.search(r'username="([^"]+)"', props.get("sasl.jaas.config", ""))
        if user:
            return user[1]
    return getpass.getuser()


admin_options = [
    click.option("--bootstrap-server", envvar="CLIENTMETRICS_BOOTSTRAP", help="HOST:PORT."),
    click.option(
        "--command-config",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="Client properties (security.protocol, sasl.*, ssl.*): your own credentials.",
    ),
]


def with_admin(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(admin_options):
        function = option(function)
    return function


def with_topic(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--topic`` and ``--topic-bootstrap-server``: pushes from the telemetry topic."""
    function = click.option(
        "--topic-bootstrap-server",
        help="HOST:PORT of the cluster holding --topic (default: --bootstrap-server).",
    )(function)
    return click.option(
        "--topic",
        help="Read pushes from this telemetry topic (broker plugin, topic exporter) instead "
        "of the landing zone.",
    )(function)


data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="The gateway's data directory (its landing zone is read).",
)


@click.group()
def investigate() -> None:
    """Troubleshoot a client you do not own, live (KIP-714's reactive monitoring)."""


@investigate.command()
@with_admin
@data_dir
@click.option("--client-id", help="Exact client.id.")
@click.option("--client-id-pattern", help="client.id as a regular expression (whole match).")
@click.option("--principal", help="Exact principal, e.g. User:alice.")
@click.option("--source-address", help="Exact client source address.")
@click.option("--software-name", help="Exact client software name.")
@click.option("--software-version", help="Exact client software version.")
@click.option("--group", help="Consumer group (group.id), from the pushes' attributes.")
@click.option("--since", default="15m", show_default=True, help="How far back to look (≤ 1h).")
@with_topic
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text (one line a client) or json.",
)
def find(
    bootstrap_server: str | None,
    command_config: Path | None,
    data_dir: Path,
    since: str,
    output: str,
    topic: str | None,
    topic_bootstrap_server: str | None,
    **query: str | None,
) -> None:
    """Find client instances by what their owner knows."""
    from clientmetrics.investigate.tail import LandingTail

    since_s = min(parse_duration(since, "--since"), MAX_SINCE_S)
    now_ms = int(time.time() * 1000)
    since_ms = now_ms - int(since_s * 1000)
    if topic:
        rows = _topic_recent(topic, topic_bootstrap_server or bootstrap_server, command_config,
                             since_ms)  # fmt: skip
    else:
        rows = LandingTail(data_dir, since_ms=since_ms).read()
    subs = []
    if bootstrap_server:
        config = _admin_config(bootstrap_server, command_config)
        subs = _run(config, cluster_subscriptions)
    hits = find_clients(rows, Query(**query), now_ms=now_ms, subscriptions=subs)
    if output == "json":
        click.echo(json.dumps([asdict(h) for h in hits], indent=2))
        return
    click.echo(f"{len(hits)} client instance(s)")
    for h in hits:
        last = time.strftime("%H:%M:%S", time.gmtime(h.last_push_ms / 1000))
        click.echo(
            f"{h.client_instance_id}  {h.client_id}  {h.software}  {h.principal}  "
            f"{','.join(h.source_addresses)}  group={h.group or '-'}  {h.state}  last={last}Z  "
            f"types={','.join(h.metric_types) or '-'}  metrics={h.last_push_metrics}  "
            f"subscriptions={','.join(h.subscriptions) or '-'}"
        )


@investigate.command()
@with_admin
@data_dir
@click.option("--client-id", help="client.id to match (exact).")
@click.option("--source-address", help="Client source address to match (exact).")
@click.option("--instance", help="Narrow to one client_instance_id.")
@click.option(
    "--type",
    "client_type",
    type=click.Choice(sorted(w.STANDARD_PREFIXES)),
    default="consumer",
    show_default=True,
    help="Client type: its standard metric prefix is the default --metrics.",
)
@click.option("--metrics", multiple=True, help="Metric prefix (repeatable); default: the type's.")
@click.option("--interval", default="10s", show_default=True, help="Push interval asked for.")
@click.option("--expires", default="30m", show_default=True, help="Delete the watch after this.")
@click.option("--owner", help="Who the watch is for the record (default: SASL user, else login).")
@click.option("--duration", default=None, help="Stop watching after this long (default: expiry).")
@with_topic
def watch(
    bootstrap_server: str | None,
    command_config: Path | None,
    data_dir: Path,
    client_id: str | None,
    source_address: str | None,
    instance: str | None,
    client_type: str,
    metrics: tuple[str, ...],
    interval: str,
    expires: str,
    owner: str | None,
    duration: str | None,
    topic: str | None,
    topic_bootstrap_server: str | None,
) -> None:
    """Watch clients live: a temporary subscription, their points as pushed, then delete it."""
    config = _admin_config(bootstrap_server, command_config)
    selectors = {}
    if client_id:
        selectors["client_id"] = w.literal(client_id)
    if source_address:
        selectors["client_source_address"] = w.literal(source_address)
    if instance:
        try:
            selectors["client_instance_id"] = w.instance_pattern(instance)
        except ValueError as exc:
            raise BadConfiguration(f"--instance: {exc}") from None
    if not selectors:
        raise BadConfiguration("watch needs --client-id, --source-address or --instance")
    interval_ms = int(parse_duration(interval, "--interval") * 1000)
    expires_s = parse_duration(expires, "--expires")
    stop_after = parse_duration(duration, "--duration") if duration else None
    source = None
    if topic:
        source = _topic_tail(topic, topic_bootstrap_server or bootstrap_server, command_config)
    session = WatchSession(
        source=source,
        config=config,
        data_dir=data_dir,
        owner=_owner(command_config, owner),
        selectors=selectors,
        metrics=list(metrics) or [w.STANDARD_PREFIXES[client_type]],
        interval_ms=interval_ms,
        expires_s=expires_s,
        echo=click.echo,
        warn=lambda line: click.echo(line, err=True),
    )
    try:
        asyncio.run(session.run(stop_after))
    except KeyboardInterrupt:
        asyncio.run(session.cleanup())
    except AdminError as exc:
        raise CommandError(refusal(exc)) from None
    finally:
        if source is not None:
            source.close()


def _topic_tail(topic: str, bootstrap: str | None, command_config: Path | None) -> TopicTail:
    """The telemetry topic's tail, with the operator's client properties; one line if not."""
    from clientmetrics.investigate.topic import topic_tail

    if not bootstrap:
        raise BadConfiguration("--topic needs --bootstrap-server (or --topic-bootstrap-server)")
    try:
        props = read_properties(str(command_config)) if command_config else {}
        return topic_tail(bootstrap, topic, props)
    except ConfigurationError as exc:
        raise CommandError(f"investigate: {exc}") from None


def _topic_recent(
    topic: str, bootstrap: str | None, command_config: Path | None, since_ms: int
) -> pa.Table:
    """The topic's records since ``since_ms`` as landing rows; one line if unreadable."""
    from clientmetrics.investigate.topic import recent_rows

    if not bootstrap:
        raise BadConfiguration("--topic needs --bootstrap-server (or --topic-bootstrap-server)")
    try:
        props = read_properties(str(command_config)) if command_config else {}
        return recent_rows(bootstrap, topic, props, since_ms)
    except ConfigurationError as exc:
        raise CommandError(f"investigate: {exc}") from None


@investigate.command()
@with_admin
@click.argument("name")
def stop(bootstrap_server: str | None, command_config: Path | None, name: str) -> None:
    """Delete a watch now."""
    config = _admin_config(bootstrap_server, command_config)
    try:
        existed = _run(config, lambda admin: w.stop_watch(admin, name))
    except ValueError as exc:
        raise BadConfiguration(str(exc)) from exc
    click.echo(f"stopped {name}" if existed else f"{name} was already gone")


@investigate.command("list")
@with_admin
def list_(bootstrap_server: str | None, command_config: Path | None) -> None:
    """List watches: who started them and when they end."""
    config = _admin_config(bootstrap_server, command_config)
    found = _run(config, lambda admin: w.list_watches(admin, describe=True))
    now_ms = int(time.time() * 1000)
    for item in found:
        state = "EXPIRED" if item.expired(now_ms) else "active"
        configs = item.configs or {}
        click.echo(
            f"{item.name}  owner={item.owner}  expires={item.expires_text}  {state}  "
            f"match={configs.get('match') or ''}  metrics={configs.get('metrics') or ''}"
        )


@investigate.command()
@with_admin
def reap(bootstrap_server: str | None, command_config: Path | None) -> None:
    """Delete every expired watch (one shot, for cron)."""
    config = _admin_config(bootstrap_server, command_config)
    reaped = _run(config, lambda admin: w.reap(admin, int(time.time() * 1000)))
    for item in reaped:
        click.echo(f"reaped {item.name}  owner={item.owner}  expired={item.expires_text}")
    click.echo(f"{len(reaped)} expired watch(es) deleted")
