"""Benchmark: carried state under churn, with retention: does it stay flat?

    .venv/bin/python bench/pipeline_state.py [--instances 1000000] [--batches 20]
                                             [--churn 0.1] [--retention-batches 3]

A fleet of ``--instances`` clients pushes once per batch (one cumulative sum
each, so every instance carries a series, an inventory row and an open
window); each batch ``--churn`` of them stop for good and as many new ones
start. Batches are an hour of event time apart and the retention is
``--retention-batches`` hours, so after that many batches the state should
stop growing. Each batch runs what a pipeline micro-batch runs on its state,
with the core alone (no Spark, one process): the pushes and the carried state
grouped by instance through ``core.batch.process_group``, then the watermark
split of the windows. Prints, per batch, the carried-state rows and the time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clientmetrics.pipeline.core.batch import PassPlan, instance_groups, process_group
from clientmetrics.pipeline.core.schemas import (
    CARRIED,
    LANDING_ARROW,
    PASS_INPUT_ARROW,
)
from clientmetrics.pipeline.core.windows import split_windows

HOUR_US = 3_600_000_000
T0_US = 1_795_300_000_000_000
STATE_SIDES = {
    "series": "series",
    "window": "windows",
    "alert": "alert_state",
    "client": "inventory",
}


def _payload(time_us: int, total: int) -> bytes:
    point = m.NumberDataPoint(
        start_time_unix_nano=T0_US * 1000, time_unix_nano=time_us * 1000, as_int=total
    )
    total_sum = m.Sum(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE,
        is_monotonic=True,
        data_points=[point],
    )
    metric = m.Metric(name="org.apache.kafka.producer.request.total", sum=total_sum)
    data = m.MetricsData(
        resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=[metric])])]
    )
    return data.SerializeToString()


def _pushes(ids: np.ndarray, time_us: int, step: int) -> pa.Table:
    size = len(ids)
    names = pa.array([f"{i:032x}" for i in ids.tolist()], pa.string())
    columns = {
        "received_at": pa.array(np.full(size, time_us), pa.int64()).cast(
            LANDING_ARROW.field("received_at").type
        ),
        "client_instance_id": names,
        "client_id": pa.array(["app"] * size),
        "push_interval_ms": pa.array(np.full(size, 5000, dtype=np.int32)),
        "terminating": pa.array(np.zeros(size, dtype=bool)),
        "payload": pa.array([_payload(time_us, step)] * size, pa.binary()),
    }
    return _as_input(pa.table(columns), None)


def _as_input(table: pa.Table, tag: str | None) -> pa.Table:
    size = table.num_rows
    columns = []
    for field in PASS_INPUT_ARROW:
        if field.name == "carried":
            columns.append(pa.array([tag] * size, pa.string()))
        elif field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        elif field.name == "client_instance_id" and tag == "series":
            instance = pc.list_element(
                pc.split_pattern(table.column("series"), "|", max_splits=1), 0
            )
            columns.append(instance)
        else:
            columns.append(pa.nulls(size, field.type))
    return pa.table(columns, schema=PASS_INPUT_ARROW)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--churn", type=float, default=0.1)
    parser.add_argument("--retention-batches", type=int, default=3)
    args = parser.parse_args()
    live = np.arange(args.instances)
    next_id = args.instances
    state = {tag: CARRIED[tag].empty_table() for tag in CARRIED}
    highest: int | None = None
    print(f"{args.instances:,} instances, {args.churn:.0%} churn per batch, retention "
          f"{args.retention_batches} batches (hours of event time)")  # fmt: skip
    print("batch  pushes     carried: series  windows  inventory   retired  seconds")
    for batch in range(args.batches):
        time_us = T0_US + batch * HOUR_US
        started = time.perf_counter()
        rows = pa.concat_tables(
            [_pushes(live, time_us, batch)]
            + [_as_input(table, tag) for tag, table in state.items() if table.num_rows]
        )
        rows = rows.take(pc.sort_indices(rows, [("client_instance_id", "ascending")]))
        plan = PassPlan(
            staging="",
            window_seconds=60,
            as_of_us=time_us,
            retire_before_us=None
            if highest is None
            else highest - args.retention_batches * HOUR_US,
        )
        results = [
            process_group(group, plan) for group in instance_groups(iter(rows.to_batches(65_536)))
        ]
        sides = {
            name: pa.concat_tables([r.sides[name] for r in results]) for name in results[0].sides
        }
        highest = max(r.max_event_time for r in results if r.max_event_time is not None)
        _, still_open = split_windows(sides["windows"], highest - 60_000_000)
        state = {tag: sides[name] for tag, name in STATE_SIDES.items()}
        state["window"] = still_open
        seconds = time.perf_counter() - started
        print(
            f"{batch:5d} {len(live):8,d} {state['series'].num_rows:15,d} "
            f"{state['window'].num_rows:8,d} {state['client'].num_rows:10,d} "
            f"{sides['retired_clients'].num_rows:9,d} {seconds:8.1f}"
        )
        leaving = int(len(live) * args.churn)
        live = np.concatenate([live[leaving:], np.arange(next_id, next_id + leaving)])
        next_id += leaving


if __name__ == "__main__":
    main()
