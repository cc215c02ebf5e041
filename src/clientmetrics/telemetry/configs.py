"""Validation and config-RPC semantics of CLIENT_METRICS resources (config type 16).

This is Kafka's ``ClientMetricsConfigs`` (reference §3) as Apache Kafka 4.4.0 answers
on the wire: the same checks, in the same order, with the same error codes and
messages, and the same stored form (``normalize``: list entries trimmed and each kept
once, integers as Java prints them), except where docs/kafka-differences.md says we
differ on purpose (``=`` allowed in match values, RE2 patterns, two patterns for one
selector refused, APPEND/SUBTRACT working on the list keys).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import re2

from clientmetrics.errors import ClientMetricsError
from clientmetrics.telemetry.model import SELECTORS, Subscription
from clientmetrics.wire.api import AlterOp
from clientmetrics.wire.errors import ErrorCode

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"

#: The only keys a client-metrics resource may hold, in ConfigDef definition order.
KEYS = (METRICS, INTERVAL_MS, MATCH)
#: Each key's default, as ``ConfigDef.convertToString`` renders it.
DEFAULTS: Mapping[str, str] = {METRICS: "", INTERVAL_MS: "300000", MATCH: ""}
LIST_KEYS = frozenset({METRICS, MATCH})

MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000

#: DescribeConfigs ``ConfigSource`` ids.
SOURCE_DEFAULT_CONFIG = 5
SOURCE_CLIENT_METRICS_CONFIG = 7
#: DescribeConfigs v3+ ``ConfigType`` ids.
TYPE_INT = 3
TYPE_LIST = 7

_TYPES: Mapping[str, int] = {METRICS: TYPE_LIST, INTERVAL_MS: TYPE_INT, MATCH: TYPE_LIST}
_DOCS: Mapping[str, str] = {
    METRICS: "Telemetry metric name prefix list",
    INTERVAL_MS: "Metrics push interval in milliseconds",
    MATCH: "Client match criteria",
}
# ConfigDef's LIST separator (ConfigDef.java:755-762).
_LIST_SPLIT = re.compile(r"\s*,\s*")
# Java's Integer.parseInt after ConfigDef trims: optional sign, decimal digits only.
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1

_RE2_OPTIONS = re2.Options()
# RE2 would otherwise log every rejected pattern to stderr; the error is ours to report.
_RE2_OPTIONS.log_errors = False


class ConfigError(ClientMetricsError):
    """A client-metrics config that Kafka would reject, with Kafka's code and wording."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    def __str__(self) -> str:
        return self.message


def over_cap(name: str, cap: int) -> ConfigError:
    """Creating ``name`` would exceed ``max_subscriptions`` (one message, written or read)."""
    return ConfigError(
        ErrorCode.POLICY_VIOLATION,
        f"Cannot create client metrics subscription {name}: the gateway already holds "
        f"the maximum of {cap} subscriptions (max_subscriptions)",
    )


