"""The pipeline's two sources as Structured Streaming queries: landed files, or a Kafka topic.

* **landing** (the embedded default) — Spark's file source over the landing
  directory names each micro-batch's new files (its checkpoint is the
  processed-files manifest); the pass's tasks read the files themselves, each
  only its share's row groups (docs/landing.md).
* **kafka** — Spark's Kafka source (the connector jars, ``spark.connector``)
  reads the topic the topic exporter and the broker plugin write; offsets
  live in the checkpoint. Records are keyed by client instance, so a Kafka
  partition holds whole instances and is the share of one task.

The Kafka client's settings are the ones the admin tool reads
(``--command-config``: Java client properties), given to Spark's consumer as
``kafka.<name>``; librdkafka's spellings of the common ones are translated.

How many partitions the topic has (the pass's shares) is asked of its
metadata by the project's own client where it speaks the settings
(``reach.topic_partitions``), else by Kafka's Java admin client in the
driver's JVM (``java_topic_partitions``), the client library the consumer
itself runs, with the consumer's settings: a JKS trust store and GSSAPI
included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from clientmetrics.client.properties import CONNECT_TIMEOUT_S, PROTOCOLS, parse_bootstrap
from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.schemas import LANDED_FILES
from clientmetrics.telemetry.otlp import TELEMETRY_TOPIC as DEFAULT_TOPIC

#: The column naming each push's landed file.
LANDED_FILE = "landed_file"

#: The ``binaryFile`` source's columns, and the landing's partition columns.
_BINARY_FILE_ROWS = StructType(
    [
        StructField("path", StringType()),
        StructField("modificationTime", TimestampType()),
        StructField("length", LongType()),
        StructField("content", BinaryType()),
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
    """Each new landed file, as its name (the pass's tasks read the files themselves).

    Spark's file source in its ``binaryFile`` format: a row per file, whose
    contents it never reads when only the name is asked for.
    """
    # The partition columns are part of the schema: a stream started on an
    # empty landing directory would otherwise not know them, and fail when
    # the first date=/hour= directory appears.
    reader = (
        spark.readStream.format("binaryFile")
        .schema(_BINARY_FILE_ROWS)
        .option("pathGlobFilter", LANDED_FILES.rsplit("/", 1)[-1])
    )
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    return reader.load(input_path).select(F.col("path").alias(LANDED_FILE))


def landed_files(pushes: DataFrame) -> list[str]:
    """A landing batch's files: a small job collects their names (a row each, no contents)."""
    return sorted(str(row[0]) for row in pushes.collect())


def java_topic_partitions(
    spark: SparkSession, source: KafkaSource, timeout_s: float = 3 * CONNECT_TIMEOUT_S
) -> int:
    """How many partitions the topic has, asked by Kafka's Java admin client.

    It runs in the driver's JVM, from the connector's ``kafka-clients`` jar,
    with the settings Spark's consumer gets: whatever the consumer can log in
    with, this can. ``ConfigurationError`` (one line) when it cannot.
    """
    jvm: Any = spark.sparkContext._jvm
    settings = {**consumer_options(source.properties), "client.id": "clientmetrics-pipeline"}
    settings["bootstrap.servers"] = source.bootstrap_servers
    properties = jvm.java.util.Properties()
    for key, value in settings.items():
        properties.setProperty(key, value)
    try:
        admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(properties)
        try:
            topics = admin.describeTopics(jvm.java.util.Collections.singletonList(source.topic))
            seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
            described = topics.allTopicNames().get(int(timeout_s), seconds)
            return int(described.get(source.topic).partitions().size())
        finally:
            admin.close(jvm.java.time.Duration.ofSeconds(5))
    except Py4JError as exc:
        raise ConfigurationError(
            f"cannot count the partitions of topic {source.topic} at "
            f"{source.bootstrap_servers}: {_java_reason(exc)}"
        ) from exc


def _java_reason(exc: Py4JError) -> str:
    """The innermost Java exception's line (an ``ExecutionException`` wraps the cause)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return str(exc).strip().splitlines()[0]
    while java.getCause() is not None:
        java = java.getCause()
    return f"{java.getClass().getSimpleName()}: {java.getMessage()}"
