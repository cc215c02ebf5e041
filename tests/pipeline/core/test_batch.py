"""A pass's input: instance shares every process agrees on, rows grouped by instance."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.batch import pass_input, shares
from clientmetrics.pipeline.core.schemas import (
    INVENTORY_ARROW,
    LANDING_ARROW,
    PASS_INPUT_ARROW,
    SERIES_STATE_ARROW,
)
from tests.pipeline.core.tables import by_column, table
from tests.synthetic import Push, landing_table


def test_an_instance_share_is_the_crc32_of_its_id_and_a_null_id_is_in_share_0() -> None:
    # zlib.crc32(b"a") = 0xE8B7BE43 = 3904355907 = 3 * 1301451969 + 0
    # zlib.crc32(b"b") = 0x71BEEFF9 = 1908338681 = 3 * 636112893 + 2
    ids = pa.chunked_array([["a", "b"], [None, "a", "b"]])
    assert shares(ids, 3).to_pylist() == [0, 2, 0, 0, 2]
    assert shares(ids, 1).to_pylist() == [0] * 5


def test_every_process_puts_an_instance_in_the_same_share() -> None:
    names = [f"instance-{n}" for n in range(50)]
    here = shares(pa.array(names), 7).to_pylist()
    code = (
        "import pyarrow as pa; from clientmetrics.pipeline.core.batch import shares; "
        f"print(shares(pa.array({names!r}), 7).to_pylist())"
    )
    for seed in ("1", "2"):
        other = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        assert other.stdout.strip() == str(here)
    assert set(here) == set(range(7))


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
