"""``make peers``: fetch and build every peer the tests drive, so a test run finds them cached.

Prints one line a peer (where it is cached); exits 1 with the reason if one cannot be
built (a missing JDK, Maven or Go, or a registry that refused).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.spark import connector
from peers.build import PeerUnavailable
from peers.franz_go import franz_go_binary
from peers.java_client import java_client_jars
from peers.kafka.launcher import LEGACY_VERSION, kafka_jars, minimal_plugin, plugin_jar
from peers.kafka.tools import harness_jar
from peers.sarama_go import sarama_binary


def _spark_kafka_connector() -> Path:
    try:
        return connector.fetch()
    except ConfigurationError as exc:
        raise PeerUnavailable(str(exc)) from exc


#: name -> builder; each returns where its result is cached.
PEERS: dict[str, Callable[[], Path]] = {
    "kafka 4.4.0 jars": kafka_jars,
    # The broker plugin's tests run its legacy entry class on a broker older than 4.2.
    f"kafka {LEGACY_VERSION} jars": lambda: kafka_jars(LEGACY_VERSION),
    "kafka test plugin": lambda: minimal_plugin().jars[0],
    "kafka tool harness": harness_jar,
    "clientmetrics broker plugin (with its JUnit tests)": plugin_jar,
    "spark kafka connector": _spark_kafka_connector,
    "java client peer": java_client_jars,
    "franz-go peer": franz_go_binary,
    "sarama peer": sarama_binary,
}


def main() -> int:
    for name, build in PEERS.items():
        began = time.monotonic()
        try:
            where = build()
        except PeerUnavailable as exc:
            print(f"peers: {name}: {exc}", file=sys.stderr)
            return 1
        print(f"peers: {name}: {where} ({time.monotonic() - began:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
