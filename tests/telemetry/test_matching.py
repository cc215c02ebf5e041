"""Subscription matching: checklist 41 and the DESIGN differences (RE2, `=`, uuid forms)."""

from __future__ import annotations

import uuid

import pytest

from clientmetrics.telemetry import PatternCache, kafka_uuid_text
from clientmetrics.telemetry.matching import matching_subscriptions

from .conftest import make_ctx, manager, sub, subscribe

IID = uuid.UUID("7b5a3f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b")


def matches(*pairs: tuple[str, str], ctx_kwargs: dict[str, object] | None = None) -> bool:
    compiled = PatternCache().compile_subscription(sub(match=pairs))
    return compiled.matches(IID, make_ctx(**(ctx_kwargs or {})))  # type: ignore[arg-type]


def test_empty_match_list_matches_everyone() -> None:
    """Checklist 41: the empty map matches."""
    assert matches()


@pytest.mark.parametrize(
    "pair",
    [
        ("client_id", ".*"),
        ("client_id", "probe-client"),
        ("client_id", "probe-.*"),
        ("client_software_name", "librdkafka"),
        ("client_software_version", r"2\.16\..*"),
        ("client_source_address", r"127\.0\.0\.1"),
        ("client_source_port", "5[0-9]+"),
    ],
)
def test_matching_values(pair: tuple[str, str]) -> None:
    """Checklist 41: `.*`, exact and prefix-regex values match every selector."""
    assert matches(pair)


@pytest.mark.parametrize(
    "pair",
    [
        ("client_id", "probe"),  # anchored at the end: a prefix is not enough
        ("client_id", "client"),  # anchored at the start
        ("client_software_name", "apache-kafka-java"),
        ("client_source_port", "5000"),
        ("unknown_selector", ".*"),
        ("*", ".*"),
    ],
)
def test_non_matching_values(pair: tuple[str, str]) -> None:
    """Checklist 41: a different value, an unknown key or `*` as a key fails; full match only."""
    assert not matches(pair)


def test_all_pairs_must_match() -> None:
    """Checklist 41: AND over every selector."""
    assert matches(("client_id", "probe.*"), ("client_software_name", "librdkafka"))
    assert not matches(("client_id", "probe.*"), ("client_software_name", "java"))


def test_unknown_software_name_does_not_match_a_version_pattern() -> None:
    """Checklist 41 / 20: "unknown" does not match a concrete version pattern."""
    unknown = {"software_name": "unknown", "software_version": "unknown"}
    assert not matches(("client_software_version", "3.5.*"), ctx_kwargs=unknown)


def test_values_may_contain_equals() -> None:
    """DESIGN (KAFKA-21041): the value after the first `=` may itself contain `=`."""
    assert matches(("client_id", "team=payments"), ctx_kwargs={"client_id": "team=payments"})


@pytest.mark.parametrize("form", [str(IID), kafka_uuid_text(IID), str(IID)[:8] + ".*"])
def test_instance_id_matches_either_text_form(form: str) -> None:
    """DESIGN: canonical 8-4-4-4-12 text or Kafka's base64 form."""
    assert matches(("client_instance_id", form))


def test_instance_id_other_uuid_does_not_match() -> None:
    """A different id, in either form, does not match."""
    other = uuid.UUID(int=IID.int ^ 1)
    assert not matches(("client_instance_id", str(other)))
    assert not matches(("client_instance_id", kafka_uuid_text(other)))


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=lookahead)", "(?<!x)y", "[unclosed"])
def test_patterns_re2_rejects_match_nothing_without_crashing(pattern: str) -> None:
    """RE2 has no backreferences or lookaround: such a subscription matches no client."""
    cache = PatternCache()
    compiled = cache.compile_subscription(sub(match=(("client_id", pattern),)))
    assert compiled.valid is False
    assert not compiled.matches(IID, make_ctx(client_id="aa"))


def test_catastrophic_pattern_is_linear() -> None:
    """RE2 semantics: (a+)+$ against a long non-matching string returns promptly."""
    assert not matches(("client_id", "(a+)+b"), ctx_kwargs={"client_id": "a" * 50_000 + "c"})


def test_patterns_are_trimmed_like_kafka() -> None:
    """Kafka compiles value.trim()."""
    assert matches(("client_id", "  probe-client "))


def test_patterns_compile_once() -> None:
    """The cache hands back the same compiled object for the same text."""
    cache = PatternCache()
    assert cache.compile("probe.*") is cache.compile("probe.*")


def test_matching_subscriptions_filters() -> None:
    """Only the applicable subscriptions are returned, in the given order."""
    cache = PatternCache()
    subs = [
        cache.compile_subscription(sub("a", match=(("client_id", "probe.*"),))),
        cache.compile_subscription(sub("b", match=(("client_id", "other"),))),
        cache.compile_subscription(sub("c")),
    ]
    names = [s.name for s in matching_subscriptions(subs, IID, make_ctx())]
    assert names == ["a", "c"]


def test_manager_applies_instance_id_selectors() -> None:
    """A subscription targeting one instance id reaches only that client."""
    mgr = manager(sub(match=(("client_instance_id", str(IID)),), interval_ms=5000))
    assert subscribe(mgr, 0, IID).push_interval_ms == 5000
    assert subscribe(mgr, 0, uuid.UUID(int=IID.int + 1)).push_interval_ms == 300000


def test_bad_pattern_subscription_does_not_break_the_manager() -> None:
    """A stored backreference pattern makes its subscription inert; the others still apply."""
    mgr = manager(
        sub("bad", metrics=("x.",), match=(("client_id", r"(p)\1"),)),
        sub("good", metrics=("y.",)),
    )
    assert subscribe(mgr, 0).requested_metrics == ("y.",)


def test_remembered_outcomes_stay_per_value() -> None:
    """The (pattern, value) memo never answers for a different value."""
    compiled = PatternCache().compile_subscription(sub(match=(("client_id", "probe-.*"),)))
    assert compiled.matches(IID, make_ctx(client_id="probe-a"))
    assert not compiled.matches(IID, make_ctx(client_id="other"))
    assert compiled.matches(IID, make_ctx(client_id="probe-a"))
    assert not compiled.matches(IID, make_ctx(client_id="other"))


def test_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo is cleared when full, and answers stay right afterwards."""
    monkeypatch.setattr("clientmetrics.telemetry.matching.MEMO_SIZE", 4)
    compiled = PatternCache().compile_subscription(sub(match=(("client_id", "c[0-4]"),)))
    outcomes = [compiled.matches(IID, make_ctx(client_id=f"c{i}")) for i in range(10)]
    assert outcomes == [True] * 5 + [False] * 5
    assert len(compiled.memo) <= 4
