"""A loop probe for benchmarks, injected into a gateway process of any version.

``bench/tail_latency.py --probe`` starts the gateway with this directory on
``PYTHONPATH`` and ``LOOP_PROBE_OUT`` set, so the same instrument measures the code
before and after a change (older gateways have no loop-lag gauge). A task on the
gateway's event loop wakes every 10 ms and records how late it woke (lag) and
how much CPU time the loop's thread used since the previous wake (busy). SIGUSR2
starts a phase; the next SIGUSR2 appends the phase's figures to ``LOOP_PROBE_OUT``
as one JSON line: max and p99 of both, in ms.
"""

from __future__ import annotations

import json
import os
import sys

_OUT = os.environ.get("LOOP_PROBE_OUT")

if _OUT and "serve" in sys.argv:
    import asyncio
    import signal
    import time

    import uvloop

    #: The phase's samples (lag, busy), or none while no phase runs.
    _phase: list[list[tuple[float, float]]] = []

    def _toggle() -> None:
        if not _phase:
            _phase.append([])
            return
        samples = _phase.pop()
        lags = sorted(lag for lag, _ in samples)
        busy = sorted(cpu for _, cpu in samples)

        def p99(values: list[float]) -> float:
            return values[min(len(values) - 1, int(0.99 * len(values)))] if values else 0.0

        with open(_OUT, "a") as out:
            out.write(
                json.dumps(
                    {
                        "samples": len(lags),
                        "lag_max_ms": lags[-1] * 1000 if lags else 0.0,
                        "lag_p99_ms": p99(lags) * 1000,
                        "busy_max_ms": busy[-1] * 1000 if busy else 0.0,
                        "busy_p99_ms": p99(busy) * 1000,
                    }
                )
                + "\n"
            )

    async def _probe() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _toggle)
        while True:
            due, used = time.perf_counter() + 0.01, time.thread_time()
            await asyncio.sleep(0.01)
            if _phase:
                _phase[0].append((max(time.perf_counter() - due, 0.0), time.thread_time() - used))

    _run = uvloop.run

    def _run_with_probe(main, **kwargs):  # type: ignore[no-untyped-def]
        async def wrapped():  # type: ignore[no-untyped-def]
            probe = asyncio.ensure_future(_probe())
            try:
                return await main
            finally:
                probe.cancel()

        return _run(wrapped(), **kwargs)

    uvloop.run = _run_with_probe
