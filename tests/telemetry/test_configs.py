"""Client-metrics config validation and config-RPC semantics (reference §3, DESIGN.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clientmetrics.errors import ClientMetricsError
from clientmetrics.telemetry.configs import (
    DEFAULTS,
    KEYS,
    AlterOp,
    ConfigEntry,
    ConfigError,
    apply_incremental,
    describe,
    normalize,
    parse_list,
    validate,
)
from clientmetrics.telemetry.model import SELECTORS, Subscription
from clientmetrics.wire.errors import ErrorCode


def _error(name: str, configs: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate(name, configs)
    return info.value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", []),
        ("   ", []),
        ("a", ["a"]),
        (" a , b ,c ", ["a", "b", "c"]),
        (",", ["", ""]),
        ("a,,b", ["a", "", "b"]),
        ("a{1,3}", ["a{1", "3}"]),
    ],
)
def test_parse_list_follows_configdef(value: str, expected: list[str]) -> None:
    assert parse_list(value) == expected


@given(st.lists(st.text(alphabet="abcxyz.*_=", min_size=1, max_size=8), min_size=1, max_size=6))
def test_parse_list_round_trips_joined_entries(entries: list[str]) -> None:
    assert parse_list(" , ".join(entries)) == entries


def test_valid_subscription_is_parsed() -> None:
    sub = validate(
        "sub1",
        {
            "metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
            "interval.ms": "30000",
            "match": "client_id = app-.* ,client_software_name=apache-kafka-java",
        },
    )
    assert sub == Subscription(
        name="sub1",
        metrics=("org.apache.kafka.producer.", "org.apache.kafka.consumer."),
        interval_ms=30000,
        match=(("client_id", "app-.*"), ("client_software_name", "apache-kafka-java")),
    )


def test_defaults_apply_to_missing_keys() -> None:
    assert validate("s", {"metrics": "*"}) == Subscription("s", ("*",), 300000, ())


def test_empty_configs_mean_delete() -> None:
    assert validate("s", {}) is None


def test_empty_metrics_means_no_metrics() -> None:
    sub = validate("s", {"metrics": ""})
    assert sub is not None
    assert sub.metrics == ()


def test_all_six_selectors_are_accepted() -> None:
    match = ",".join(f"{selector}=.*" for selector in SELECTORS)
    sub = validate("s", {"match": match})
    assert sub is not None
    assert [selector for selector, _ in sub.match] == list(SELECTORS)


@pytest.mark.parametrize(
    ("name", "configs", "code", "message"),
    [
        ("", {"metrics": "a"}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
        ("", {}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
        (
            "s",
            {"random": "x"},
            ErrorCode.INVALID_REQUEST,
            "Unknown client metrics configuration: random",
        ),
        (
            "s",
            {"interval.ms": "10"},
            ErrorCode.INVALID_REQUEST,
            "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            "s",
            {"interval.ms": "3600001"},
            ErrorCode.INVALID_REQUEST,
            "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 "
            "(1 hour)",
        ),
        ("s", {"match": "10"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: 10"),
        (
            "s",
            {"match": "client_id="},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: client_id=",
        ),
        (
            "s",
            {"match": "client_idx=a"},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: client_idx=a",
        ),
        ("s", {"match": "*=a"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: *=a"),
    ],
)
def test_errors_match_kafka(
    name: str, configs: dict[str, str], code: ErrorCode, message: str
) -> None:
    error = _error(name, configs)
    assert error.error_code is code
    assert error.message == message
    assert str(error) == message
    assert isinstance(error, ClientMetricsError)


@pytest.mark.parametrize("value", ["bbb", "1.5", "", "99999999999", "0x10"])
def test_non_integer_interval_is_invalid_config(value: str) -> None:
    error = _error("s", {"interval.ms": value})
    assert error.error_code is ErrorCode.INVALID_CONFIG
    assert "interval.ms" in error.message


@pytest.mark.parametrize("value", ["100", "3600000", " 600000 "])
def test_interval_bounds_are_inclusive(value: str) -> None:
    sub = validate("s", {"interval.ms": value})
    assert sub is not None
    assert sub.interval_ms == int(value)


def test_error_order_unknown_key_before_bad_interval() -> None:
    error = _error("s", {"interval.ms": "bbb", "zzz": "1"})
    assert error.error_code is ErrorCode.INVALID_REQUEST


def test_error_order_unparsable_interval_before_bad_match() -> None:
    assert _error("s", {"interval.ms": "x", "match": "bad"}).error_code is ErrorCode.INVALID_CONFIG
    error = _error("s", {"interval.ms": "5", "match": "bad"})
    assert error.error_code is ErrorCode.INVALID_REQUEST


def test_match_value_may_contain_equals_sign() -> None:
    sub = validate("s", {"match": "client_id=foo=bar"})
    assert sub is not None
    assert sub.match == (("client_id", "foo=bar"),)


@pytest.mark.parametrize("pattern", [r"(a)\1", "a(?=b)", "(?<!x)y"])
def test_non_re2_pattern_is_rejected_with_re2_message(pattern: str) -> None:
    error = _error("s", {"match": f"client_id={pattern}"})
    assert error.error_code is ErrorCode.INVALID_CONFIG
    assert error.message.startswith(
        f"Client match pattern `client_id={pattern}` is not a valid regular expression: "
    )
    assert error.message.endswith(".")


def test_pattern_invalid_in_every_engine_keeps_legacy_message() -> None:
    error = _error("s", {"match": "client_id=(abc"})
    assert error.message == "Illegal client matching pattern: client_id=(abc"


def test_repeated_entries_are_kept_once_and_stored_as_kafka_stores_them() -> None:
    """Kafka 4.4.0 accepts `a,b,a` and stores (and describes) `a,b`; `client_id=a,
    client_id=a` is stored as `client_id=a`; ` +200 ` as `200`."""
    parsed = validate("s", {"metrics": "a,b,a", "match": "client_id=a, client_id=a"})
    assert parsed is not None
    assert parsed.metrics == ("a", "b")
    assert parsed.match == (("client_id", "a"),)
    raw = {"metrics": " a , b,a ", "match": "client_id = a ", "interval.ms": " +200 "}
    assert normalize(raw) == {"metrics": "a,b", "match": "client_id = a", "interval.ms": "200"}


@pytest.mark.parametrize(("key", "value"), [("metrics", "x,,y"), ("metrics", "a,"), ("match", ",")])
def test_empty_list_entries_are_kafkas_error(key: str, value: str) -> None:
    error = _error("s", {key: value})
    assert error.error_code is ErrorCode.INVALID_CONFIG
    assert error.message == f"Configuration '{key}' values must not be empty."


def test_two_patterns_for_one_selector_are_refused() -> None:
    """A deliberate difference: Kafka keeps the last (a HashMap), silently."""
    error = _error("s", {"match": "client_id=a,client_id=b"})
    assert error.error_code is ErrorCode.INVALID_CONFIG


def test_set_and_delete() -> None:
    current = {"metrics": "a", "interval.ms": "1000"}
    result = apply_incremental(
        current, [("interval.ms", AlterOp.SET, "2000"), ("metrics", AlterOp.DELETE, None)]
    )
    assert result == {"interval.ms": "2000"}
    assert current == {"metrics": "a", "interval.ms": "1000"}


def test_append_adds_missing_entries_only() -> None:
    result = apply_incremental({"metrics": "a,b"}, [("metrics", AlterOp.APPEND, "b, c,d")])
    assert result == {"metrics": "a,b,c,d"}
    assert apply_incremental({}, [("match", AlterOp.APPEND, "client_id=x")]) == {
        "match": "client_id=x"
    }


def test_subtract_removes_entries() -> None:
    result = apply_incremental(
        {"match": "client_id=a,client_software_name=b"},
        [("match", AlterOp.SUBTRACT, "client_id=a,client_id=zzz")],
    )
    assert result == {"match": "client_software_name=b"}


@pytest.mark.parametrize("op", [AlterOp.APPEND, AlterOp.SUBTRACT])
def test_append_to_interval_is_rejected(op: AlterOp) -> None:
    with pytest.raises(ConfigError) as info:
        apply_incremental({}, [("interval.ms", op, "5")])
    assert info.value.error_code is ErrorCode.INVALID_CONFIG
    assert info.value.message == f"Can't {op.name} to key interval.ms because its type is not LIST."


def test_unknown_op_id_is_invalid_request() -> None:
    with pytest.raises(ConfigError) as info:
        apply_incremental({}, [("metrics", 7, "a")])
    assert info.value.error_code is ErrorCode.INVALID_REQUEST


def test_null_value_for_set_is_invalid_request() -> None:
    with pytest.raises(ConfigError) as info:
        apply_incremental({}, [("metrics", AlterOp.SET, None)])
    assert info.value.error_code is ErrorCode.INVALID_REQUEST


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, unique=True),
)
def test_append_then_subtract_leaves_only_old_entries_not_subtracted(
    old: list[str], added: list[str]
) -> None:
    appended = apply_incremental(
        {"metrics": ",".join(old)}, [("metrics", AlterOp.APPEND, ",".join(added))]
    )
    entries = parse_list(appended["metrics"])
    assert set(entries) == set(old) | set(added)
    assert len(entries) == len(set(entries))
    removed = apply_incremental(appended, [("metrics", AlterOp.SUBTRACT, ",".join(added))])
    assert parse_list(removed["metrics"]) == [v for v in old if v not in added]


def test_describe_reports_defaults_for_unset_keys() -> None:
    """In Kafka 4.4.0's order, by name."""
    entries = describe({"metrics": "org.apache.kafka."})
    assert [e.name for e in entries] == ["interval.ms", "match", "metrics"]
    assert entries[2] == ConfigEntry(
        "metrics", "org.apache.kafka.", 7, False, False, 7, "Telemetry metric name prefix list"
    )
    assert entries[0] == ConfigEntry(
        "interval.ms", "300000", 5, False, False, 3, "Metrics push interval in milliseconds"
    )
    assert entries[1] == ConfigEntry("match", "", 5, False, False, 7, "Client match criteria")


def test_describe_missing_resource_is_all_defaults() -> None:
    assert [(e.value, e.source) for e in describe({})] == [(DEFAULTS[k], 5) for k in sorted(KEYS)]
