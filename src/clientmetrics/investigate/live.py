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

__all__ = ["LivePoint", "Selection", "back_on", "context_of", "live_points", "warm_up"]


@dataclass(frozen=True, slots=True)
class LivePoint:
    """One data point of a push, with what the live view shows of it."""

    received_at_ms: int
    client_instance_id: str
    client_id: str
    subscription_id: int
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
    """The ``ClientContext`` a landing row's labels describe (what ``match`` is tested on)."""
    return ClientContext(
        connection_id=0,
        client_id=str(row["client_id"]),
        client_software_name=str(row["client_software_name"]),
        client_software_version=str(row["client_software_version"]),
        client_source_address=str(row["client_source_address"]),
        client_source_port=int(str(row["client_source_port"])),
        principal=str(row["principal"]),
        node_id=int(str(row["node_id"])),
    )


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
            subscription_id=int(point["subscription_id"]),
            metric=metric,
            value=point["value"],
            unit=display_unit(metric, point["metric_unit"] or ""),
            node=attributes.get("node.id"),
        )


def back_on(rows: pa.Table, waiting: Mapping[str, int]) -> dict[str, int]:
    """Of the instances in ``waiting`` (instance -> the watch's subscription id), those
    whose push in landing ``rows`` carries another subscription id: that new id.

    A push still carrying the deleted watch's id is refused (UNKNOWN_SUBSCRIPTION_ID)
    and never lands, so the first landed push with another id is on the client's
    next subscription.
    """
    back: dict[str, int] = {}
    ids = rows.column("client_instance_id").to_pylist()
    subs = rows.column("subscription_id").to_pylist()
    for instance, sub in zip(ids, subs, strict=True):
        if instance in waiting and instance not in back and sub != waiting[instance]:
            back[instance] = int(sub)
    return back
