"""franz-go (github.com/twmb/franz-go, pinned in ``franz-go/go.mod``) as a peer.

``peers/franz-go/`` is a small Go program: a franz-go producer and consumer group (KIP-714
client metrics are on by default in franz-go), printing JSON lines (``started``, ``done``,
``closed``, ``error``, ``exit``). franz-go does not expose its client instance id, so
its pushes are found by client id: ``ID-producer`` and ``ID-consumer`` for
``-client-id ID``. ::

    client = franz_go(bootstrap, "-client-id", "app", "-role", "producer", "-close").start()
    client.stop()
"""

from __future__ import annotations

from pathlib import Path

from peers.build import go_binary
from peers.process import PeerProcess

HERE = Path(__file__).resolve().parent
MODULE = HERE / "franz-go"


def franz_go_binary() -> Path:
    """The built program (``go build``, cached by the hash of its sources and go.sum)."""
    return go_binary(MODULE, "franzgo-peer", tests=True)


def franz_go(bootstrap: str, *args: str, log_path: Path | None = None) -> PeerProcess:
    """A franz-go peer for ``bootstrap`` with the program's flags ``args`` (not started)."""
    return PeerProcess([str(franz_go_binary()), "-bootstrap", bootstrap, *args], log_path=log_path)


__all__ = ["franz_go", "franz_go_binary"]
