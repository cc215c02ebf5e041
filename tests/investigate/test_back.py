"""Telling a watched client back on its previous subscription, with and without ids.

Landing rows carry the push's subscription id; the broker plugin's records carry
none (a broker does not tell its plugin), so there the first push received after
the stop whose metric names differ from the watch's last push is the one.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from clientmetrics.investigate.live import Back, Selection, Shapes, back_on, live_points
from clientmetrics.investigate.watches import instance_pattern
from clientmetrics.telemetry.matching import PatternCache
from clientmetrics.telemetry.model import Subscription
from tests.synthetic import PREFIX, Push, landing_table, producer_payload

ME = str(uuid.UUID(int=0x0A))
SELECTION = Selection({"client_id": "app"}, [PREFIX])


def pushes(at_ms: int, payload: bytes, subscription_id: int | None) -> pa.Table:
    table = landing_table([Push(at_ms * 1000, ME, payload, client_id="app")])
    ids = pa.array([subscription_id], table.schema.field("subscription_id").type)
    at = table.schema.get_field_index("subscription_id")
    return table.set_column(at, "subscription_id", ids)


@pytest.mark.parametrize("subscription_id", [None, 5])
def test_back_at_the_first_push_on_another_subscription(subscription_id: int | None) -> None:
    stopped_ms = int(time.time() * 1000)
    watched = producer_payload(time.time_ns(), 3)
    shapes = Shapes()
    for point in live_points(pushes(stopped_ms - 2000, watched, subscription_id), SELECTION):
        shapes.add(point)
    was = shapes.latest[ME]
    assert len(was.metrics) > 2
    # The previous subscription asked for other metrics: none of the watch's prefix.
    other = b""
    later = pa.concat_tables(
        [
            pushes(stopped_ms - 500, other, None if subscription_id is None else 6),
            pushes(stopped_ms + 500, watched, subscription_id),  # accepted just before
            pushes(stopped_ms + 900, other, None if subscription_id is None else 6),
        ]
    )
    back = back_on(later, {ME: was}, SELECTION, stopped_ms)
    if subscription_id is None:
        # Before the stop: not judged; the watch's own shape after it: still the watch.
        assert back == {ME: Back(None, None, 0, len(was.metrics))}
        assert back[ME].text() == f"its previous metrics: 0 (was {len(was.metrics)} watched)"
    else:
        # Ids decide alone: the first landed push with another id.
        assert back == {ME: Back(6, 5, 0, len(was.metrics))}
        assert back[ME].text() == "subscription_id=6 (was 5)"
    assert back_on(pushes(stopped_ms + 500, watched, subscription_id), {ME: was}, SELECTION,
                   stopped_ms) == {}  # fmt: skip
    if subscription_id is None:  # received before the delete was sent: not judged
        assert back_on(pushes(stopped_ms - 500, other, None), {ME: was}, SELECTION,
                       stopped_ms) == {}  # fmt: skip


def test_a_narrowed_watch_matches_the_instance_in_both_forms_and_refuses_other_text() -> None:
    instance = uuid.UUID("0fb876ce-29d6-a471-cc7d-c1e2614c7ec0")
    pattern = instance_pattern(str(instance))
    assert pattern == "D7h2zinWpHHMfcHiYUx-wA"  # Kafka's Uuid.toString() of it
    compiled = PatternCache().compile_subscription(
        Subscription("w", ("x",), 1000, (("client_instance_id", pattern),))
    )
    assert compiled.valid
    with pytest.raises(ValueError, match="'nope' is not a client instance id"):
        instance_pattern("nope")


def test_rows_without_the_plugins_optional_labels_are_matched_on_what_they_have() -> None:
    """The broker plugin's default labels leave out node_id, the port and the software:
    such a row is still matched on its client id, and never by a selector naming a
    label it lacks (it used to stop the live view with ``int('None')``)."""
    row: dict[str, object] = {
        "client_instance_id": ME, "client_id": "app", "client_software_name": None,
        "client_software_version": None, "client_source_address": "10.0.0.1",
        "client_source_port": None, "principal": "User:app", "node_id": None,
    }  # fmt: skip
    assert SELECTION.matches(row)
    assert not Selection({"client_software_name": ".*kafka.*"}, [PREFIX]).matches(row)
