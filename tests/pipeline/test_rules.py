"""Alert rules from TOML, including KIP-714's proactive-monitoring condition as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.rules import AlertRule, load_rules, parse_condition, parse_rules


def test_the_kip_example_is_expressible_as_written(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        'webhook = "http://127.0.0.1:9/alerts"\n'
        "[[rule]]\n"
        'name = "slow"\n'
        'metric = "org.apache.kafka.producer.node.request.latency.avg"\n'
        'condition = "exceeded 5000 ms for more than 180 seconds"\n'
    )
    rules = load_rules(path)
    assert rules.webhook == "http://127.0.0.1:9/alerts"
    assert rules.rules == (
        AlertRule(
            name="slow",
            metric="org.apache.kafka.producer.node.request.latency.avg",
            op=">",
            threshold=5000.0,
            duration_seconds=180.0,
            strict=True,
            unit="ms",
        ),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "has exceeded the threshold of 5000 milliseconds for more than 3 minutes",
            (">", 5000.0, "milliseconds", 180.0, True),
        ),
        ("below 0.5 for at least 90s", ("<", 0.5, "", 90.0, False)),
        (">= 1e3 for 2 min", (">=", 1000.0, "", 120.0, False)),
    ],
)
def test_conditions_in_words(text: str, expected: tuple[object, ...]) -> None:
    assert parse_condition(text) == expected


def test_structured_keys_and_prefix() -> None:
    rules = parse_rules(
        {
            "rule": [
                {
                    "name": "p",
                    "metric": "org.apache.kafka.",
                    "op": "<=",
                    "threshold": 3,
                    "for": "2 minutes",
                }
            ]
        }
    )
    (rule,) = rules.rules
    assert (rule.op, rule.threshold, rule.duration_seconds, rule.strict, rule.is_prefix) == (
        "<=",
        3.0,
        120.0,
        False,
        True,
    )


@pytest.mark.parametrize(
    "document",
    [
        {"rule": [{"name": "x", "metric": "m", "condition": "is weird"}]},
        {"rule": [{"name": "x", "metric": "m", "op": "~", "threshold": 1}]},
        {"rule": [{"name": "x", "metric": "m", "op": ">", "threshold": "1"}]},
        {"rule": [{"name": "x", "metric": "m", "op": ">", "threshold": 1, "for": "3 fortnights"}]},
        {"rule": [{"name": "x", "metric": ""}]},
        {"rule": [{"name": "x", "metric": "a", "op": ">", "threshold": 1}] * 2},
        {"rule": {"name": "x"}},
        # TOML's nan and inf are floats; 1e999 parses as inf: nothing ever crosses them.
        {"rule": [{"name": "x", "metric": "m", "op": ">", "threshold": float("nan")}]},
        {"rule": [{"name": "x", "metric": "m", "op": "<", "threshold": float("-inf")}]},
        {"rule": [{"name": "x", "metric": "m", "condition": "above 1e999 ms for 5 s"}]},
    ],
)
def test_bad_rules_are_configuration_errors(document: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        parse_rules(document)


def test_unreadable_file_is_a_configuration_error(tmp_path: Path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text("[[rule]\n")
    with pytest.raises(ConfigurationError):
        load_rules(bad)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"rule": [{"name": "x", "metrc": "m", "condition": "above 1 for 1 s"}]},
            "rule #0: unknown key 'metrc' (known: name, metric, condition, op, threshold, unit,"
            " for, strict, on)",
        ),
        (
            {"rules": [{"name": "x", "metric": "m"}]},
            "rules file: unknown key 'rules' "
            "(known: rule, webhook, sink, alertmanager, findings, finding)",
        ),
    ],
)
def test_mistyped_keys_are_named(document: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_rules(document)
    assert str(caught.value) == message
