"""Alert rules, loaded from TOML.

A rule names a metric (exact name, or a prefix ending in ``.``), a comparison, a
threshold and a duration. The condition can be written in KIP-714's own words::

    [[rule]]
    name = "slow-requests"
    metric = "org.apache.kafka.producer.node.request.latency.avg"
    condition = "exceeded 5000 ms for more than 180 seconds"

or as separate keys::

    [[rule]]
    name = "slow-requests"
    metric = "org.apache.kafka.producer."      # a prefix: every producer metric
    op = ">"
    threshold = 5000
    for = "180s"
    strict = true                               # "more than": held longer than 180 s

``on`` says what the condition judges: ``value`` (default), ``rate`` (a sum's
increase per second), ``profile`` or ``cohort`` (the distance from the client's
own recent history, or its cohort's, in spreads; ``core/baselines.py``).

Optional top-level keys: ``webhook`` (a URL to POST new alerts to), ``sink``
(a JSON-lines file; default ``DATA/alerts.jsonl``), ``alertmanager`` (a
Prometheus Alertmanager's URL), and ``findings = true`` with ``[finding.NAME]``
tables: the shipped findings catalogue (``core/findings.py``), as rules.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.findings import JUDGED_COLUMNS, finding_rules

#: Comparison operators and the words that may stand for them.
OPERATORS = {
    ">": ">",
    "above": ">",
    "exceeded": ">",
    "exceeds": ">",
    "over": ">",
    ">=": ">=",
    "<": "<",
    "below": "<",
    "under": "<",
    "<=": "<=",
    "==": "==",
    "equals": "==",
    "!=": "!=",
}

_UNITS_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}

_OPS = "|".join(re.escape(op) for op in sorted(OPERATORS, key=len, reverse=True))
_CONDITION = re.compile(
    rf"^\s*(?:has\s+)?(?P<op>{_OPS})\s+(?:the\s+threshold\s+of\s+)?"
    r"(?P<threshold>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-z/%]+)?\s+"
    r"for\s+(?P<qual>more\s+than|longer\s+than|over|at\s+least)?\s*"
    r"(?P<duration>\d+(?:\.\d+)?)\s*(?P<dunit>[A-Za-z]+)\s*$",
    re.IGNORECASE,
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One validated alert rule."""

    name: str
    #: An exact metric name, or a prefix when it ends with ``.``.
    metric: str
    op: str
    threshold: float
    duration_seconds: float
    #: True when the condition must hold for *more than* the duration.
    strict: bool
    #: The threshold's unit as written (informational: clients send no units).
    unit: str = ""
    #: What the condition judges (``findings.JUDGED_COLUMNS``): the point's ``value``;
    #: for a sum its ``rate`` per second since the series' previous point
    #: (``core/rates.py``: restarts and counter resets start a new rate, never a
    #: negative one); or its distance from the client's own ``profile`` or its
    #: ``cohort``'s, in spreads (``core/baselines.py``).
    on: str = "value"

    @property
    def is_prefix(self) -> bool:
        """Whether ``metric`` selects every metric name that starts with it."""
        return self.metric.endswith(".")


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules file: rules plus where new alerts are announced."""

    rules: tuple[AlertRule, ...] = ()
    webhook: str | None = None
    sink: str | None = None
    #: A Prometheus Alertmanager (its base URL) to deliver incidents to.
    alertmanager: str | None = None


def load_rules(path: Path) -> RuleSet:
    """Load and validate a TOML rules file; raise ``ConfigurationError`` when it is wrong."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read rules file {path}: {exc}") from exc
    return parse_rules(document)


def parse_rules(document: dict[str, Any]) -> RuleSet:
    """Validate a parsed rules document."""
    _no_unknown_keys("rules file", document, FILE_KEYS)
    raw_rules = document.get("rule", [])
    if not isinstance(raw_rules, list):
        raise ConfigurationError("'rule' must be an array of tables ([[rule]])")
    rules = tuple(_rule(index, raw) for index, raw in enumerate(raw_rules))
    rules += tuple(
        AlertRule(name, metric, *_finding_condition(name, condition), on=on)
        for name, metric, condition, on in finding_rules(document)
    )
    names = [rule.name for rule in rules]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"rule names must be unique: {names}")
    webhook = document.get("webhook")
    sink = document.get("sink")
    alertmanager = document.get("alertmanager")
    for key, value in (("webhook", webhook), ("sink", sink), ("alertmanager", alertmanager)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"'{key}' must be a string")
    return RuleSet(rules=rules, webhook=webhook, sink=sink, alertmanager=alertmanager)


