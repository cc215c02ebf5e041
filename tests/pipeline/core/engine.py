"""One pass of the core's rule engine over decoded points: the tests' and benches' one home.

What a streaming batch does to its points for alerts, without the Spark shell
and without silences inside the batch (``core.lives``): key and normalise the
points with the series state carried in, judge them with the rules and the
alert state carried in, and hand back the events and both states to carry on.
"""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.pipeline.core.alerts import (
    alert_events,
    open_episodes,
    rule_candidates,
    track_episodes,
)
from clientmetrics.pipeline.core.baselines import score_points
from clientmetrics.pipeline.core.cohorts import merge_cohorts
from clientmetrics.pipeline.core.rates import merge_series, normalise, series_lasts
from clientmetrics.pipeline.core.rules import AlertRule
from clientmetrics.pipeline.core.schemas import (
    ALERT_STATE_ARROW,
    BASELINE_STATE_ARROW,
    COHORT_STATE_ARROW,
    SERIES_STATE_ARROW,
)
from clientmetrics.pipeline.core.series import running_values

__all__ = ["EnginePass", "engine_pass"]


class EnginePass:
    """A run of batches through the engine, carrying the series, baseline and alert states."""

    def __init__(self, rules: tuple[AlertRule, ...], inventory: pa.Table) -> None:
        self.rules = rules
        self.inventory = inventory
        self.series_state = SERIES_STATE_ARROW.empty_table()
        self.alert_state = ALERT_STATE_ARROW.empty_table()
        self.baselines = BASELINE_STATE_ARROW.empty_table()
        self.cohorts = COHORT_STATE_ARROW.empty_table()

    def batch(self, decoded: pa.Table) -> pa.Table:
        """The alert events (``ALERTS_ARROW``) of one batch of decoded points."""
        running, order = running_values(decoded)
        points = normalise(running, self.series_state)
        self.series_state = merge_series(self.series_state, series_lasts(points, order))
        scored = score_points(
            points, order, self.baselines, self.cohorts, self.inventory, self.rules
        )
        self.baselines = scored.state
        self.cohorts = merge_cohorts(self.cohorts, scored.partials)
        candidates = rule_candidates(scored.points, order, self.rules)
        episodes = track_episodes(candidates, self.alert_state, self.rules)
        self.alert_state = open_episodes(episodes)
        return alert_events(episodes, self.rules, self.inventory)


def engine_pass(decoded: pa.Table, rules: tuple[AlertRule, ...], inventory: pa.Table) -> pa.Table:
    """The alert events of one batch with nothing carried in."""
    return EnginePass(rules, inventory).batch(decoded)
