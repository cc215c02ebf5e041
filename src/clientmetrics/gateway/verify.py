"""SASL's costly checks (PLAIN's PBKDF2) off the event loop, a few at a time.

A PLAIN login with a password not seen before costs a PBKDF2 derivation
(milliseconds, by design). Run on the event loop, a flood of logins with fresh
random passwords would stall every other client. The connection core hands the
derivation out as a ``Verify`` result; both gateway modes pass it here, where a
small pool of threads runs it (hashlib releases the GIL while deriving) and the
shell hands the result back to the core. The pool bounds the whole process: a
flood waits for a thread instead of spawning threads, and a connection waiting
for its turn holds up no other (each has at most one: a verifying connection is
not read). Waiting checks take turns by source address, so one address flooding
logins delays another address's login by a few derivations, not by its backlog.
"""

from __future__ import annotations

from clientmetrics.gateway.turns import OffLoop, default_workers

__all__ = ["Verifier", "default_workers"]


class Verifier(OffLoop):
    """Runs the derivations the connection cores ask for; shared by a gateway's connections."""

    def __init__(self, workers: int | None = None) -> None:
        super().__init__(workers, name="sasl-verify")
