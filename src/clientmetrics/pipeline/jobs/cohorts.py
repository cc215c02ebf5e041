"""The cohorts' profiles between batches: read for the pass, merged from its tasks' sums.

A cohort's members live in different shares, so no task sees a whole cohort:
each task writes its points' sums (``cohort_partials``), and the driver merges
them into the cohort state (``core.cohorts.merge_cohorts``, a bounded small
table) kept per batch id like the progress, so a replayed batch reads what its
first try read.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from clientmetrics.pipeline.core.cohorts import merge_cohorts
from clientmetrics.pipeline.core.rules import RuleSet
from clientmetrics.pipeline.core.schemas import COHORT_PARTIALS_ARROW, COHORT_STATE_ARROW
from clientmetrics.pipeline.spark.files import read_parquet
from clientmetrics.pipeline.spark.storage import TableStore

_NAME = "cohorts"


def judged(rules: RuleSet) -> bool:
    """Whether any rule judges points against their cohort."""
    return any(rule.on == "cohort" for rule in rules.rules)


def read_cohorts(store: TableStore, rules: RuleSet, batch_id: int) -> pa.Table | None:
    """The cohort state the previous batch left (None when no rule needs it)."""
    if not judged(rules):
        return None
    return store.read_state_table(_NAME, batch_id, COHORT_STATE_ARROW)


def keep_cohorts(
    store: TableStore, cohorts: pa.Table | None, partials: Sequence[str], batch_id: int
) -> None:
    """Merge the batch's partial sums (files the pass wrote) and keep the result."""
    if cohorts is None:
        return
    tables = [read_parquet(path, COHORT_PARTIALS_ARROW) for path in partials]
    summed = pa.concat_tables([COHORT_PARTIALS_ARROW.empty_table(), *tables])
    store.write_state_table(merge_cohorts(cohorts, summed), _NAME, batch_id)
