"""A pass's input: rows grouped by instance (shares: tests/exporters/test_landed_shares.py)."""

from __future__ import annotations

import pyarrow.compute as pc

from clientmetrics.pipeline.core.batch import pass_input
from clientmetrics.pipeline.core.schemas import (
    INVENTORY_ARROW,
    LANDING_ARROW,
    PASS_INPUT_ARROW,
    SERIES_STATE_ARROW,
)
from tests.pipeline.core.tables import by_column, table
from tests.synthetic import Push, landing_table


def test_pass_input_tags_state_rows_and_sorts_by_instance() -> None:
    pushes = landing_table(
        [Push(1_000, "i-2", b"p2", client_id="two"), Push(2_000, "i-1", b"p1", client_id="one")]
    ).cast(LANDING_ARROW)
    series = table(SERIES_STATE_ARROW, [{"series": "i-2|m|{}", "last_cumulative": 5.0}])
    inventory = table(INVENTORY_ARROW, [{"client_instance_id": "i-1", "pushes": 3}])
    rows = pass_input(pushes, {"series": series, "client": inventory})
    assert rows.schema == PASS_INPUT_ARROW
    # by instance; pushes, then state in the given order (the sort is stable)
    assert by_column(rows, "client_instance_id", "carried", "payload", "pushes") == [
        ("i-1", None, b"p1", None),
        ("i-1", "client", None, 3),
        ("i-2", None, b"p2", None),
        ("i-2", "series", None, None),
    ]
    carried = rows.filter(pc.equal(rows.column("carried"), "series"))
    assert by_column(carried, "series", "last_cumulative") == [("i-2|m|{}", 5.0)]
