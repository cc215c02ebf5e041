"""Sarama (github.com/IBM/sarama, pinned in ``sarama/go.mod``) as a peer: a Go client
without KIP-714.

``peers/sarama/`` is a small Go program: a Sarama sync producer that sends
``-messages`` records to ``-topic`` as ``-client-id``, closes, and prints JSON lines
(``done``, ``error``, ``exit``). It names itself in ApiVersions v3 (``sarama`` and its
module version) and never asks for telemetry. ::

    client = sarama_go(bootstrap, "-client-id", "app", "-messages", "10").start()
    client.stop()
"""

from __future__ import annotations

from pathlib import Path

from peers.build import go_binary
from peers.process import PeerProcess

HERE = Path(__file__).resolve().parent
MODULE = HERE / "sarama"


def sarama_binary() -> Path:
    """The built program (``go build``, cached by the hash of its sources and go.sum)."""
    return go_binary(MODULE, "sarama-peer")


def sarama_go(bootstrap: str, *args: str, log_path: Path | None = None) -> PeerProcess:
    """A Sarama peer for ``bootstrap`` with the program's flags ``args`` (not started)."""
    return PeerProcess([str(sarama_binary()), "-bootstrap", bootstrap, *args], log_path=log_path)


__all__ = ["sarama_binary", "sarama_go"]
