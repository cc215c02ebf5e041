"""How well the findings catalogue finds injected faults: recall, delay, false findings.

A simulated fleet (the simulator's own metric model, ``reporter.sim_payloads``)
pushes every ``--interval`` seconds of simulated time; each fault kind is
injected into a fraction of the clients it applies to, at a random onset. Every
push interval is one batch through the pipeline core's engine (decode-shaped
points, series, ``rule_candidates``, ``track_episodes`` with carried state,
``alert_events``), with the whole catalogue enabled. The ground truth
(instance, fault, onset) is written beside the results (``--truth``). The
instances share ``COHORTS`` client ids (the out-of-profile findings' cohorts);
a ``cohort-outlier`` client is a new instance that starts at its onset.

Reported per fault kind: recall (faulty clients whose finding fired after the
onset, of those with at least 4 pushes after it), onset-to-finding delay in
push intervals (median, 95th percentile, max, and the share within 3), and
false findings (firing events on clients with no fault) per 1,000
client-hours. Healthy clients get one-push blips
(``--blips``, a chance per push) so the false-finding figure means something:
the simulator's healthy values alone never come near a threshold.

    python bench/findings.py --instances 1000 --hours 2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from clientmetrics.pipeline.core.findings import finding_of
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.core.schemas import DECODED_ARROW, INVENTORY_ARROW
from clientmetrics.reporter.sim_payloads import FAULTS, SimFault, SimMetrics

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the engine pass is the tests' (tests/pipeline/core/engine.py)

from tests.pipeline.core.engine import EnginePass  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: How many client ids (cohorts) the fleet's instances share.
COHORTS = 200
#: A latency shift's earliest onset: after 15 pushes of the client's own history.
HISTORY_S = 15 * 60
#: A healthy client's one-push blip (a GC pause, a broker's leader election): the value a
#: finding's metric takes for that push only, on the finding's bad side.
BLIPS = {
    "poll.idle.ratio.avg": 0.05,
    "produce.throttle.time.avg": 500.0,
    "record.queue.time.avg": 3000.0,
    "connection.creation.rate": 4.0,
    "commit.latency.avg": 2500.0,
    "node.request.latency.avg": 4000.0,
    # A counter's blip: one 15 s rebalance (250 ms/s over one 60 s push).
    "rebalance.latency.total": 15000.0,
    # The Java client's non-standard metrics (every simulated client sends them here).
    "records.per.request.avg": 1.0,
    "record.retry.rate": 10.0,
    "record.error.rate": 2.0,
    "failed.authentication.rate": 0.5,
}


def _p95(values: list[float]) -> float:
    """The 95th percentile (inclusive: a value seen, for few values)."""
    return (
        statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]
    )


def _fleet(
    count: int, faults: list[SimFault], hours: float, rng: random.Random
) -> list[SimMetrics]:
    clients = []
    for index in range(count):
        kind = "consumer" if index % 2 else "producer"
        clients.append(SimMetrics(kind, False, 0.0, int(T0.timestamp() * 1e9), nonstandard=True))
    for fault in faults:
        eligible = [c for c in clients if c.fault is None and fault.applies_to(c.kind)]
        for client in rng.sample(eligible, max(1, int(len(eligible) * fault.fraction))):
            # Onsets spread from the fault's onset to the last hour's middle.
            onset = rng.uniform(fault.onset_seconds, max(fault.onset_seconds, hours * 3600 / 2))
            if fault.kind == "latency-shift":
                # A departure from a client's own history needs one: 15 pushes at least.
                onset = max(onset, HISTORY_S)
            client.fault = fault.kind
            client.fault_onset_ns = int((T0.timestamp() + onset) * 1e9)
    return clients


def _points(
    clients: list[SimMetrics], ids: list[str], now: datetime, rng: random.Random, blips: float
) -> pa.Table:
    now_ns = int(now.timestamp() * 1e9)
    names = ("id", "name", "value", "attrs", "sum", "start")
    columns: dict[str, list[object]] = {n: [] for n in names}
    for client, instance in zip(clients, ids, strict=True):
        if client.fault == "cohort-outlier" and now_ns < client.fault_onset_ns:
            continue  # a new instance: it starts at its onset, unlike its cohort
        blip = None
        if client.fault is None and rng.random() < blips:
            blip = rng.choice(sorted(BLIPS))
            if blip == "rebalance.latency.total":
                client.rebalance_ms += int(BLIPS[blip])  # a counter's blip stays counted
        for point in client.points(rng, now_ns, delta=False):
            columns["id"].append(instance)
            columns["name"].append(point.name)
            value = float(point.value)
            if blip is not None and not point.is_sum and point.name.endswith(blip):
                value = BLIPS[blip]
            columns["value"].append(value)
            columns["attrs"].append([(k, str(v)) for k, v in point.attributes.items()])
            columns["sum"].append(point.is_sum)
            start = point.start_time_unix_nano
            columns["start"].append(
                datetime.fromtimestamp(start / 1e9, UTC) if point.is_sum and start else None
            )
    size = len(columns["id"])
    time_type = DECODED_ARROW.field("event_time").type
    data = {
        "client_instance_id": pa.array(columns["id"], pa.string()),
        "received_at": pa.array([now] * size, DECODED_ARROW.field("received_at").type),
        "metric_name": pa.array(columns["name"], pa.string()),
        "kind": pa.array(["sum" if is_sum else "gauge" for is_sum in columns["sum"]], pa.string()),
        "temporality": pa.array(
            ["cumulative" if is_sum else None for is_sum in columns["sum"]], pa.string()
        ),
        "monotonic": pa.array([True if is_sum else None for is_sum in columns["sum"]]),
        "start_time": pa.array(columns["start"], time_type),
        "event_time": pa.array([now] * size, time_type),
        "value": pa.array(columns["value"], pa.float64()),
        "attributes": pa.array(columns["attrs"], DECODED_ARROW.field("attributes").type),
    }
    arrays = [data.get(f.name, pa.nulls(size, f.type)) for f in DECODED_ARROW]
    return pa.Table.from_arrays(arrays, schema=DECODED_ARROW)


def run(
    count: int, hours: float, interval: int, faults: list[SimFault], seed: int, blips: float
) -> dict[str, object]:
    rng = random.Random(seed)
    rules = parse_rules({"findings": True}).rules
    clients = _fleet(count, faults, hours, rng)
    ids = [f"sim-{n:06d}" for n in range(count)]
    # Cohorts of 50 (a client_id shared by every 200th instance, all of one kind).
    inventory = pa.Table.from_pylist(
        [
            {
                "client_instance_id": i,
                "client_id": f"app-{n % COHORTS}",
                "client_software_name": "librdkafka",
                "principal": "User:app",
                "resource_attributes": [],
            }
            for n, i in enumerate(ids)
        ],
        schema=INVENTORY_ARROW,
    )
    engine = EnginePass(rules, inventory)
    fired: dict[str, list[tuple[str, datetime]]] = {}
    steps = int(hours * 3600 // interval)
    started = time.perf_counter()
    for step in range(steps):
        now = T0 + timedelta(seconds=step * interval)
        events = engine.batch(_points(clients, ids, now, rng, blips))
        for row in events.filter(pa.compute.equal(events.column("status"), "firing")).to_pylist():
            finding = finding_of(row["rule"])
            fired.setdefault(row["client_instance_id"], []).append(
                (finding.name if finding else row["rule"], row["fired_at"])
            )
    seconds = time.perf_counter() - started
    end = T0 + timedelta(seconds=steps * interval)
    truth = []
    per_kind: dict[str, dict[str, list[float]]] = {}
    false_findings = 0
    healthy = 0
    for client, instance in zip(clients, ids, strict=True):
        if client.fault is None:
            healthy += 1
            false_findings += len(fired.get(instance, []))
            continue
        onset = datetime.fromtimestamp(client.fault_onset_ns / 1e9, UTC)
        truth.append({"instance": instance, "fault": client.fault, "onset": onset.isoformat()})
        if (end - onset).total_seconds() < 4 * interval:
            continue
        wanted = FAULTS[client.fault][1]
        scores = per_kind.setdefault(client.fault, {"found": [], "delays": []})
        hits = [at for name, at in fired.get(instance, []) if name == wanted and at >= onset]
        scores["found"].append(1.0 if hits else 0.0)
        if hits:
            scores["delays"].append((min(hits) - onset).total_seconds() / interval)
    client_hours = healthy * steps * interval / 3600
    return {
        "instances": count,
        "simulated_hours": hours,
        "push_interval_s": interval,
        "engine_seconds": round(seconds, 1),
        "kinds": {
            kind: {
                "faulty": len(s["found"]),
                "recall": round(statistics.fmean(s["found"]), 3) if s["found"] else None,
                "delay_median_intervals": round(statistics.median(s["delays"]), 2)
                if s["delays"]
                else None,
                "delay_p95_intervals": round(_p95(s["delays"]), 2) if s["delays"] else None,
                "delay_max_intervals": round(max(s["delays"]), 2) if s["delays"] else None,
                "within_3_intervals": round(statistics.fmean(d <= 3 for d in s["delays"]), 3)
                if s["delays"]
                else None,
            }
            for kind, s in sorted(per_kind.items())
        },
        "false_findings_per_1000_client_hours": round(1000 * false_findings / client_hours, 3)
        if client_hours
        else None,
        "healthy_client_hours": round(client_hours, 1),
        "blip_chance_per_healthy_push": blips,
        "truth": truth,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--interval", type=int, default=60, help="push interval, seconds")
    parser.add_argument("--fraction", type=float, default=0.02, help="faulty share per kind")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--blips", type=float, default=0.01, help="chance a healthy push has a one-push blip"
    )
    parser.add_argument("--truth", type=Path, help="write the ground truth (JSON) here")
    args = parser.parse_args()
    faults = [SimFault(kind, 0.0, args.fraction) for kind in FAULTS]
    result = run(args.instances, args.hours, args.interval, faults, args.seed, args.blips)
    truth = result.pop("truth")
    if args.truth:
        args.truth.write_text(json.dumps(truth, indent=1), encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
