"""The decode pass (``arrow_pass``, ``arrow_alerts``) gives the reference transforms' answers."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from clientmetrics.pipeline import alerts, clients, points, windows
from clientmetrics.pipeline.arrow_pass import PASS_INPUT_ARROW, PassPlan, instance_groups
from clientmetrics.pipeline.job import (
    EPISODES,
    INVENTORY_STATE,
    PipelineConfig,
    PipelineJob,
    arrow_writes_points,
)
from clientmetrics.pipeline.pass_files import run_pass
from clientmetrics.pipeline.rules import parse_rules
from clientmetrics.pipeline.schemas import (
    ALERT_STATE,
    DECODED,
    SERIES_STATE,
    WINDOW_STATE,
)
from tests.synthetic import Push, landing_table, producer_payload
from tests.pipeline.frames import at, naive
from tests.pipeline.test_normalised_points import mixed_pushes

RULES = parse_rules(
    {
        "rule": [
            # librdkafka's per-broker latency gauges: some above 14, some not, changing by step.
            {
                "name": "latency",
                "metric": "org.apache.kafka.producer.node.request.latency.",
                "condition": "exceeded 14 ms for 10 seconds",
            },
            {
                "name": "latency-strict",
                "metric": "org.apache.kafka.producer.node.request.latency.avg",
                "condition": "exceeded 12 ms for more than 10 seconds",
            },
            # The cumulative sum "c" climbs 1, 4, 7, 10, then restarts: episodes open and close.
            {"name": "c-high", "metric": "c", "op": ">=", "threshold": 4, "for": "15s"},
            {"name": "never", "metric": "d", "op": ">", "threshold": 1e12},
        ]
    }
).rules


def _run_pass(
    pushes: DataFrame, tmp: Path, states: dict[str, DataFrame]
) -> tuple[dict[str, list[str]], datetime]:
    plan = PassPlan(
        staging=str(tmp / "staging"),
        window_seconds=60,
        late_before_us=int(at(5).timestamp()) * 1_000_000,
        rules=RULES,
    )
    manifest = points.decode_pass(
        pushes, states["series"], states["windows"], states["alerts"], plan
    ).collect()
    files: dict[str, list[str]] = {}
    for row in manifest:
        if row["path"] is not None:
            files.setdefault(row["kind"], []).append(row["path"])
    highest: datetime = max(
        r["max_event_time"] for r in manifest if r["max_event_time"] is not None
    )
    return files, highest


def _states(spark: SparkSession) -> dict[str, DataFrame]:
    series = spark.createDataFrame(
        [
            ("i-0|d|node.id=1,topic=t", naive(at(-10)), naive(at(-20)), 50.0),
            ("i-1|c|", naive(at(-10)), naive(at(-100)), 400.0),
            ("gone|x|", naive(at(-10)), naive(at(-20)), 1.0),
        ],
        SERIES_STATE,
    )
    window_state = spark.createDataFrame(
        [
            # Merges with this batch's first window of the same series.
            (
                "i-0|g|",
                "i-0",
                "g",
                {},
                naive(at(0)),
                naive(at(60)),
                2,
                100.0,
                1.0,
                99.0,
                5.0,
                naive(at(9)),
            ),
            # An instance with nothing new: carried as it is.
            (
                "gone|x|",
                "gone",
                "x",
                {"k": "v"},
                naive(at(0)),
                naive(at(60)),
                1,
                1.0,
                1.0,
                1.0,
                1.0,
                naive(at(1)),
            ),
        ],
        WINDOW_STATE,
    )
    alert_state = spark.createDataFrame(
        [
            # Fired earlier; continues while c >= 4, resolves at the first c < 4.
            (
                "c-high",
                "i-1|c|",
                "i-1",
                "c",
                {},
                naive(at(-30)),
                naive(at(-10)),
                9.0,
                5.0,
                naive(at(-15)),
            ),
            # Open, not fired, for an instance that sent nothing: kept open.
            (
                "latency",
                "gone|x|",
                "gone",
                "x",
                {},
                naive(at(-30)),
                naive(at(-10)),
                20.0,
                20.0,
                None,
            ),
        ],
        ALERT_STATE,
    )
    return {"series": series, "windows": window_state, "alerts": alert_state}


def test_the_pass_matches_the_reference_transforms(
    spark: SparkSession, tmp_path: Path, small_arrow_batches: None
) -> None:
    pushes = mixed_pushes(spark)
    states = _states(spark)
    files, highest = _run_pass(pushes, tmp_path, states)

    reference = points.with_normalised_values(
        points.with_series_key(points.explode_points(pushes)), states["series"]
    ).persist()
    written = spark.read.parquet(*files["points"])
    names = [*DECODED.names, "series", "cumulative_value", "rate_per_second"]
    assert written.count() == reference.count() > 0
    assertDataFrameEqual(written.select(*names), reference.select(*names))
    assert highest == reference.agg(F.max("event_time")).first()[0]

    on_time = windows.filter_on_time(reference, at(5))
    partials = windows.aggregate_window_partials(on_time, 60)
    expected_windows = windows.merge_window_partials(states["windows"], partials)
    assertDataFrameEqual(
        spark.read.schema(WINDOW_STATE).parquet(*files["windows"]), expected_windows
    )

    expected_series = points.next_series_state(reference, states["series"])
    assertDataFrameEqual(spark.read.schema(SERIES_STATE).parquet(*files["series"]), expected_series)

    expected_clients = clients.aggregate_client_pushes(pushes, reference)
    assertDataFrameEqual(
        spark.read.schema(INVENTORY_STATE).parquet(*files["clients"]), expected_clients
    )

    rules = alerts.rules_frame(spark, RULES)
    evaluated = alerts.evaluate_rules(alerts.points_named_by(reference, RULES), rules)
    expected_episodes = alerts.track_alert_episodes(evaluated, states["alerts"], rules)
    episodes = spark.read.schema(EPISODES).parquet(*files["episodes"])
    assertDataFrameEqual(episodes, expected_episodes)
    # The data exercise what they should: episodes fire, resolve, stay open and carry over.
    assert episodes.where("newly_fired").count() > 0
    assert episodes.where("resolved_at IS NOT NULL").count() > 0
    assert episodes.where("resolved_at IS NULL").count() > 0
    carried = episodes.where("rule = 'c-high' AND series = 'i-1|c|' AND episode = 0").first()
    assert carried is not None
    assert carried["started_at"] == naive(at(-30))
    assert episodes.where("rule = 'never'").count() == 0
    reference.unpersist()


def _pass_rows(pushes: list[Push]) -> pa.Table:
    landed = landing_table(pushes)
    columns = {
        field.name: landed.column(field.name)
        if field.name in landed.column_names
        else pa.nulls(landed.num_rows, field.type)
        for field in PASS_INPUT_ARROW
    }
    return pa.table(columns, schema=PASS_INPUT_ARROW).sort_by("client_instance_id")


def test_instance_groups_never_split_an_instance() -> None:
    ids = ["a", "a", "a", "a", "b", "c", "c", "c", "d"]
    table = pa.table({"client_instance_id": ids, "n": list(range(len(ids)))})
    for size in (1, 2, 3, 4, 9):
        groups = list(instance_groups(iter(table.to_batches(max_chunksize=size))))
        seen = [set(group.column("client_instance_id").to_pylist()) for group in groups]
        assert sum(group.num_rows for group in groups) == len(ids)
        for index, instances in enumerate(seen):
            others = set().union(*(s for i, s in enumerate(seen) if i != index))
            assert not instances & others, (size, seen)


def test_a_task_writes_points_by_event_day_and_lists_every_file(tmp_path: Path) -> None:
    midnight_us = 1_795_392_000_000_000  # 2026-11-23T00:00:00Z
    instance = str(uuid.uuid4())
    pushes = [
        Push(at_us, instance, producer_payload(at_us * 1000, step))
        for step, at_us in enumerate((midnight_us - 30_000_000, midnight_us + 30_000_000))
    ]
    plan = PassPlan(staging=str(tmp_path / "staging"), window_seconds=60, flush_rows=1)
    manifest = run_pass(iter(_pass_rows(pushes).to_batches()), plan, "00003-1").to_pylist()
    written = [row for row in manifest if row["kind"] == "points"]
    assert {Path(row["path"]).parent.name for row in written} == {
        "date=2026-11-22",
        "date=2026-11-23",
    }
    for row in manifest:
        if row["path"] is not None:
            assert Path(row["path"]).name.startswith("part-00003-1-")
            assert pq.read_metadata(row["path"]).num_rows == row["rows"] > 0
    on_disk = sorted(str(p) for p in (tmp_path / "staging").rglob("*.parquet"))
    assert on_disk == sorted(row["path"] for row in manifest if row["path"] is not None)
    progress = [row for row in manifest if row["kind"] == "progress"]
    assert progress[0]["max_event_time"] == datetime.fromtimestamp(
        (midnight_us + 30_000_000) / 1e6, tz=progress[0]["max_event_time"].tzinfo
    )
    clients_file = next(row["path"] for row in manifest if row["kind"] == "clients")
    inventory = pq.read_table(clients_file).to_pylist()
    assert [(row["client_instance_id"], row["pushes"]) for row in inventory] == [(instance, 2)]


def test_a_task_with_no_rows_writes_nothing(tmp_path: Path) -> None:
    plan = PassPlan(staging=str(tmp_path / "staging"), window_seconds=60)
    manifest = run_pass(iter([]), plan, "00000-0").to_pylist()
    assert manifest == [{"kind": "progress", "path": None, "rows": 0, "max_event_time": None}]
    assert not (tmp_path / "staging").exists()


@pytest.mark.parametrize("writer", ["spark", "arrow", "auto"])
def test_the_points_writer_is_chosen_by_location(
    spark: SparkSession, tmp_path: Path, writer: str
) -> None:
    def job(output: str) -> PipelineJob:
        config = PipelineConfig(
            input_path=str(tmp_path / "in"),
            output_path=output,
            checkpoint_path=str(tmp_path / "ck"),
            points_writer=writer,
        )
        return PipelineJob(spark, config)

    assert job(str(tmp_path / "tables")).points_writer == (
        "spark" if writer == "spark" else "arrow"
    )
    assert job("relative/tables").points_writer == ("spark" if writer == "spark" else "arrow")
    # pyarrow does not know Hadoop's s3a: only an explicit ask for arrow is an error.
    if writer == "arrow":
        with pytest.raises(ValueError, match="cannot open"):
            arrow_writes_points(writer, "s3a://bucket/tables")
    else:
        assert not arrow_writes_points(writer, "s3a://bucket/tables")
    with pytest.raises(ValueError, match="points writer"):
        PipelineConfig("in", "out", "ck", points_writer="pandas")
