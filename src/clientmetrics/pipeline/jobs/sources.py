"""The pipeline's two sources as Structured Streaming queries: landed files, or a Kafka topic.

* **landing** (the embedded default) — Spark's file source over the landing
  directory names each micro-batch's new files (its checkpoint is the
  processed-files manifest); the pass's tasks read the files themselves.
* **kafka** — Spark's Kafka source (the connector jars, ``spark.connector``)
  reads the topic the topic exporter and the broker plugin write; offsets
  live in the checkpoint. Records are keyed by client instance, so a Kafka
  partition holds whole instances and is the share of one task.

The Kafka client's settings are the ones the admin tool reads
(``--command-config``: Java client properties), given to Spark's consumer as
``kafka.<name>``; librdkafka's spellings of the common ones are translated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, IntegerType, StructField, StructType

from clientmetrics.client.properties import PROTOCOLS, parse_bootstrap
from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.schemas import LANDING_ARROW
from clientmetrics.pipeline.spark.files import open_uri
from clientmetrics.pipeline.spark.passes import spark_schema
from clientmetrics.telemetry.otlp import TELEMETRY_TOPIC as DEFAULT_TOPIC

#: The column naming each push's landed file.
LANDED_FILE = "landed_file"

_LANDING = StructType(
    [
        *spark_schema(LANDING_ARROW).fields,
        StructField("date", DateType()),
        StructField("hour", IntegerType()),
    ]
)

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True, slots=True)
class KafkaSource:
    """Where the pipeline reads pushes from a topic, and as whom."""

    bootstrap_servers: str
    topic: str = DEFAULT_TOPIC
    #: Kafka client properties (``--command-config``): security and consumer settings.
    properties: Mapping[str, str] = field(default_factory=dict)
    #: Bound a micro-batch (Spark's ``maxOffsetsPerTrigger``).
    max_offsets_per_trigger: int | None = None

    def __post_init__(self) -> None:
        parse_bootstrap(self.bootstrap_servers)  # one line for a bad list, here
        if not self.topic:
            raise ConfigurationError("the Kafka source needs a topic")
        consumer_options(self.properties)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def consumer_options(properties: Mapping[str, str]) -> dict[str, str]:
    """Kafka client properties as the Java consumer takes them.

    ``security.protocol`` is checked as the admin tool checks it;
    librdkafka's ``ssl.ca.location`` becomes a PEM trust store and
    ``sasl.username``/``sasl.password`` a JAAS line for the mechanism.
    librdkafka's ``ssl.certificate.location``/``ssl.key.location`` have no
    Java equivalent without a combined file: they are refused with one line.
    """
    props = {str(k): str(v) for k, v in properties.items()}
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigurationError(
            f"Invalid value {protocol} for configuration security.protocol: "
            f"String must be one of: {', '.join(PROTOCOLS)}"
        )
    if "ssl.certificate.location" in props or "ssl.key.location" in props:
        raise ConfigurationError(
            "ssl.certificate.location/ssl.key.location are librdkafka's: for the pipeline's "
            "Java consumer use ssl.keystore.type=PEM with ssl.keystore.location (key and chain)"
        )
    out = dict(props)
    if "ssl.ca.location" in out:
        out.setdefault("ssl.truststore.type", "PEM")
        out["ssl.truststore.location"] = out.pop("ssl.ca.location")
    username, password = out.pop("sasl.username", None), out.pop("sasl.password", None)
    if protocol.startswith("SASL_") and "sasl.jaas.config" not in out:
        mechanism = out.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in _JAAS_MODULES or username is None or password is None:
            raise ConfigurationError(
                f"sasl.mechanism={mechanism} needs sasl.jaas.config, or one of "
                f"{', '.join(_JAAS_MODULES)} with sasl.username and sasl.password"
            )
        out["sasl.jaas.config"] = (
            f"{_JAAS_MODULES[mechanism]} required username={_quoted(username)} "
            f"password={_quoted(password)};"
        )
    return out


def kafka_stream(spark: SparkSession, source: KafkaSource) -> DataFrame:
    """The topic's records (key, value, partition, offset, timestamp, headers), from the start."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", source.max_offsets_per_trigger)
    for key, value in consumer_options(source.properties).items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load()


def landing_stream(
    spark: SparkSession, input_path: str, max_files_per_trigger: int | None
) -> DataFrame:
    """Each new landed file's pushes: only ``received_at`` and the file's name are read."""
    # The partition columns are part of the schema: a stream started on an
    # empty landing directory would otherwise not know them, and fail when
    # the first date=/hour= directory appears.
    reader = spark.readStream.schema(_LANDING)
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    landed = reader.parquet(input_path)
    return landed.select("received_at", F.col("_metadata.file_path").alias(LANDED_FILE))


def landed_files(pushes: DataFrame) -> tuple[datetime | None, list[str]]:
    """A landing batch's newest push and its files (one Spark job)."""
    named = F.col(LANDED_FILE) if LANDED_FILE in pushes.columns else F.col("_metadata.file_path")
    found = pushes.agg(F.max("received_at"), F.collect_set(named)).first()
    return (found[0], sorted(found[1])) if found else (None, [])


def batch_partitions(checkpoint: str, batch_id: int, topic: str) -> int:
    """How many partitions the topic has in this batch, from the query's offset log.

    Spark writes a batch's offsets (every partition's, idle ones included)
    before it runs the batch, and a replay reads the same ones.
    """
    filesystem, path = open_uri(f"{checkpoint.rstrip('/')}/offsets/{batch_id}")
    try:
        with filesystem.open_input_stream(path) as stream:
            lines = stream.read().decode("utf-8").splitlines()
    except OSError as exc:
        raise ConfigurationError(f"no offsets for batch {batch_id} in {checkpoint}") from exc
    for line in reversed(lines):
        offsets = json.loads(line) if line.startswith("{") else {}
        if topic in offsets:
            return len(offsets[topic])
    raise ConfigurationError(f"the offsets of batch {batch_id} do not name topic {topic}")
