"""The findings catalogue: what the standard metrics mean, as rules of the one engine.

A finding is a named rule that ships with the product (``data/findings.toml``)
with what it means, the metrics it reads, its condition (in the words
``rules.parse_condition`` reads, KIP-714's own: "below 0.2 for at least 120
seconds"), and the change to suggest. ``rules.parse_rules`` turns the findings
a rules file enables into ``AlertRule`` objects beside the user's own, so
findings fire, resolve and carry labels exactly as threshold rules do (one
engine, ``core/alerts.py``). A rules file enables the catalogue with
``findings = true`` and disables or tunes a finding by name under
``[finding.NAME]`` (``enabled``, ``condition``).

A finding that reads several metrics (the producer's and the consumer's copy)
becomes one rule per metric, named ``NAME/producer`` and ``NAME/consumer``
(rule names are unique in the engine); ``finding_of`` maps a rule's name back.

A finding on a sum (a counter such as ``coordinator.rebalance.latency.total``)
says ``on = "rate"``: its condition judges the counter's increase per second
(``core/rates.py``), which a restart or a counter reset does not make negative.
An out-of-profile finding says ``on = "profile"`` (the client's own recent
history) or ``on = "cohort"`` (its cohort's): its condition judges how far each
point lies from that baseline, in spreads (``core/baselines.py``), and it may
read several metrics of one client kind.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from clientmetrics.errors import ConfigurationError

__all__ = ["JUDGED_COLUMNS", "Finding", "catalogue", "finding_of", "finding_rules"]

_PREFIX = "org.apache.kafka."
#: What a ``[finding.NAME]`` table of a rules file may set.
OVERRIDE_KEYS = ("enabled", "condition")
_DEFINITION_KEYS = ("summary", "meaning", "metrics", "condition", "suggestion")
#: What a condition may judge (a catalogue entry's or a ``[[rule]]``'s ``on``, default
#: ``value``), and the column of the points it reads: a gauge's value, a sum's rate per
#: second (``core/rates.py``), or how far a point is from its client's own profile or its
#: cohort's, in spreads (``core/baselines.py``).
JUDGED_COLUMNS = {
    "value": "value",
    "rate": "rate_per_second",
    "profile": "profile_score",
    "cohort": "cohort_score",
}
_JUDGED = tuple(JUDGED_COLUMNS)
#: What out-of-profile conditions judge: they may read several metrics of one client kind.
BASELINED = ("profile", "cohort")


@dataclass(frozen=True, slots=True)
class Finding:
    """One catalogue entry."""

    name: str
    summary: str
    meaning: str
    metrics: tuple[str, ...]
    condition: str
    suggestion: str
    #: What the condition judges (``JUDGED_COLUMNS``).
    on: str = "value"

    def rules(self) -> tuple[tuple[str, str], ...]:
        """(rule name, metric) per metric the finding reads.

        ``NAME`` for one metric; ``NAME/producer`` and ``NAME/consumer`` for one
        per client kind; ``NAME/producer.node.request.latency.avg`` (the metric
        without ``org.apache.kafka.``) when a kind has several (out of profile).
        """
        if len(self.metrics) == 1:
            return ((self.name, self.metrics[0]),)
        if len({_kind(metric) for metric in self.metrics}) == len(self.metrics):
            return tuple((f"{self.name}/{_kind(metric)}", metric) for metric in self.metrics)
        return tuple((f"{self.name}/{m.removeprefix(_PREFIX)}", m) for m in self.metrics)


def _kind(metric: str) -> str:
    return metric.removeprefix(_PREFIX).split(".", 1)[0]


def parse_catalogue(document: dict[str, Any]) -> tuple[Finding, ...]:
    """Validate a catalogue document (the shipped one, or a test's)."""
    table = document.get("finding")
    if not isinstance(table, dict) or set(document) != {"finding"}:
        raise ConfigurationError("a findings catalogue has one top-level table, [finding.NAME]")
    found = []
    for name, raw in table.items():
        if not isinstance(raw, dict) or set(raw) - {"on"} != set(_DEFINITION_KEYS):
            raise ConfigurationError(
                f"finding {name!r} needs exactly {', '.join(_DEFINITION_KEYS)} (and maybe on)"
            )
        on = raw.get("on", "value")
        if on not in _JUDGED:
            raise ConfigurationError(f"finding {name!r}: 'on' is one of {', '.join(_JUDGED)}")
        metrics = raw["metrics"]
        if (
            not isinstance(metrics, list)
            or not metrics
            or not all(isinstance(metric, str) and metric.startswith(_PREFIX) for metric in metrics)
        ):
            raise ConfigurationError(f"finding {name!r}: 'metrics' must name standard metrics")
        if on not in BASELINED and len({_kind(metric) for metric in metrics}) != len(metrics):
            raise ConfigurationError(f"finding {name!r}: one metric per client kind")
        texts = [raw[key] for key in ("summary", "meaning", "condition", "suggestion")]
        if not all(isinstance(text, str) and text for text in texts):
            raise ConfigurationError(f"finding {name!r}: texts must be non-empty strings")
        summary, meaning, condition, suggestion = texts
        found.append(Finding(name, summary, meaning, tuple(metrics), condition, suggestion, on))
    return tuple(found)


@cache
def catalogue() -> tuple[Finding, ...]:
    """The findings that ship with the product."""
    text = resources.files(__package__).joinpath("data/findings.toml").read_text("utf-8")
    return parse_catalogue(tomllib.loads(text))


def finding_rules(document: dict[str, Any]) -> tuple[tuple[str, str, str, str], ...]:
    """(rule name, metric, condition, what it judges) of every finding a document enables.

    ``findings = true`` enables the catalogue; ``[finding.NAME]`` tables turn
    one off (``enabled = false``) or replace its ``condition``. A table naming
    no shipped finding, or with another key, is an error (a typo must not
    silently leave a finding on).
    """
    enabled = document.get("findings", False)
    if not isinstance(enabled, bool):
        raise ConfigurationError("'findings' must be true or false")
    overrides = document.get("finding", {})
    if not isinstance(overrides, dict):
        raise ConfigurationError("'finding' must be tables, [finding.NAME]")
    by_name = {finding.name: finding for finding in catalogue()}
    for name, override in overrides.items():
        if name not in by_name:
            raise ConfigurationError(
                f"no finding named {name!r} (shipped: {', '.join(sorted(by_name))})"
            )
        if not isinstance(override, dict) or set(override) - set(OVERRIDE_KEYS):
            raise ConfigurationError(f"[finding.{name}] may set only {', '.join(OVERRIDE_KEYS)}")
        if not isinstance(override.get("enabled", True), bool):
            raise ConfigurationError(f"[finding.{name}] 'enabled' must be true or false")
        if not isinstance(override.get("condition", ""), str):
            raise ConfigurationError(f"[finding.{name}] 'condition' must be a string")
    if not enabled:
        return ()
    rules = []
    for finding in catalogue():
        override = overrides.get(finding.name, {})
        if not override.get("enabled", True):
            continue
        condition = override.get("condition", finding.condition)
        rules += [(rule, metric, condition, finding.on) for rule, metric in finding.rules()]
    return tuple(rules)


def finding_of(rule: str) -> Finding | None:
    """The catalogue finding a rule name was made from, if any."""
    for finding in catalogue():
        if any(rule == name for name, _ in finding.rules()):
            return finding
    return None
