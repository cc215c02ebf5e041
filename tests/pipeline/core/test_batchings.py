"""The same pushes make the same alerts however they are batched (a cluster's micro-batches,
one local batch, an order shuffled inside a batch).

A client that goes silent mid-stream ends its episodes when it goes silent, whether a
batch ends inside the silence or the silence lies inside one batch (``core.lives``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from clientmetrics.pipeline.core.batch import PassPlan, pass_input, process_group
from clientmetrics.pipeline.core.lives import lives, silences
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.core.schemas import CARRIED, INVENTORY_ARROW, LANDING_ARROW
from tests.pipeline.core.tables import at, at_us, table
from tests.synthetic import Push, landing_table, producer_payload

METRIC = "org.apache.kafka.producer.node.request.latency.avg"
RULES = parse_rules(
    {"rule": [{"name": "high", "metric": METRIC, "op": ">=", "threshold": 10, "for": "1s"}]}
).rules
#: Where each batch's state goes in the next one's input.
STATE_OF = {"series": "series", "window": "windows", "alert": "alert_state", "client": "inventory"}


def _pushes() -> list[Push]:
    """Every 200 ms: "b" from 0 to 19.8 s; "a" from 0 to 9.8 s and 13 to 18.8 s (silent between).

    Each push has latency 20 on node 1 and the bootstrap node -1: two series each.
    """
    times = {
        "a": [i / 5 for i in range(50)] + [13 + i / 5 for i in range(30)],
        "b": [i / 5 for i in range(100)],
    }
    return [
        Push(at_us(t), name, producer_payload(at_us(t) * 1000, step, (1,), 20.0), client_id=name,
             push_interval_ms=200)
        for name, moments in times.items()
        for step, t in enumerate(moments)
    ]  # fmt: skip


def _alerts(batches: Sequence[Sequence[Push]]) -> list[dict[str, Any]]:
    """The alerts table the batches make, each batch judged by the newest push so far."""
    state = {tag: schema.empty_table() for tag, schema in CARRIED.items()}
    newest: int | None = None
    rows: list[dict[str, Any]] = []
    for batch in batches:
        pushes = landing_table(list(batch)).cast(LANDING_ARROW)
        newest = max(newest or 0, pc.max(pc.cast(pushes.column("received_at"), pa.int64())).as_py())
        plan = PassPlan(staging="", window_seconds=60, rules=RULES, as_of_us=newest)
        sides = process_group(pass_input(pushes, state), plan).sides
        state = {tag: sides[name] for tag, name in STATE_OF.items()}
        rows += sides["alerts"].to_pylist()
    return sorted(rows, key=lambda row: repr(sorted(row.items())))


def _cut(pushes: list[Push], *seconds: float) -> list[list[Push]]:
    edges = [at_us(s) for s in seconds]
    batches: list[list[Push]] = [[] for _ in range(len(edges) + 1)]
    for push in pushes:
        batches[sum(push.received_at_us >= edge for edge in edges)].append(push)
    return batches


def test_one_batch_makes_the_alerts_worked_out_by_hand() -> None:
    # "a" is silent 3 x 200 ms after its push of 9.8 s: its episodes (started at 0, fired
    # at 1 s) expire at 10.4 s; back at 13 s it starts anew (fired at 14 s) and expires
    # again 0.6 s after its last push of 18.8 s, which the newest push (19.8 s) passed.
    events = [
        (row["client_instance_id"], row["status"], row["resolution"], row["started_at"],
         row["fired_at"], row["resolved_at"], row["attributes"])
        for row in _alerts([_pushes()])
    ]  # fmt: skip
    expected = []
    for node in ("-1", "1"):
        attributes = [("node.id", node)]
        expected += [
            ("a", "firing", None, at(0), at(1), None, attributes),
            ("a", "resolved", "expired", at(0), at(1), at(10.4), attributes),
            ("a", "firing", None, at(13), at(14), None, attributes),
            ("a", "resolved", "expired", at(13), at(14), at(19.4), attributes),
            ("b", "firing", None, at(0), at(1), None, attributes),
        ]
    assert sorted(events, key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize(
    "cuts",
    [
        (5.0,),
        (10.0,),  # inside a's silence, before the newest push passes its end (10.4 s)
        (10.7,),  # inside it, after: the batch's newest push (10.6 s) expires "a"
        (13.0,),  # "a" comes back first thing in a batch
        (9.9, 10.2, 12.9, 13.1),
        tuple(t / 10 for t in range(1, 200, 7)),  # a cluster's many small batches
    ],
)
def test_any_batching_makes_the_same_alerts(cuts: tuple[float, ...]) -> None:
    pushes = _pushes()
    assert _alerts(_cut(pushes, *cuts)) == _alerts([pushes])


def test_the_order_inside_a_batch_does_not_matter() -> None:
    pushes = _pushes()
    shuffled = list(pushes)
    random.Random(7).shuffle(shuffled)
    assert _alerts([shuffled]) == _alerts([pushes])
    assert _alerts(_cut(shuffled, 10.0, 13.0)) == _alerts([pushes])


def test_silences_and_lives_by_hand() -> None:
    pushes = landing_table(
        [Push(at_us(t), "a", b"", push_interval_ms=1000) for t in (3.0, 4.0, 9.0, 9.5, 20.0)]
        + [Push(at_us(t), "b", b"", push_interval_ms=1000) for t in (1.0, 2.0)]
    ).cast(LANDING_ARROW)
    carried = table(
        INVENTORY_ARROW,
        [
            # a's last push before the batch: 3 s before its first, exactly its deadline
            {"client_instance_id": "a", "last_seen": at(0), "push_interval_ms": 1000},
            # said goodbye: its next push is a new start, not a silence
            {"client_instance_id": "b", "last_seen": at(-10), "terminated": True},
        ],
        terminated=False,
    )
    gaps = silences(pushes, carried)
    assert gaps.to_pylist() == [
        {"client_instance_id": "a", "last_seen": at_us(4), "push_interval_ms": 1000,
         "resumed_at": at_us(9)},
        {"client_instance_id": "a", "last_seen": at_us(9.5), "push_interval_ms": 1000,
         "resumed_at": at_us(20)},
    ]  # fmt: skip
    instances = pa.array(["a", "a", "a", "b", "a"])
    received = pa.array([at_us(t) for t in (4.0, 9.0, 20.0, 50.0, 1.0)]).to_numpy()
    assert lives(instances, received, gaps).tolist() == [0, 1, 2, 0, 0]
