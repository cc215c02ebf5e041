"""Out of profile (``core/baselines``, ``profiles``, ``cohorts``): history as the threshold.

Points every 60 s; the shipped conditions are "above 4 for at least 120
seconds" (4 spreads, fired on the third point out of profile). A steady series
of 2 and 3 ms has a spread below the 1 ms floor, so 30 ms is 27 spreads away.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.batch import PassPlan, pass_input, process_group
from clientmetrics.pipeline.core.cohorts import COHORT_ROWS_MAX, merge_cohorts
from clientmetrics.pipeline.core.profiles import RELEARN, WARMUP
from clientmetrics.pipeline.core.rules import AlertRule, parse_rules
from clientmetrics.pipeline.core.schemas import (
    CARRIED,
    COHORT_PARTIALS_ARROW,
    COHORT_STATE_ARROW,
    INVENTORY_ARROW,
    LANDING_ARROW,
)
from tests.pipeline.core.engine import EnginePass
from tests.pipeline.core.tables import at, at_us, by_column, decoded, table
from tests.synthetic import Push, landing_table, producer_payload

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
#: Where each batch's state goes in the next one's input (as the job's ``_STATE``).
STATE_OF = {
    "series": "series",
    "window": "windows",
    "alert": "alert_state",
    "client": "inventory",
    "baseline": "baselines",
}
#: The findings this module covers (``test_findings`` checks the catalogue has no other).
BASELINE_CASES = ("out-of-profile", "out-of-cohort")


def _rules(*names: str) -> tuple[AlertRule, ...]:
    """The catalogue with only the named findings on."""
    rules = parse_rules({"findings": True}).rules
    return tuple(rule for rule in rules if rule.name.split("/")[0] in names)


def _inventory(ids: list[str], client_id: str = "billing") -> pa.Table:
    return table(INVENTORY_ARROW, [{"client_instance_id": i, "client_id": client_id} for i in ids])


def _points(batch: list[tuple[str, int, float]]) -> pa.Table:
    """(instance, minute, value) rows of the latency to broker 3."""
    rows: list[dict[str, Any]] = [
        {
            "client_instance_id": instance,
            "metric_name": LATENCY,
            "kind": "gauge",
            "event_time": at(60 * minute),
            "value": value,
            "attributes": {"node.id": "3"},
        }
        for instance, minute, value in batch
    ]
    return decoded(rows)


def _steady(minute: int) -> float:
    return 2.0 if minute % 2 else 3.0


def _events(engine: EnginePass, batches: list[list[tuple[str, int, float]]]) -> list[Any]:
    found = []
    for batch in batches:
        events = engine.batch(_points(batch))
        found += by_column(
            events, "rule", "status", "client_instance_id", "fired_at", "resolved_at"
        )
    return found


def test_a_sustained_departure_from_the_clients_own_history_fires_and_a_blip_does_not() -> None:
    values = [_steady(m) for m in range(20)] + [30.0] + [_steady(m) for m in range(21, 30)]
    # Out from 30; the first point back (34) is not judged, the second (35) resolves.
    values += [30.0] * 4 + [2.5, 2.5]
    assert _in_batches_of_any_size(values) == [
        (PROFILE_RULE, "firing", "i-1", at(60 * 32), None),
        (PROFILE_RULE, "resolved", "i-1", at(60 * 32), at(60 * 35)),
    ]


PROFILE_RULE = "out-of-profile/producer.node.request.latency.avg"


def _in_batches_of_any_size(values: list[float]) -> list[Any]:
    """The events of one client's points, one a minute: in one batch, or one per batch."""
    found = []
    for per_batch in (len(values), 1):
        engine = EnginePass(_rules("out-of-profile"), _inventory(["i-1"]))
        minutes = list(enumerate(values))
        batches = [
            [("i-1", m, v) for m, v in minutes[start : start + per_batch]]
            for start in range(0, len(minutes), per_batch)
        ]
        found.append(_events(engine, batches))
    assert found[0] == found[1]
    return found[0]


