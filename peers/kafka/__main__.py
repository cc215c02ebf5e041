"""``make kafka``: one Apache Kafka 4.4.0 node on 127.0.0.1 until Ctrl-C.

    python -m peers.kafka [--port 9092] [--dir ./kafka-data] [--sasl-ssl]

PLAINTEXT by default. ``--sasl-ssl`` makes a CA and a certificate in the data folder
(``ca.pem`` is what clients trust), a SCRAM-SHA-512 user ``admin`` (password
``admin-secret``) that is a super user, and turns on ``StandardAuthorizer``; a properties
file for Kafka's tools' ``--command-config`` is written beside it. The broker carries the
minimal telemetry plugin, so it advertises KIP-714's two RPCs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from peers.kafka.launcher import KafkaBroker, PeerUnavailable, TlsFiles


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make kafka", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--dir", type=Path, default=Path("kafka-data"))
    parser.add_argument("--sasl-ssl", action="store_true")
    args = parser.parse_args(argv)
    workdir = args.dir.resolve()
    broker = KafkaBroker(workdir, port=args.port)
    if args.sasl_ssl:
        broker.listener = "SASL_SSL"
        broker.tls = _tls(workdir / "tls")
        broker.authorizer = True
    try:
        broker.start()
    except PeerUnavailable as exc:
        print(f"make kafka: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"make kafka: {exc}", file=sys.stderr)
        return 1
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
