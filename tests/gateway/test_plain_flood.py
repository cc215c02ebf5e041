"""A flood of PLAIN logins with wrong random passwords does not stall other clients.

Against a real ``clientmetrics serve``: alice's credential is SCRAM-SHA-512 with
16384 iterations, so every wrong password costs the gateway one PBKDF2 derivation
of 15 ms or more (none can hit the verified-password cache). A second process floods
logins (150 a second); a clean client, authenticated before, times its ApiVersions and
GetTelemetrySubscriptions round trips meanwhile. Derived on the event loop, the
flood keeps the loop busy with back-to-back derivations and each clean round trip
waits for them; derived on the verification threads, the loop stays free.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.plain_flood import ITERATIONS, CleanClient, add_user, start_flood
from tests.procs import MIN_DEADLINE_S, GatewayProcess

pytestmark = pytest.mark.integration

PASSWORD = "alice-secret"
#: Logins a second the flood offers (the issue's figure was ~100), for FLOOD_S seconds.
RATE = 150.0
FLOOD_S = 5.0


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    data = tmp_path / "data"
    add_user(data, "alice", PASSWORD)
    add_user(data, "bob", PASSWORD)
    config = '[sasl]\nmechanisms = ["PLAIN"]\n'
    gw = GatewayProcess(data, config, listen_protocol="SASL_PLAINTEXT").start()
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def derivation_s() -> float:
    """What one wrong password costs, timed here (the median of a few)."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        hashlib.pbkdf2_hmac("sha512", b"guess", b"s" * 16, ITERATIONS)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_clean_round_trips_stay_fast_beside_a_plain_login_flood(gateway: GatewayProcess) -> None:
    clean = CleanClient(gateway.port, "alice", PASSWORD)
    try:
        alone = statistics.median(clean.latencies(1.0))
        cpu_before = cpu_seconds(gateway)
        flood = start_flood(gateway.port, "alice", FLOOD_S, threads=4, rate=RATE)
        try:
            time.sleep(1.0)  # let the flood build up
            beside = clean.latencies(3.0)
            derivation = derivation_s()  # on the machine as loaded as the gateway's
            # A first login (nothing cached) from another address, deep into the flood.
            other = CleanClient(gateway.port, "bob", PASSWORD, source="127.0.0.2")
            other.close()
        finally:
            out, _ = flood.communicate(timeout=MIN_DEADLINE_S)
    finally:
        clean.close()
    p50 = statistics.median(beside)
    attempts = int(out.strip())
    cpu = cpu_seconds(gateway) - cpu_before
    figures = (
        f"derivation {derivation * 1000:.1f} ms; clean p50 alone {alone * 1000:.2f} ms, "
        f"beside the flood {p50 * 1000:.2f} ms over {len(beside)} round trips; "
        f"flood sent {attempts} logins; the gateway used {cpu:.1f} s of CPU meanwhile; "
        f"bob's login from another address took {other.login_s * 1000:.1f} ms"
    )
    print(figures)
    # The flood was real: more derivations offered than one thread could do.
    assert attempts / FLOOD_S * derivation > 1.0, figures
    assert cpu > 0.5, figures  # and the gateway spent CPU deriving for them
    # A clean round trip does not wait for derivations: its median stays well under
    # the cost of one, where a loop busy deriving makes it wait one or more (measured
    # with the derivation on the loop: p50 54.9 ms beside a 49.6 ms derivation).
    assert p50 < derivation / 2, figures
    # Checks take turns by address: bob waits for a few derivations, not for the
    # hundreds the flood has queued by now.
    assert other.login_s < 10 * derivation, figures


def cpu_seconds(gateway: GatewayProcess) -> float:
    """User and system CPU time of the gateway process so far (all its threads)."""
    assert gateway.proc is not None
    fields = Path(f"/proc/{gateway.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