def test_one_point_back_in_profile_does_not_restart_a_departure() -> None:
    """A departure's points that fall back within the limit by chance: one alone is not
    judged (the episode from 20 fires at 23, 180 s on), two in a row end it."""
    steady = [_steady(m) for m in range(20)]
    assert _in_batches_of_any_size([*steady, 30.0, 30.0, 2.5, 30.0]) == [
        (PROFILE_RULE, "firing", "i-1", at(60 * 23), None)
    ]
    # Back twice in a row: the episode ends; out again, it starts again at 24.
    assert _in_batches_of_any_size([*steady, 30.0, 30.0, 2.5, 2.5, 30.0, 30.0]) == []
    # Out, back, out, back, out: never two back in a row; 120 s from 20 at 22.
    assert _in_batches_of_any_size(steady + [30.0, 2.5] * 2 + [30.0]) == [
        (PROFILE_RULE, "firing", "i-1", at(60 * 22), None)
    ]


def test_a_new_client_has_no_profile_of_its_own_until_it_learnt_one() -> None:
    engine = EnginePass(_rules("out-of-profile"), _inventory(["i-1"]))
    # 30 ms from its first push: nothing to depart from (and it becomes its profile).
    assert _events(engine, [[("i-1", m, 30.0) for m in range(WARMUP + 5)]]) == []


def test_a_level_held_for_an_hour_becomes_the_new_profile() -> None:
    engine = EnginePass(_rules("out-of-profile"), _inventory(["i-1"]))
    values = [_steady(m) for m in range(20)] + [30.0] * (RELEARN + 5)
    found = _events(engine, [[("i-1", m, v) for m, v in enumerate(values)]])
    # Fired on the third point out; the RELEARN-th point out resets the level, so the
    # next two are in profile: the first is not judged, the second resolves it.
    assert [row[1:] for row in found] == [
        ("firing", "i-1", at(60 * 22), None),
        ("resolved", "i-1", at(60 * 22), at(60 * (21 + RELEARN))),
    ]


def test_a_new_instance_unlike_its_cohort_is_out_of_cohort() -> None:
    members = [f"i-{n}" for n in range(6)]
    engine = EnginePass(_rules("out-of-cohort"), _inventory([*members, "i-new", "i-ok"]))
    # Ten minutes of six members (60 points: the cohort judges from 50 points of 5 members).
    batches = [[(i, m, _steady(m + n)) for n, i in enumerate(members)] for m in range(10)]

    # Then a new instance of the same client_id at 30 ms, and another at 2.5 ms.
    def newcomers(m: int) -> list[tuple[str, int, float]]:
        return [("i-new", m, 30.0), ("i-ok", m, 2.5)]

    batches += [
        [
            *((i, m, _steady(m + n)) for n, i in enumerate(members)),
            ("i-new", m, 30.0),
            ("i-ok", m, 2.5),
        ]
        for m in range(10, 15)
    ]
    rule = "out-of-cohort/producer.node.request.latency.avg"
    assert _events(engine, batches) == [(rule, "firing", "i-new", at(60 * 12), None)]


def test_one_point_back_within_its_cohort_does_not_restart_a_departure() -> None:
    """The newcomer's third point falls within its cohort: not judged, so the episode
    from 10 fires at 13 (one point per batch: the flag is carried between batches)."""
    members = [f"i-{n}" for n in range(6)]
    engine = EnginePass(_rules("out-of-cohort"), _inventory([*members, "i-new"]))
    batches = [[(i, m, _steady(m + n)) for n, i in enumerate(members)] for m in range(10)]
    newcomer = {10: 30.0, 11: 30.0, 12: 2.5, 13: 30.0}
    batches += [
        [*((i, m, _steady(m + n)) for n, i in enumerate(members)), ("i-new", m, value)]
        for m, value in newcomer.items()
    ]
    rule = "out-of-cohort/producer.node.request.latency.avg"
    assert _events(engine, batches) == [(rule, "firing", "i-new", at(60 * 13), None)]


def test_a_cohort_needs_members_and_clients_of_other_cohorts_are_not_judged_by_it() -> None:
    inventory = pa.concat_tables(
        [_inventory(["i-1", "i-2"]), _inventory(["i-other"], client_id="orders")]
    )
    engine = EnginePass(_rules("out-of-cohort"), inventory)
    batches = [[("i-1", m, 2.5), ("i-2", m, 2.5), ("i-other", m, 30.0)] for m in range(40)]
    # Two members only: "billing" never judges; "orders" is i-other alone, and like itself.
    assert _events(engine, batches) == []


def test_the_cohort_state_is_bounded() -> None:
    size = COHORT_ROWS_MAX + 10
    partials = table(
        COHORT_PARTIALS_ARROW,
        [
            {
                "cohort": f"client_id=c{n}",
                "key": "m|",
                "points": 1,
                "instances": 1,
                "total": 1.0,
                "total_squares": 1.0,
                "last_time": at(n),
            }
            for n in range(size)
        ],
    )
    state = merge_cohorts(COHORT_STATE_ARROW.empty_table(), partials)
    assert state.num_rows == COHORT_ROWS_MAX
    # The least recently updated went.
    assert pc.min(state.column("last_time")).as_py() == at(10)


