"""clientmetrics.investigate: KIP-714's reactive monitoring as a library and a command.

Find clients by what their owner knows (``find_clients``), watch them through a
temporary subscription that names its owner and expiry (``create_watch``,
``reap``), and follow their pushes live from the gateway's landing zone
(``LandingTail``) or the telemetry topic (``TopicTail``), through ``live_points``.
The terminal command is ``clientmetrics investigate``; see docs/investigate.md.
"""

from clientmetrics.investigate.find import ClientHit, Query, find_clients, subscriptions_from
from clientmetrics.investigate.live import LivePoint, Selection, live_points
from clientmetrics.investigate.tail import LandingTail
from clientmetrics.investigate.topic import TopicTail
from clientmetrics.investigate.watches import (
    DEFAULT_EXPIRY_S,
    DEFAULT_INTERVAL_MS,
    STANDARD_PREFIXES,
    Watch,
    create_watch,
    list_watches,
    narrow_watch,
    parse_watch_name,
    reap,
    stop_watch,
    watch_name,
)

__all__ = [
    "DEFAULT_EXPIRY_S",
    "DEFAULT_INTERVAL_MS",
    "STANDARD_PREFIXES",
    "ClientHit",
    "LandingTail",
    "LivePoint",
    "Query",
    "Selection",
    "TopicTail",
    "Watch",
    "create_watch",
    "find_clients",
    "list_watches",
    "live_points",
    "narrow_watch",
    "parse_watch_name",
    "reap",
    "stop_watch",
    "subscriptions_from",
    "watch_name",
]
