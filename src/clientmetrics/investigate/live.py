"""The live view: the points of watched clients' pushes, one line per point.

Pushes are decoded by the pipeline's own decoder (``pipeline.core.decode``), so a
point reads here as it will in the tables; the selectors are matched by the
gateway's own matcher (``telemetry.matching``), so the view shows exactly the
clients the watch's subscription reaches.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa

from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.units import display_unit
from clientmetrics.telemetry.matching import CompiledSubscription, PatternCache
from clientmetrics.telemetry.model import ClientContext, Subscription
from clientmetrics.telemetry.push_arrow import LANDING_ARROW

__all__ = [
    "Back",
    "LivePoint",
    "PushShape",
    "Selection",
    "Shapes",
    "back_on",
    "context_of",
    "live_points",
    "warm_up",
]


@dataclass(frozen=True, slots=True)
class LivePoint:
    """One data point of a push, with what the live view shows of it."""

    received_at_ms: int
    client_instance_id: str
    client_id: str
    #: None in the broker plugin's records (a broker does not tell a plugin).
    subscription_id: int | None
    metric: str
    value: float | None
    unit: str
    #: The broker the point is about (the client's ``node.id`` attribute), if any.
    node: str | None

    def line(self) -> str:
        """``HH:MM:SS.mmm  instance  client_id  metric  value unit  node.id=N``."""
        when = datetime.fromtimestamp(self.received_at_ms / 1000, tz=UTC)
        value = "-" if self.value is None else f"{self.value:.6g}"
        node = "" if self.node is None else f"  node.id={self.node}"
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{when.strftime('%H:%M:%S.%f')[:-3]}  {self.client_instance_id}  "
            f"{self.client_id}  {self.metric}  {value}{unit}{node}"
        )


def context_of(row: Mapping[str, object]) -> ClientContext:
    """The ``ClientContext`` a landing row's labels describe (what ``match`` is tested on).

    A label the row lacks (the broker plugin writes only the labels it is configured
    with) is empty text, or -1 for a number: it matches no selector that names it.
    """
    return ClientContext(
        connection_id=0,
        client_id=_text(row.get("client_id")),
        client_software_name=_text(row.get("client_software_name")),
        client_software_version=_text(row.get("client_software_version")),
        client_source_address=_text(row.get("client_source_address")),
        client_source_port=_number(row.get("client_source_port")),
        principal=_text(row.get("principal")),
        node_id=_number(row.get("node_id")),
    )


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _number(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return -1


class Selection:
    """Which pushes a watch shows: its ``match`` selectors and metric prefixes."""

    def __init__(self, selectors: Mapping[str, str], prefixes: Sequence[str]) -> None:
        self.prefixes = tuple(prefixes)
        subscription = Subscription("live", self.prefixes, 0, tuple(selectors.items()))
        self._compiled: CompiledSubscription = PatternCache().compile_subscription(subscription)

    def matches(self, row: Mapping[str, object]) -> bool:
        """Whether a landing row's client is one the selectors pick."""
        instance = uuid.UUID(str(row["client_instance_id"]))
        return self._compiled.matches(instance, context_of(row))

    def wanted(self, metric: str) -> bool:
        """Whether ``metric`` is under one of the prefixes (``*`` or none: all)."""
        if not self.prefixes or "*" in self.prefixes:
            return True
        return metric.startswith(self.prefixes)


_LABELS = ["client_instance_id", "client_id", "client_software_name", "client_software_version"]
_LABELS += ["client_source_address", "client_source_port", "principal", "node_id"]
_POINT = ["received_at", "subscription_id", "metric_name", "metric_unit", "value", "attributes"]


def warm_up() -> None:
    """Build the decoder once now, so the first pushed point is not late by its set-up."""
    decode_pushes(LANDING_ARROW.empty_table())


