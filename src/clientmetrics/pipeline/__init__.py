"""clientmetrics.pipeline: landed pushes to points, client windows, clients and alerts.

Three folders (docs/pipeline.md):

* ``core/`` — every rule, in pure Arrow (no pyspark): decode, series and
  rates, windows, the inventory and ``silent``, alert episodes, the schemas;
* ``spark/`` — the Spark shell: the session, grouping a batch by instance
  into the core through ``mapInArrow``, the tasks' files, state and publishing;
* ``jobs/`` — the jobs ``clientmetrics pipeline run|stream`` and
  ``spark-submit`` start.

Names are imported lazily: ``clientmetrics --help`` must work without the
``spark`` extra installed.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it.
_EXPORTS = {
    "AlertRule": "clientmetrics.pipeline.core.rules",
    "RuleSet": "clientmetrics.pipeline.core.rules",
    "load_rules": "clientmetrics.pipeline.core.rules",
    "parse_rules": "clientmetrics.pipeline.core.rules",
    "parse_condition": "clientmetrics.pipeline.core.rules",
    "PipelineConfig": "clientmetrics.pipeline.jobs.job",
    "PipelineJob": "clientmetrics.pipeline.jobs.job",
    "build_session": "clientmetrics.pipeline.spark.session",
    "local_defaults": "clientmetrics.pipeline.spark.session",
    "TableStore": "clientmetrics.pipeline.spark.storage",
    "AlertNotifier": "clientmetrics.pipeline.jobs.notify",
}

__all__ = [
    "AlertNotifier",
    "AlertRule",
    "PipelineConfig",
    "PipelineJob",
    "RuleSet",
    "TableStore",
    "build_session",
    "load_rules",
    "local_defaults",
    "parse_condition",
    "parse_rules",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