def _finding_condition(name: str, condition: str) -> tuple[str, float, float, bool, str]:
    """A finding's condition as ``AlertRule``'s fields after its metric."""
    try:
        op, threshold, unit, duration, strict = parse_condition(condition)
    except ConfigurationError as exc:
        raise ConfigurationError(f"finding {name!r}: {exc}") from exc
    return op, threshold, duration, strict, unit


def parse_condition(text: str) -> tuple[str, float, str, float, bool]:
    """Parse ``"exceeded 5000 ms for more than 180 seconds"``.

    Returns (operator, threshold, threshold unit, duration in seconds, strict).
    """
    match = _CONDITION.match(text)
    if match is None:
        raise ConfigurationError(
            f"cannot parse condition {text!r}; expected e.g. "
            "'exceeded 5000 ms for more than 180 seconds'"
        )
    op = OPERATORS[match["op"].lower()]
    qualifier = (match["qual"] or "").lower()
    strict = qualifier not in {"at least", ""}
    duration = _seconds(f"{match['duration']}{match['dunit']}")
    return op, float(match["threshold"]), match["unit"] or "", duration, strict


#: The keys a ``[[rule]]`` table may have, and the top-level keys of a rules file.
RULE_KEYS = ("name", "metric", "condition", "op", "threshold", "unit", "for", "strict", "on")
FILE_KEYS = ("rule", "webhook", "sink", "alertmanager", "findings", "finding")


def _no_unknown_keys(where: str, table: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key {', '.join(map(repr, unknown))} (known: {', '.join(known)})"
        )


def _rule(index: int, raw: object) -> AlertRule:
    if not isinstance(raw, dict):
        raise ConfigurationError(f"rule #{index} must be a table")
    _no_unknown_keys(f"rule #{index}", raw, RULE_KEYS)
    name = raw.get("name", f"rule-{index}")
    metric = raw.get("metric")
    if not isinstance(name, str) or not isinstance(metric, str) or not metric:
        raise ConfigurationError(f"rule #{index} needs a string 'name' and a non-empty 'metric'")
    if "condition" in raw:
        op, threshold, unit, duration, strict = parse_condition(str(raw["condition"]))
    else:
        op = OPERATORS.get(str(raw.get("op", "")).lower(), "")
        if not op:
            raise ConfigurationError(f"rule {name!r}: 'op' must be one of {sorted(OPERATORS)}")
        threshold_raw = raw.get("threshold")
        if isinstance(threshold_raw, bool) or not isinstance(threshold_raw, int | float):
            raise ConfigurationError(f"rule {name!r}: 'threshold' must be a number")
        threshold = float(threshold_raw)
        unit = str(raw.get("unit", ""))
        duration = _seconds(raw.get("for", 0))
        strict = bool(raw.get("strict", False))
    if not math.isfinite(threshold):
        # TOML spells nan and inf as floats (and 1e999 is inf): no measurement crosses them.
        raise ConfigurationError(f"rule {name!r}: the threshold must be a finite number")
    on = raw.get("on", "value")
    if on not in JUDGED_COLUMNS:
        raise ConfigurationError(f"rule {name!r}: 'on' must be one of {', '.join(JUDGED_COLUMNS)}")
    return AlertRule(name, metric, op, threshold, duration, strict, unit, on)


def _seconds(value: object) -> float:
    if isinstance(value, bool):
        raise ConfigurationError(f"bad duration {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        unit = (match[2] or "s").lower() if match else ""
        if match is None or unit not in _UNITS_SECONDS:
            raise ConfigurationError(f"bad duration {value!r}; use e.g. '180s', '3 minutes'")
        seconds = float(match[1]) * _UNITS_SECONDS[unit]
    if seconds < 0:
        raise ConfigurationError(f"duration must not be negative: {value!r}")
    return seconds
