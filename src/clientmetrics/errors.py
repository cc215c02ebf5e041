"""The root of the package's error tree.

Every error the package raises on purpose derives from ``ClientMetricsError``.
Each layer translates the errors of the layer below it once, chaining them with
``raise ... from``, so callers never see ``OSError`` or ``asyncio.TimeoutError``
leak out of a public API.

    ClientMetricsError
    ├── wire.ProtocolError            bad bytes from a peer (framing, header, body)
    │   └── wire.FrameTooLarge        a size prefix above the configured maximum
    ├── wire.UnsupportedApi           an api key / version we do not serve
    ├── telemetry.ConfigError         a client-metrics config that fails validation
    │                                 (carries the Kafka error code and message)
    ├── telemetry.CompressionError    a payload that cannot be (de)compressed
    ├── telemetry.StateError          an illegal local transition of a state machine
    ├── store.StoreError              the subscription store failed
    ├── exporters.ExportError         an exporter could not land a push
    ├── admin.AdminError              an admin request failed (carries the error code)
    ├── extras.MissingExtraError      an optional extra is not installed (names it)
    ├── ListenError                   an address to listen on is taken or not ours (the
    │                                 machine's state, not the configuration: exit 1)
    └── ConfigurationError            bad gateway / pipeline configuration (exit 2)
"""

from __future__ import annotations


class ClientMetricsError(Exception):
    """Root of every error raised on purpose by clientmetrics."""


class ConfigurationError(ClientMetricsError):
    """A configuration file, option or environment variable is invalid."""


class ListenError(ClientMetricsError):
    """An address the configuration names cannot be listened on now (in use, not ours)."""
