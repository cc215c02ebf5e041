"""``make kafka``: one Apache Kafka 4.4.0 node on 127.0.0.1 until Ctrl-C.

    python -m peers.kafka [--port 9092] [--dir ./kafka-data] [--sasl-ssl]
                          [--plugin clientmetrics [--set NAME=VALUE ...]]

PLAINTEXT by default. ``--sasl-ssl`` makes a CA and a certificate in the data folder
(``ca.pem`` is what clients trust), a SCRAM-SHA-512 user ``admin`` (password
``admin-secret``) that is a super user, and turns on ``StandardAuthorizer``; a properties
file for Kafka's tools' ``--command-config`` is written beside it. The broker carries the
minimal telemetry plugin, so it advertises KIP-714's two RPCs.

``--plugin clientmetrics`` (``make kafka-plugin``) carries the clientmetrics broker plugin
instead, built from ``broker-plugin/`` (its JUnit tests run in the build), as
docs/kafka-plugin.md installs it: its class on ``metric.reporters``, its settings
(``--set topic.partitions=4``: any ``clientmetrics.*`` setting without the prefix), and
its topic created before the command says the broker is ready.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from peers.kafka.launcher import (
    KafkaBroker,
    PeerUnavailable,
    TlsFiles,
    clientmetrics_plugin,
)

#: The plugin's topic and partitions unless ``--set`` says otherwise (its own defaults).
PLUGIN_TOPIC = "otlp_metrics"
PLUGIN_PARTITIONS = "1"


def _tls(folder: Path) -> TlsFiles:
    import trustme

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(folder / "ca.pem", folder / "broker.pem", folder / "broker.key")
    ca.cert_pem.write_to_path(str(files.ca))
    files.certificate.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(files.private_key))
    return files


def plugin_settings(pairs: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs as the plugin's settings (names without ``clientmetrics.``)."""
    settings: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().removeprefix("clientmetrics.")
        if not sep or not name:
            raise ValueError(f"--set takes NAME=VALUE (a clientmetrics.* setting), not {pair!r}")
        settings[name] = value
    return settings


def create_topic(broker: KafkaBroker, topic: str, partitions: int) -> int:
    """Create the plugin's topic unless it exists; its partition count."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({**broker.client_config(), "log_level": 3})
    found = admin.list_topics(timeout=30).topics.get(topic)
    if found is not None and not found.error:
        return len(found.partitions)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return partitions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make kafka", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--dir", type=Path, default=Path("kafka-data"))
    parser.add_argument("--sasl-ssl", action="store_true")
    parser.add_argument(
        "--plugin",
        choices=("test", "clientmetrics"),
        default="test",
        help="the telemetry plugin: the minimal test one, or the clientmetrics broker plugin",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a clientmetrics plugin setting (--plugin clientmetrics), e.g. topic.partitions=4",
    )
    args = parser.parse_args(argv)
    if args.set and args.plugin != "clientmetrics":
        parser.error("--set needs --plugin clientmetrics")
    try:
        settings = plugin_settings(args.set)
        partitions = int(settings.get("topic.partitions", PLUGIN_PARTITIONS))
    except ValueError as exc:
        parser.error(str(exc))
    topic = settings.get("topic", PLUGIN_TOPIC)
    workdir = args.dir.resolve()
    broker = KafkaBroker(workdir, port=args.port)
    if args.sasl_ssl:
        broker.listener = "SASL_SSL"
        broker.tls = _tls(workdir / "tls")
        broker.authorizer = True
    try:
        plugin = clientmetrics_plugin(settings) if args.plugin == "clientmetrics" else None
        broker.plugins = None if plugin is None else [plugin]
        broker.start()
    except PeerUnavailable as exc:
        print(f"make kafka: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"make kafka: {exc}", file=sys.stderr)
        return 1
    if plugin is not None:
        from confluent_kafka import KafkaException

        try:
            partitions = create_topic(broker, topic, partitions)
        except KafkaException as exc:
            print(f"make kafka: could not create topic {topic}: {exc}", file=sys.stderr)
            broker.stop()
            return 1
        print(
            f"clientmetrics plugin on metric.reporters ({plugin.jars[0].name}): "
            f"each push becomes a record on topic {topic} "
            f"({partitions} partition{'' if partitions == 1 else 's'})",
            flush=True,
        )
    print(broker.summary(), flush=True)
    if args.sasl_ssl:
        print(f"tools: --command-config {broker.command_config()}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.5):
        if broker.proc is None or broker.proc.poll() is not None:
            print(f"make kafka: the broker exited; log {broker.log_path}", file=sys.stderr)
            return 1
    broker.stop()
    print("kafka stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
