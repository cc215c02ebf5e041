"""clientmetrics.dashboard: a read-only web page over the pipeline's tables.

Client inventory, per-client charts (server-side SVG), alerts, subscriptions and
the gateway's own counters; no JavaScript and nothing fetched from the network.

    from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer

    server = DashboardServer(Dashboard(DashboardConfig(Path("cm-data"))))
    server.start()
    print(server.url)
"""

from clientmetrics.dashboard.alerts import WORKFLOW_LABELS, Alert, episodes
from clientmetrics.dashboard.app import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.dashboard.app_types import Response
from clientmetrics.dashboard.inventory import InventoryPage, InventoryQuery, inventory_page
from clientmetrics.dashboard.series import Chart, SeriesReader
from clientmetrics.dashboard.sources import (
    GatewayMetrics,
    GatewaySample,
    SubscriptionView,
    parse_gateway_metrics,
    subscriptions_from_admin,
    subscriptions_from_sqlite,
)
from clientmetrics.dashboard.svg import Line, line_chart
from clientmetrics.dashboard.tables import TableReader

__all__ = [
    "WORKFLOW_LABELS",
    "Alert",
    "Chart",
    "Dashboard",
    "DashboardConfig",
    "DashboardServer",
    "GatewayMetrics",
    "GatewaySample",
    "InventoryPage",
    "InventoryQuery",
    "Line",
    "Response",
    "SeriesReader",
    "SubscriptionView",
    "TableReader",
    "episodes",
    "inventory_page",
    "line_chart",
    "parse_gateway_metrics",
    "subscriptions_from_admin",
    "subscriptions_from_sqlite",
]
