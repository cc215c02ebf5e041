"""Golden PushTelemetry payloads captured from real clients (described in data/README.md)."""

from __future__ import annotations

from pathlib import Path

#: librdkafka 2.16.0 pushes: ``{producer,consumer}-push.otlp.bin``, ``.txt`` dumps, a zstd frame.
LIBRDKAFKA = Path(__file__).resolve().parent / "data" / "librdkafka-2.16"
