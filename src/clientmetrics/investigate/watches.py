"""Watches: temporary client-metrics subscriptions that carry their own owner and expiry.

A watch keeps no local state. Its owner, expiry and id are in the subscription's
name (``investigate.<owner>.<expiry UTC>.<id>``), so any process that can list
client-metrics resources (KIP-1000) finds the expired ones and deletes them: the
command while it watches, ``clientmetrics investigate reap`` from cron, the
dashboard. Every change goes through the same config RPCs any admin client uses,
with the operator's credentials, so the gateway's ``[authorization]`` or the
cluster's authorizer decides.
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clientmetrics.admin import AsyncAdmin, subscription_configs
from clientmetrics.telemetry.model import kafka_uuid_text
from clientmetrics.telemetry.watch_names import (
    WATCH_PREFIX,
    WatchName,
    owner_text,
    utc_text,
    watch_name,
)
from clientmetrics.telemetry.watch_names import parse_watch_name as parse_name

__all__ = [
    "DEFAULT_EXPIRY_S",
    "DEFAULT_INTERVAL_MS",
    "PREFIX",
    "STANDARD_PREFIXES",
    "Watch",
    "create_watch",
    "list_watches",
    "literal",
    "narrow_watch",
    "owner_text",
    "parse_watch_name",
    "reap",
    "stop_watch",
    "watch_match",
    "watch_name",
]

PREFIX = WATCH_PREFIX
#: KIP-714's reactive example: "the metrics push interval is set to a low 10 seconds".
DEFAULT_INTERVAL_MS = 10_000
DEFAULT_EXPIRY_S = 30 * 60
#: The standard metric prefix of each client type (KIP-714, "Client metrics").
STANDARD_PREFIXES: Mapping[str, str] = {
    "consumer": "org.apache.kafka.consumer.",
    "producer": "org.apache.kafka.producer.",
    "any": "org.apache.kafka.",
}
# Kafka compiles match patterns as regular expressions (RE2 here, java.util.regex
# before Kafka 4.5); these are the characters both treat specially.
_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")


@dataclass(frozen=True, slots=True)
class Watch:
    """A watch as its name tells it (``telemetry.watch_names``) and its configs, when described."""

    name: str
    owner: str
    expires_at_ms: int
    watch_id: str
    configs: Mapping[str, str | None] | None = None

    def expired(self, now_ms: int) -> bool:
        """Whether the watch is past its expiry at ``now_ms``."""
        return now_ms >= self.expires_at_ms

    @property
    def expires_text(self) -> str:
        """The expiry as UTC ISO 8601 text."""
        return utc_text(self.expires_at_ms)


def parse_watch_name(name: str) -> Watch | None:
    """The watch a subscription name encodes; None for any other subscription."""
    found: WatchName | None = parse_name(name)
    if found is None:
        return None
    return Watch(found.name, found.owner, found.expires_at_ms, found.watch_id)


def literal(text: str) -> str:
    """A ``match`` pattern that matches exactly ``text``."""
    return _SPECIAL.sub(r"\\\1", text)


def instance_pattern(instance: str) -> str:
    """The ``client_instance_id`` pattern of one instance (its canonical text, as find shows
    it): Kafka's own form, base64url (``Uuid.toString()``), the only one a broker's matcher
    tries (the gateway's tries both). ``ValueError`` when ``instance`` is not a UUID."""
    try:
        parsed = uuid.UUID(instance)
    except ValueError:
        raise ValueError(f"{instance!r} is not a client instance id") from None
    return literal(kafka_uuid_text(parsed))


def watch_match(selectors: Mapping[str, str]) -> list[str]:
    """``selector=pattern`` entries of a watch's ``match``, in a stable order."""
    return [f"{key}={selectors[key]}" for key in sorted(selectors)]


async def create_watch(
    admin: AsyncAdmin,
    *,
    owner: str,
    selectors: Mapping[str, str],
    metrics: Sequence[str],
    interval_ms: int,
    expires_at_ms: int,
) -> Watch:
    """Create the watch's subscription; raises ``AdminError`` when the broker refuses."""
    watch_id = secrets.token_hex(4)
    name = watch_name(owner, expires_at_ms, watch_id)
    configs = subscription_configs(
        metrics=list(metrics), interval_ms=interval_ms, match=watch_match(selectors)
    )
    await admin.alter(name, configs)
    watch = parse_watch_name(name)
    assert watch is not None  # watch_name makes only names parse_watch_name reads
    return Watch(watch.name, watch.owner, watch.expires_at_ms, watch.watch_id, dict(configs))


async def narrow_watch(admin: AsyncAdmin, watch: Watch, selectors: Mapping[str, str]) -> None:
    """Replace the watch's ``match`` (to one ``client_instance_id``, say)."""
    await admin.alter(watch.name, {"match": ",".join(watch_match(selectors))})


async def list_watches(admin: AsyncAdmin, *, describe: bool = False) -> list[Watch]:
    """Every watch on the cluster (subscriptions named as watches), soonest expiry first."""
    found = []
    for name in await admin.list_client_metrics_resources():
        watch = parse_watch_name(name)
        if watch is None:
            continue
        if describe:
            configs = (await admin.describe(name)).as_dict()
            watch = Watch(watch.name, watch.owner, watch.expires_at_ms, watch.watch_id, configs)
        found.append(watch)
    return sorted(found, key=lambda w: (w.expires_at_ms, w.name))


async def stop_watch(admin: AsyncAdmin, name: str) -> bool:
    """Delete a watch; False when it was already gone. Only watch names are accepted."""
    if parse_watch_name(name) is None:
        raise ValueError(f"{name} is not a watch (investigate.<owner>.<expiry>.<id>)")
    current = await admin.delete(name)
    return any(entry.value is not None and not entry.is_default for entry in current.configs)


async def reap(admin: AsyncAdmin, now_ms: int) -> list[Watch]:
    """Delete every watch past its expiry at ``now_ms``; the ones deleted."""
    expired = [w for w in await list_watches(admin) if w.expired(now_ms)]
    for watch in expired:
        await admin.delete(watch.name)
    return expired
