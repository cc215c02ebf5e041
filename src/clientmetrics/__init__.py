"""clientmetrics: Kafka client telemetry (KIP-714, KIP-1000, KIP-1313).

A Kafka-protocol gateway that receives client metrics, an admin tool for
client-metrics subscriptions, a client-side reporter and a PySpark pipeline.
"""

from clientmetrics.errors import ClientMetricsError

__version__ = "0.1.0"

__all__ = ["ClientMetricsError", "__version__"]
