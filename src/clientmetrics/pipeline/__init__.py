"""clientmetrics.pipeline: landed pushes to points, client windows, clients and alerts (Spark).

Names are imported lazily: ``clientmetrics --help`` must work without the
``spark`` extra installed, and only this package imports pyspark.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it.
_EXPORTS = {
    "AlertRule": "clientmetrics.pipeline.rules",
    "RuleSet": "clientmetrics.pipeline.rules",
    "load_rules": "clientmetrics.pipeline.rules",
    "parse_rules": "clientmetrics.pipeline.rules",
    "parse_condition": "clientmetrics.pipeline.rules",
    "PipelineConfig": "clientmetrics.pipeline.job",
    "PipelineJob": "clientmetrics.pipeline.job",
    "build_session": "clientmetrics.pipeline.session",
    "TableStore": "clientmetrics.pipeline.storage",
    "AlertNotifier": "clientmetrics.pipeline.notify",
    "explode_points": "clientmetrics.pipeline.points",
    "with_series_key": "clientmetrics.pipeline.points",
    "with_normalised_values": "clientmetrics.pipeline.points",
    "next_series_state": "clientmetrics.pipeline.points",
    "normalised_points": "clientmetrics.pipeline.points",
    "with_running_values": "clientmetrics.pipeline.arrow_series",
    "series_keys": "clientmetrics.pipeline.arrow_series",
    "points_named_by": "clientmetrics.pipeline.alerts",
    "local_defaults": "clientmetrics.pipeline.session",
    "aggregate_window_partials": "clientmetrics.pipeline.windows",
    "merge_window_partials": "clientmetrics.pipeline.windows",
    "filter_on_time": "clientmetrics.pipeline.windows",
    "select_closed_windows": "clientmetrics.pipeline.windows",
    "select_open_windows": "clientmetrics.pipeline.windows",
    "aggregate_client_pushes": "clientmetrics.pipeline.clients",
    "merge_inventory": "clientmetrics.pipeline.clients",
    "with_client_status": "clientmetrics.pipeline.clients",
    "evaluate_rules": "clientmetrics.pipeline.alerts",
    "track_alert_episodes": "clientmetrics.pipeline.alerts",
    "select_alert_events": "clientmetrics.pipeline.alerts",
    "select_open_episodes": "clientmetrics.pipeline.alerts",
    "rules_frame": "clientmetrics.pipeline.alerts",
}

__all__ = [
    "AlertNotifier",
    "AlertRule",
    "PipelineConfig",
    "PipelineJob",
    "RuleSet",
    "TableStore",
    "aggregate_client_pushes",
    "aggregate_window_partials",
    "build_session",
    "evaluate_rules",
    "explode_points",
    "filter_on_time",
    "load_rules",
    "local_defaults",
    "merge_inventory",
    "merge_window_partials",
    "next_series_state",
    "normalised_points",
    "parse_condition",
    "parse_rules",
    "points_named_by",
    "rules_frame",
    "select_alert_events",
    "select_closed_windows",
    "select_open_episodes",
    "select_open_windows",
    "series_keys",
    "track_alert_episodes",
    "with_client_status",
    "with_normalised_values",
    "with_running_values",
    "with_series_key",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
