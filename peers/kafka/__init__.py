"""Apache Kafka 4.4.0 from Maven's jars: the launcher and Kafka's own tools."""

from peers.kafka.launcher import (
    TOOLS,
    VERSION,
    KafkaBroker,
    PeerUnavailable,
    Plugin,
    TlsFiles,
    clientmetrics_plugin,
    kafka_jars,
    minimal_plugin,
    plugin_jar,
    run_tool,
)

__all__ = [
    "TOOLS",
    "VERSION",
    "KafkaBroker",
    "PeerUnavailable",
    "Plugin",
    "TlsFiles",
    "clientmetrics_plugin",
    "kafka_jars",
    "minimal_plugin",
    "plugin_jar",
    "run_tool",
]