def live_points(rows: pa.Table, selection: Selection) -> Iterator[LivePoint]:
    """The points of the pushes in landing ``rows`` that ``selection`` picks, in push order."""
    if rows.num_rows == 0:
        return
    keep = [selection.matches(r) for r in rows.select(_LABELS).to_pylist()]
    picked = rows.filter(pa.array(keep, pa.bool_()))
    if picked.num_rows == 0:
        return
    points = decode_pushes(picked).select([*_LABELS[:2], *_POINT])
    for point in points.to_pylist():
        metric = str(point["metric_name"])
        if not selection.wanted(metric):
            continue
        attributes = dict(point["attributes"] or [])
        received: datetime = point["received_at"]
        yield LivePoint(
            received_at_ms=int(received.timestamp() * 1000),
            client_instance_id=str(point["client_instance_id"]),
            client_id=str(point["client_id"]),
            subscription_id=point["subscription_id"],
            metric=metric,
            value=point["value"],
            unit=display_unit(metric, point["metric_unit"] or ""),
            node=attributes.get("node.id"),
        )


@dataclass(frozen=True, slots=True)
class PushShape:
    """What tells one subscription's pushes from another's: the subscription id, or, in
    the broker plugin's records (which carry none), the metric names the watch's
    prefixes pick from the push."""

    subscription_id: int | None
    metrics: frozenset[str]


@dataclass(frozen=True, slots=True)
class Back:
    """A watched client's first push on another subscription."""

    subscription_id: int | None
    was: int | None
    #: Metric names in that push (of the watch's prefixes), and in its last watch push.
    metrics: int
    was_metrics: int

    def text(self) -> str:
        """``subscription_id=N (was M)``, or, without ids, the metric counts."""
        if self.subscription_id is not None:
            return f"subscription_id={self.subscription_id} (was {self.was})"
        return f"its previous metrics: {self.metrics} (was {self.was_metrics} watched)"


class Shapes:
    """Per watched instance, the shape of its latest push shown (fed the live points)."""

    def __init__(self) -> None:
        self.latest: dict[str, PushShape] = {}
        self._building: dict[str, tuple[int, int | None, set[str]]] = {}

    def add(self, point: LivePoint) -> None:
        instance = point.client_instance_id
        at, sub, names = self._building.get(instance, (-1, None, set()))
        if at != point.received_at_ms:  # a new push: the one built so far is complete
            at, sub, names = point.received_at_ms, point.subscription_id, set()
        names.add(point.metric)
        self._building[instance] = (at, sub, names)
        self.latest[instance] = PushShape(sub, frozenset(names))

    def keep(self, instance: str) -> None:
        """Forget every instance but ``instance`` (the watch was narrowed)."""
        self.latest = {k: v for k, v in self.latest.items() if k == instance}
        self._building = {k: v for k, v in self._building.items() if k == instance}


def back_on(
    rows: pa.Table, waiting: Mapping[str, PushShape], selection: Selection, stopped_ms: int
) -> dict[str, Back]:
    """Of the instances in ``waiting`` (instance -> its last push under the watch), those
    with a push in landing ``rows`` on another subscription.

    A push still carrying the deleted watch's id is refused (UNKNOWN_SUBSCRIPTION_ID)
    and never lands, so the first landed push with another id is on the client's
    next subscription. Records with no id (the broker plugin's) are judged by time
    and content: received after the watch was deleted (``stopped_ms``), with other
    metric names (of those ``selection`` picks) than the watch's last push had.
    """
    back: dict[str, Back] = {}
    for instance, at_ms, shape in _shapes(rows, set(waiting), selection):
        was = waiting[instance]
        if instance in back:
            continue
        if shape.subscription_id is None:
            if at_ms <= stopped_ms or shape.metrics == was.metrics:
                continue
        elif shape.subscription_id == was.subscription_id:
            continue
        back[instance] = Back(
            shape.subscription_id, was.subscription_id, len(shape.metrics), len(was.metrics)
        )
    return back


def _shapes(
    rows: pa.Table, instances: set[str], selection: Selection
) -> Iterator[tuple[str, int, PushShape]]:
    """(instance, received at ms, shape) of each push of ``instances`` in ``rows``."""
    for index, instance in enumerate(rows.column("client_instance_id").to_pylist()):
        if instance not in instances:
            continue
        row = rows.slice(index, 1)
        sub = row.column("subscription_id")[0].as_py()
        received: datetime = row.column("received_at")[0].as_py()
        names: frozenset[str] = frozenset()
        if sub is None:  # only then are the names needed: decode this push alone
            decoded = decode_pushes(row).column("metric_name").to_pylist()
            names = frozenset(str(n) for n in decoded if selection.wanted(str(n)))
        yield instance, int(received.timestamp() * 1000), PushShape(sub, names)
