"""The config-RPC cases the differential test sends to Kafka 4.4 and to the gateway.

Each alter case is one IncrementalAlterConfigs resource sent with ``validate_only``;
the answer compared is (error code, error message). Where the two differ on purpose
the case names its row of docs/kafka-differences.md and pins both answers, each as
Kafka 4.4.0 and the gateway gave them.
"""

from __future__ import annotations

from dataclasses import dataclass

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INVALID_CONFIG, INVALID_REQUEST = 40, 42
CLIENT_METRICS, TOPIC = 16, 2

Op = tuple[str, int, str | None]
Answer = tuple[int, str | None]


@dataclass(frozen=True)
class AlterCase:
    label: str
    ops: tuple[Op, ...]
    #: The answer both give (None: they differ, see ``row``).
    both: Answer | None = None
    row: str = ""
    kafka: Answer | None = None
    gateway: Answer | None = None
    name: str = "conf-check"
    resource_type: int = CLIENT_METRICS


def _bad(message: str, code: int = INVALID_CONFIG) -> Answer:
    return (code, message)


OK: Answer = (0, None)

ALTER_CASES = (
    AlterCase("unknown key", (("bogus", SET, "x"),), both=_bad(
        "Unknown client metrics configuration: bogus", INVALID_REQUEST)),
    AlterCase("interval too small", (("interval.ms", SET, "10"),), both=_bad(
        "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        INVALID_REQUEST)),
    AlterCase("interval too large", (("interval.ms", SET, "3600001"),), both=_bad(
        "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 "
        "(1 hour)", INVALID_REQUEST)),
    AlterCase("interval not a number", (("interval.ms", SET, "abc"),), both=_bad(
        "Invalid value abc for configuration interval.ms: Not a number of type INT")),
    AlterCase("interval with blanks and a sign", (("interval.ms", SET, " +200 "),), both=OK),
    AlterCase("match without =", (("match", SET, "foo"),), both=_bad(
        "Illegal client matching pattern: foo")),
    AlterCase("match with an empty pattern", (("match", SET, "client_id="),), both=_bad(
        "Illegal client matching pattern: client_id=")),
    AlterCase("match with a trailing =", (("match", SET, "client_id=a="),), both=OK),
    AlterCase("match with a bad regex", (("match", SET, "client_id=("),), both=_bad(
        "Illegal client matching pattern: client_id=(")),
    AlterCase("match with an unknown selector", (("match", SET, "cluster=x"),), both=_bad(
        "Illegal client matching pattern: cluster=x")),
    AlterCase("match with a repeated entry", (("match", SET, "client_id=a,client_id=a"),),
              both=OK),
    AlterCase("metrics with a repeated entry", (("metrics", SET, "a,b,a"),), both=OK),
    AlterCase("metrics empty", (("metrics", SET, ""),), both=OK),
    AlterCase("metrics with an empty entry", (("metrics", SET, "x,,y"),), both=_bad(
        "Configuration 'metrics' values must not be empty.")),
    AlterCase("metrics ending in a comma", (("metrics", SET, "a,"),), both=_bad(
        "Configuration 'metrics' values must not be empty.")),
    AlterCase("match of a comma", (("match", SET, ","),), both=_bad(
        "Configuration 'match' values must not be empty.")),
    AlterCase("SET of null", (("metrics", SET, None),), both=_bad(
        "Null value not supported for : metrics", INVALID_REQUEST)),
    AlterCase("DELETE of an unset key", (("interval.ms", DELETE, None),), both=OK),
    AlterCase("APPEND to interval.ms", (("interval.ms", APPEND, "5"),), both=_bad(
        "Can't APPEND to key interval.ms because its type is not LIST.")),
    AlterCase("empty name", (("metrics", SET, "x"),), name="", both=_bad(
        "Subscription name can't be empty", INVALID_REQUEST)),
    # Deliberate differences.
    AlterCase("match value with =", (("match", SET, "client_id=a=b"),), row="match-equals",
              kafka=_bad("Illegal client matching pattern: client_id=a=b"), gateway=OK),
    AlterCase("match with a backreference", (("match", SET, r"client_id=(a)\1"),), row="re2",
              kafka=OK, gateway=_bad(r"Client match pattern `client_id=(a)\1` is not a valid "
                                     r"regular expression: invalid escape sequence: \1.")),
    AlterCase("match regex with a comma", (("match", SET, "client_id=a{1,3}"),), row="re2",
              kafka=_bad("Illegal client matching pattern: client_id=a{1"),
              gateway=_bad("Illegal client matching pattern: 3}")),
    AlterCase("two patterns for one selector", (("match", SET, "client_id=a,client_id=b"),),
              row="duplicate-selector", kafka=OK, gateway=_bad(
                  "Duplicate client matching selector client_id in pattern: client_id=b")),
    AlterCase("APPEND to metrics", (("metrics", APPEND, "x"),), row="append-subtract",
              kafka=_bad("Can't APPEND to key metrics because its type is not LIST."),
              gateway=OK),
    AlterCase("SUBTRACT from match", (("match", SUBTRACT, "client_id=x"),),
              row="append-subtract", gateway=OK,
              kafka=_bad("Can't SUBTRACT to key match because its type is not LIST.")),
    AlterCase("unknown operation", (("metrics", 7, "x"),), row="unknown-op",
              kafka=(-1, None), gateway=_bad("Unknown alter configs operation type 7",
                                             INVALID_REQUEST)),
    AlterCase("a topic's config", (("retention.ms", SET, "1"),), name="t",
              resource_type=TOPIC, row="standalone-resources",
              kafka=(3, "The topic 't' does not exist."),
              gateway=_bad("Resource type TOPIC is not served by this gateway in standalone "
                           "mode; only CLIENT_METRICS (16) resources are.", INVALID_REQUEST)),
)  # fmt: skip