def test_a_users_rule_may_judge_a_rate_or_a_profile() -> None:
    rules = parse_rules(
        {
            "rule": [
                {
                    "name": "churn",
                    "metric": "org.apache.kafka.consumer.coordinator.rebalance.latency.total",
                    "condition": "above 100 ms for at least 120 seconds",
                    "on": "rate",
                },
                {
                    "name": "mine",
                    "metric": LATENCY,
                    "condition": "above 4 for 3 minutes",
                    "on": "profile",
                },
            ]
        }
    ).rules
    assert [(rule.name, rule.on) for rule in rules] == [("churn", "rate"), ("mine", "profile")]
    with pytest.raises(ConfigurationError, match="'on' must be one of"):
        parse_rules(
            {"rule": [{"name": "x", "metric": LATENCY, "condition": "above 1 for 1s", "on": "sum"}]}
        )


def test_clients_with_their_own_client_ids_are_judged_by_software_and_principal() -> None:
    ids = [f"i-{n}" for n in range(6)] + ["i-new"]
    inventory = table(
        INVENTORY_ARROW,
        [
            {
                "client_instance_id": i,
                "client_id": f"app-{i}",  # a cohort of one each: never judges
                "client_software_name": "librdkafka",
                "principal": "User:app",
            }
            for i in ids
        ],
    )
    engine = EnginePass(_rules("out-of-cohort"), inventory)
    batches = [[(i, m, _steady(m + n)) for n, i in enumerate(ids[:-1])] for m in range(10)]
    batches += [
        [*((i, m, _steady(m + n)) for n, i in enumerate(ids[:-1])), ("i-new", m, 30.0)]
        for m in range(10, 14)
    ]
    rule = "out-of-cohort/producer.node.request.latency.avg"
    assert _events(engine, batches) == [(rule, "firing", "i-new", at(60 * 12), None)]


def test_the_pass_carries_the_profiles_and_the_cohorts_from_batch_to_batch() -> None:
    """The pipeline's pass (``process_group``), one push per batch, as the driver runs it:
    each batch's ``baselines`` carried in as state, its cohort sums merged for the next."""
    rules = _rules("out-of-profile", "out-of-cohort")
    state = {tag: schema.empty_table() for tag, schema in CARRIED.items()}
    cohorts = COHORT_STATE_ARROW.empty_table()
    fired = []
    members = [f"m-{n}" for n in range(5)]
    for minute in range(24):
        # Five members of "app" steady at 2-3 ms; "i-1" (also "app") jumps to 30 ms at 20.
        value = _steady(minute) if minute < 20 else 30.0
        pushes = [
            Push(at_us(60 * minute), name, producer_payload(at_us(60 * minute) * 1000, minute,
                 (1,), latency), client_id="app", push_interval_ms=60_000)
            for name, latency in [("i-1", value), *((m, _steady(minute + 1)) for m in members)]
        ]  # fmt: skip
        landed = landing_table(pushes).cast(LANDING_ARROW)
        plan = PassPlan(staging="", window_seconds=60, rules=rules, cohorts=cohorts)
        sides = process_group(pass_input(landed, state), plan).sides
        state = {tag: sides[name] for tag, name in STATE_OF.items()}
        cohorts = merge_cohorts(cohorts, sides["cohort_partials"])
        alerts = sides["alerts"].filter(pc.equal(sides["alerts"].column("status"), "firing"))
        fired += by_column(alerts, "rule", "client_instance_id", "fired_at")
    # Its own profile and its cohort's both see it, on the third push away (its latency
    # to broker 1 and to the bootstrap connection, -1, are two series).
    finding = "producer.node.request.latency.avg"
    assert sorted(fired) == sorted(
        (f"{name}/{finding}", "i-1", at(60 * 22))
        for name in ("out-of-profile", "out-of-cohort")
        for _ in range(2)
    )
    # One row per profiled series: 6 instances x (2 latencies + record.queue.time.avg).
    assert state["baseline"].num_rows == 18
    assert set(cohorts.column("cohort").to_pylist()) == {
        "client_id=app",
        "software=librdkafka principal=User:ANONYMOUS",
    }
