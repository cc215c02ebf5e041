"""What unauthenticated peers cost a clean, authenticated client, and the gateway's memory.

One gateway with a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-512, OAUTHBEARER) and
an SSL listener. A clean client, logged in with PLAIN before any attack, times
ApiVersions and GetTelemetrySubscriptions round trips alone, then beside each
attack (``tests/preauth_attacks.py``, in a process of its own):

* SCRAM client-first messages with a 2 MiB user name, and with a 500 KB one
  (under Kafka's 512 KiB ``sasl.server.max.receive.size``);
* OAUTHBEARER tokens of 2 MiB and of 500 KB (the attackers of these four run at
  the lowest priority on the clean client's core);
* ``--connections`` TLS connections parked on the SSL listener, each with a
  partial 1 MB request (900 KB of it sent); then they are reset, and the gateway's
  RSS is read 1, 3, 5 and 10 s later.

It prints the clean client's rate beside each attack as a share of its rate
alone (the mean of a run before and one after the attack; aim: 80 % or more),
what the attackers were answered, and the gateway's RSS. The attackers connect
from ``--source`` (127.0.0.2), the clean client from 127.0.0.1, as from two
hosts; ``--creation-rate N`` sets the gateway's ``connection_creation_rate_per_ip``.
The machine may be shared: compare runs of the same session.

    python bench/preauth.py --seconds 5 --attackers 4 --connections 900
    python bench/preauth.py --seconds 5 --attackers 4 --connections 900 --creation-rate 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import tree_cpu
from ports import free_port, stop_process, wait_port
from tail_latency import cores, pin, rss_mib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import preauth_attacks  # noqa: E402
from tests.plain_flood import CleanClient, add_user  # noqa: E402
from tests.security.jwts import AUDIENCE, ISSUER, Signer  # noqa: E402
from tests.tlsfiles import TestCA  # noqa: E402

BIN = Path(sys.executable).parent
PASSWORD = "alice-secret"
#: The attackers share the clean client's core (there are only two: the gateway has
#: the other). At a lower priority their own CPU time is not taken from the clean
#: client, so its rate shows what the attacks cost the gateway.
ATTACKER_NICENESS = 19


def start_gateway(
    work: Path, core: int | None, nice: int, creation_rate: int
) -> tuple[subprocess.Popen[bytes], int, int, Path]:
    """The gateway, pinned to ``core``: (process, SASL_PLAINTEXT port, SSL port, CA file)."""
    data = work / "data"
    add_user(data, "alice", PASSWORD)
    ca = TestCA(work / "pki")
    pem = ca.issue("server")
    jwks = work / "jwks.json"
    jwks.write_text(json.dumps(Signer().jwks()))
    sasl_port, ssl_port = free_port(), free_port()
    config = work / "gateway.toml"
    config.write_text(
        f'[gateway]\nlisten = ["SASL_PLAINTEXT://127.0.0.1:{sasl_port}", '
        f'"SSL://127.0.0.1:{ssl_port}"]\nmax_connections_per_ip = 5000\n'
        f"connection_creation_rate_per_ip = {creation_rate}\n"
        f'[tls]\ncertificate = "{pem.certificate}"\nprivate_key = "{pem.private_key}"\n'
        '[sasl]\nmechanisms = ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"]\n'
        f'[sasl.oauthbearer]\njwks = "{jwks}"\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\n'
    )
    proc = subprocess.Popen(
        [
            *(str(BIN / "clientmetrics"), "serve", "--config", str(config)),
            *("--data-dir", str(data), "--log-level", "error"),
        ],
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: pin(core, nice),  # noqa: PLW1509
    )
    wait_port(sasl_port, 60)
    wait_port(ssl_port, 60)
    return proc, sasl_port, ssl_port, ca.ca


def clean_rate(port: int, seconds: float) -> float:
    client = CleanClient(port, "alice", PASSWORD)
    try:
        return len(client.latencies(seconds)) / seconds
    finally:
        client.close()


def beside(alone: float, rate: float, again: float) -> str:
    """The clean client's rate beside an attack, as a share of its rate alone: the mean
    of a run before and one after (on a shared host its own rate drifts by more than an
    attack costs)."""
    share = rate / ((alone + again) / 2)
    return (
        f"clean {alone:7.1f} / {again:7.1f} req/s alone before / after, "
        f"{rate:7.1f} beside ({share:6.1%})"
    )


def floods(args: argparse.Namespace, proc: subprocess.Popen[bytes], port: int) -> None:
    for kind, size in (
        ("scram", 2 * 1024 * 1024),
        ("scram", 500_000),
        ("oauthbearer", 2 * 1024 * 1024),
        ("oauthbearer", 500_000),
    ):
        alone = clean_rate(port, args.seconds)  # measured next to it: the host's load drifts
        attack = preauth_attacks.start(
            kind,
            *(f"--port={port}", f"--size={size}", f"--threads={args.attackers}"),
            f"--seconds={args.seconds + 1.5}",
            f"--source={args.source}",
            niceness=ATTACKER_NICENESS,
        )
        time.sleep(0.5)
        cpu, started = tree_cpu(proc.pid), time.monotonic()
        rate = clean_rate(port, args.seconds)
        cpu = (tree_cpu(proc.pid) - cpu) / (time.monotonic() - started)
        out, _ = attack.communicate(timeout=args.seconds + 120)
        result = json.loads(out.strip().splitlines()[-1])
        clean = beside(alone, rate, clean_rate(port, args.seconds))
        print(
            f"{args.attackers} x {kind:11s} {size / 1024:6.0f} KiB: {clean}; "
            f"attempts {result['attempts']}, answers {result['codes']}; gateway CPU {cpu:.0%}, "
            f"RSS {rss_mib(proc.pid):.0f} MiB"
        )


def parked(args: argparse.Namespace, proc: subprocess.Popen[bytes], ports: tuple[int, int],
           ca: Path) -> None:  # fmt: skip
    sasl_port, ssl_port = ports
    alone = clean_rate(sasl_port, args.seconds)
    before = rss_mib(proc.pid)
    attack = preauth_attacks.start(
        "park",
        *(f"--port={ssl_port}", f"--connections={args.connections}", f"--tls-ca={ca}"),
        *("--declared=1000000", "--size=900000", f"--source={args.source}"),
    )
    assert attack.stdout is not None
    assert attack.stdin is not None
    line = attack.stdout.readline().strip()
    time.sleep(2.0)
    during = rss_mib(proc.pid)
    rate = clean_rate(sasl_port, args.seconds)
    attack.stdin.write("close\n")
    attack.stdin.flush()
    ended = attack.stdout.readline().strip()
    closed_at = time.monotonic()
    after = []
    for at in (1, 3, 5, 10):
        time.sleep(max(0.0, closed_at + at - time.monotonic()))
        after.append(f"+{at} s {rss_mib(proc.pid):.0f}")
    attack.wait(30)
    clean = beside(alone, rate, clean_rate(sasl_port, args.seconds))
    print(
        f"{line} TLS connections, 900 KB of a 1 MB request each: {clean}; "
        f"gateway RSS {before:.0f} -> {during:.0f} MiB"
    )
    print(f"  {ended}; after they were reset: RSS {', '.join(after)} MiB (start {before:.0f} MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--attackers", type=int, default=4)
    parser.add_argument("--connections", type=int, default=900)
    parser.add_argument(
        "--nice", type=int, default=0, help="priority of the gateway and the clients (root)"
    )
    parser.add_argument(
        "--source",
        default="127.0.0.2",
        help="the attackers' address (the clean client's is 127.0.0.1; the same address "
        "puts both behind one per-address limit)",
    )
    parser.add_argument(
        "--creation-rate",
        type=int,
        default=0,
        help="the gateway's connection_creation_rate_per_ip (0: no limit, the default)",
    )
    args = parser.parse_args()
    gateway_core, client_core = cores()
    pin(client_core, args.nice)  # the clean client; the attackers inherit it
    with tempfile.TemporaryDirectory(prefix="cm-preauth-") as tmp:
        proc, sasl_port, ssl_port, ca = start_gateway(
            Path(tmp), gateway_core, args.nice, args.creation_rate
        )
        try:
            print(
                f"load average {os.getloadavg()[0]:.1f}; gateway on core {gateway_core}, "
                f"clients on {client_core}, nice {args.nice}; attackers from {args.source}; "
                f"connection_creation_rate_per_ip {args.creation_rate}; gateway RSS "
                f"{rss_mib(proc.pid):.0f} MiB"
            )
            floods(args, proc, sasl_port)
            parked(args, proc, (sasl_port, ssl_port), ca)
        finally:
            stop_process(proc, 30)


if __name__ == "__main__":
    main()
