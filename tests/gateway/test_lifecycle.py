"""The driver's lifecycle table: what docs/architecture.md shows is what the driver runs."""

from __future__ import annotations

import re
from pathlib import Path

from clientmetrics.gateway.lifecycle import TRANSITIONS, Event, Phase, advance

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def documented() -> dict[tuple[Phase, Event], Phase]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### A connection driver's lifecycle") :]
    table: dict[tuple[Phase, Event], Phase] = {}
    for row in re.finditer(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|$", section, re.M):
        phase = Phase[row[1]]
        for event, after in re.findall(r"`(\w+)` → `(\w+)`", row[2]):
            table[phase, Event[event]] = Phase[after]
    return table


def test_the_documented_table_is_the_one_the_driver_runs() -> None:
    assert documented() == dict(TRANSITIONS)


def test_every_phase_but_gone_ends_when_the_transport_is_lost_and_gone_is_final() -> None:
    for phase in Phase:
        assert advance(phase, Event.LOST) is Phase.GONE
    for event in Event:
        assert advance(Phase.GONE, event) is Phase.GONE


def test_a_closing_connection_stays_closing_whatever_its_task_does() -> None:
    for phase in (Phase.CLOSING, Phase.HOLDING):
        assert advance(phase, Event.DRAINED) is phase
        assert advance(phase, Event.WOKEN) is phase
        assert advance(phase, Event.CLOSED) is phase
    assert advance(Phase.HOLDING, Event.HOLD_ENDED) is Phase.CLOSING
    # Only a task that starts or waits hands frames to the callback's fast path.
    assert {p for p in Phase if advance(p, Event.DRAINED) is Phase.IDLE} == {
        Phase.STARTING,
        Phase.BUSY,
        Phase.IDLE,
    }