def too_large(size: int, limit: int) -> ConfigError:
    """A subscription whose stored form would exceed what the stores keep."""
    return ConfigError(
        ErrorCode.INVALID_CONFIG,
        f"The subscription's configs take {size} bytes; at most {limit} are stored",
    )


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs result for a client-metrics resource."""

    name: str
    value: str
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    documentation: str


def parse_list(value: str) -> list[str]:
    """Parse a LIST config value the way Kafka's ``ConfigDef`` does.

    Trim; an empty string is the empty list; otherwise split on ``\\s*,\\s*``
    keeping empty entries (``","`` gives two empty strings).
    """
    trimmed = value.strip()
    if not trimmed:
        return []
    return _LIST_SPLIT.split(trimmed)


def validate(name: str, configs: Mapping[str, str]) -> Subscription | None:
    """Validate the full config map of subscription ``name``.

    Returns the parsed subscription, or ``None`` when ``configs`` is empty (the
    resource is deleted). Raises ``ConfigError`` with Kafka's code and message.
    """
    if not name:
        raise ConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in KEYS:
            raise ConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            )
    if not configs:
        return None
    # Kafka's CONFIG.parse runs every key's parser and validator in definition order
    # (metrics, interval.ms, match) before the range and pattern checks.
    metrics = _list_value(METRICS, configs)
    interval_ms = _parse_int(INTERVAL_MS, configs.get(INTERVAL_MS, DEFAULTS[INTERVAL_MS]))
    match_entries = _list_value(MATCH, configs)
    if INTERVAL_MS in configs and not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
        raise ConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Invalid value {interval_ms} for interval.ms, interval must be between "
            f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
        )
    return Subscription(
        name=name,
        metrics=tuple(metrics),
        interval_ms=interval_ms,
        match=_parse_match(match_entries),
    )


def _parse_int(key: str, value: str) -> int:
    text = value.strip()
    if _JAVA_INT.fullmatch(text) is None or not _INT_MIN <= int(text) <= _INT_MAX:
        # ConfigException from ConfigDef.parseType; the controller maps it to 40.
        raise ConfigError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {value} for configuration {key}: Not a number of type INT",
        )
    return int(text)


def _list_value(key: str, configs: Mapping[str, str]) -> list[str]:
    """A list key's entries, each once (first place kept), none empty.

    Kafka 4.4.0 keeps a repeated entry once (``a,b,a`` is stored as ``a,b``) and
    refuses an empty one (``x,,y``, ``a,``) with ``ValidList``'s message (KIP-1161).
    """
    values = list(dict.fromkeys(parse_list(configs.get(key, DEFAULTS[key]))))
    if "" in values:
        raise ConfigError(
            ErrorCode.INVALID_CONFIG, f"Configuration '{key}' values must not be empty."
        )
    return values


def normalize(configs: Mapping[str, str]) -> dict[str, str]:
    """The form Kafka stores (and describes) a valid config in.

    List entries are trimmed and kept once, joined by ``,``; ``interval.ms`` is the
    integer as Java prints it (`` +200 `` is stored as ``200``). Call after ``validate``.
    """
    out: dict[str, str] = {}
    for key, value in configs.items():
        if key in LIST_KEYS:
            out[key] = ",".join(dict.fromkeys(parse_list(value)))
        elif key == INTERVAL_MS:
            out[key] = str(int(value.strip()))
        else:
            out[key] = value
    return out


def _parse_match(entries: list[str]) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, str] = {}
    for entry in entries:
        selector, sep, raw_pattern = entry.partition("=")
        selector, pattern = selector.strip(), raw_pattern.strip()
        if not sep or not pattern or selector not in SELECTORS:
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {entry}")
        if selector in pairs:
            # Kafka's HashMap silently kept the last one; an AND of two patterns for
            # one selector is never what the operator meant, so we refuse it.
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Duplicate client matching selector {selector} in pattern: {entry}",
            )
        _compile_pattern(entry, selector, pattern)
        pairs[selector] = pattern
    return tuple(pairs.items())


def _compile_pattern(entry: str, selector: str, pattern: str) -> None:
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        if not _compiles_in_legacy_engine(pattern):
            # Invalid in both engines: Kafka keeps its legacy message for these.
            raise ConfigError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {entry}"
            ) from exc
        description = _re2_description(exc)
        raise ConfigError(
            ErrorCode.INVALID_CONFIG,
            f"Client match pattern `{selector}={pattern}` is not a valid regular "
            f"expression: {description}.",
        ) from exc


def _compiles_in_legacy_engine(pattern: str) -> bool:
    # Python's backtracking engine stands in for java.util.regex here.
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _re2_description(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    return text.rstrip(".")


def apply_incremental(
    current: Mapping[str, str], ops: Sequence[tuple[str, AlterOp | int, str | None]]
) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations to a resource's current configs.

    Returns the resulting full map; the caller validates it with ``validate``.
    APPEND adds the comma-separated entries not already present, SUBTRACT removes
    them; both work only on the list keys ``metrics`` and ``match``. Operations may
    be wire ids; an unknown id is INVALID_REQUEST.
    """
    result = dict(current)
    for key, raw_op, value in ops:
        op = _alter_op(raw_op)
        if op is AlterOp.DELETE:
            result.pop(key, None)
            continue
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT) and key not in LIST_KEYS:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Can't {op.name} to key {key} because its type is not LIST.",
            )
        if value is None:
            raise ConfigError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
        if op is AlterOp.SET:
            result[key] = value
            continue
        existing = parse_list(result.get(key, DEFAULTS.get(key, "")))
        changes = parse_list(value)
        if op is AlterOp.APPEND:
            merged = existing + [v for v in dict.fromkeys(changes) if v not in existing]
        else:
            merged = [v for v in existing if v not in changes]
        result[key] = ",".join(merged)
    return result


def _alter_op(raw: int) -> AlterOp:
    try:
        return AlterOp(raw)
    except ValueError:
        raise ConfigError(
            ErrorCode.INVALID_REQUEST, f"Unknown alter configs operation type {int(raw)}"
        ) from None


def describe(configs: Mapping[str, str]) -> list[ConfigEntry]:
    """DescribeConfigs entries for a resource (Kafka 4.1+): all three keys, always,
    in Kafka's order (by name: interval.ms, match, metrics).

    Set keys report source CLIENT_METRICS_CONFIG (7); unset keys report their
    default with source DEFAULT_CONFIG (5). A missing resource is all defaults.
    """
    return [
        ConfigEntry(
            name=key,
            value=configs[key] if key in configs else DEFAULTS[key],
            source=SOURCE_CLIENT_METRICS_CONFIG if key in configs else SOURCE_DEFAULT_CONFIG,
            read_only=False,
            sensitive=False,
            config_type=_TYPES[key],
            documentation=_DOCS[key],
        )
        for key in sorted(KEYS)
    ]
