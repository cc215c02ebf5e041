"""The "client software" page: the versions in use, how many instances, standard-metric coverage.

The rule is the pipeline core's (``pipeline.core.coverage``); this module only gathers its
input, the pipeline's points table and what has landed since, and renders the result.
"""

from __future__ import annotations

from html import escape

import pyarrow as pa

from clientmetrics.dashboard.pages import layout, shown
from clientmetrics.pipeline.core.coverage import COVERAGE_INPUT, software_coverage
from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.schemas import LABEL_COLUMNS

__all__ = ["LANDED_COLUMNS", "software_page", "software_table"]

#: What is read of recent landed pushes (the payload is decoded for its metric names).
LANDED_COLUMNS = (*LABEL_COLUMNS, "payload")
_PREFIX = "org.apache.kafka."


def software_table(points: pa.Table | None, landed: pa.Table | None) -> pa.Table | None:
    """Coverage per software over the points table and recent landed pushes; None if neither."""
    parts = []
    if points is not None and points.num_rows:
        parts.append(points.select(list(COVERAGE_INPUT)))
    if landed is not None and landed.num_rows:
        parts.append(decode_pushes(landed).select(list(COVERAGE_INPUT)))
    if not parts:
        return None
    return software_coverage(pa.concat_tables(parts, promote_options="permissive"))


def _names(names: list[str]) -> str:
    return "<br>".join(f"<code>{escape(n.removeprefix(_PREFIX))}</code>" for n in names)


def software_page(table: pa.Table | None) -> str:
    """One row per client software name and version."""
    if table is None or table.num_rows == 0:
        body = "<p class=muted id=summary>No pushes with metrics yet.</p>"
        return layout("Client software", "/software", body)
    rows = []
    for row in table.to_pylist():
        sent, missing = row["standard_sent"], row["standard_missing"]
        wanted = len(sent) + len(missing)
        share = "" if row["coverage"] is None else f" ({row['coverage']:.0%})"
        rows.append(
            "<tr>"
            f"<td><b>{escape(shown(row['client_software_name']))}</b></td>"
            f"<td>{escape(shown(row['client_software_version']))}</td>"
            f"<td>{row['instances']}</td>"
            f"<td>{escape(', '.join(row['roles'])) or '<span class=muted>none</span>'}</td>"
            f"<td class=coverage>{len(sent)} of {wanted}{share}</td>"
            f"<td class=wrap>{_names(missing) or '<span class=muted>none</span>'}</td>"
            f"<td class=wrap><details><summary>{len(sent)} metrics</summary>"
            f"{_names(sent)}</details></td>"
            "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("software", "version", "instances", "roles", "standard metrics", "lacks", "sends")
    )
    body = (
        "<p class=muted id=summary>KIP-714's standard producer and consumer metrics each client "
        "software sent (any instance, any push), for the roles its instances played "
        "(names without <code>org.apache.kafka.</code>).</p>"
        f"<table class=software><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return layout("Client software", "/software", body)
