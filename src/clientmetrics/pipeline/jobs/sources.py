"""The pipeline's Kafka source as a Structured Streaming query.

(The landing directory's source is ``spark.landing_source``: the pass's tasks
read the files it names.)

* **kafka** — Spark's Kafka source (the connector jars, ``spark.connector``)
  reads the topic the topic exporter and the broker plugin write; offsets
  live in the checkpoint. Records are keyed by client instance, so a Kafka
  partition holds whole instances and is the share of one task.

The Kafka client's settings are the ones the admin tool reads
(``--command-config``: Java client properties), given to Spark's consumer as
``kafka.<name>``; librdkafka's spellings of the common ones are translated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from clientmetrics.client.properties import PROTOCOLS, parse_bootstrap
from clientmetrics.errors import ConfigurationError
from clientmetrics.telemetry.otlp import TELEMETRY_TOPIC as DEFAULT_TOPIC

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
