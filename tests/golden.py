"""Golden PushTelemetry payloads captured from real clients (described in data/README.md)."""

from __future__ import annotations

from pathlib import Path

#: librdkafka 2.16.0 pushes: ``{producer,consumer}-push.otlp.bin``, ``.txt`` dumps, a zstd frame.
LIBRDKAFKA = Path(__file__).resolve().parent / "data" / "librdkafka-2.16"
#: Apache Kafka's Java client 4.4.0 and franz-go v1.22.3 pushes through the proxy in front of
#: Kafka 4.4 (``tests/peers/test_clients_proxy.py`` with ``CLIENTMETRICS_CAPTURE``):
#: ``{producer,consumer}-push.otlp.bin`` and the landed labels, ``{producer,consumer}-labels.json``.
JAVA = Path(__file__).resolve().parent / "data" / "java-4.4.0"
FRANZ_GO = Path(__file__).resolve().parent / "data" / "franz-go-1.22.3"
