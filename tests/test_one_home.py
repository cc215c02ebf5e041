"""Rules that were written twice, each kept to its one home (read from the source).

Each check names the home; a second copy elsewhere in ``src/`` fails it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from clientmetrics.wire import ApiKey

SRC = Path(__file__).resolve().parents[1] / "src" / "clientmetrics"
FILES = sorted(SRC.rglob("*.py"))


def where(pattern: str) -> set[str]:
    """The source files (relative to the package) where ``pattern`` occurs."""
    found = re.compile(pattern, re.M)
    return {str(p.relative_to(SRC)) for p in FILES if found.search(p.read_text(encoding="utf-8"))}


@pytest.mark.parametrize(
    ("pattern", "home"),
    [
        # the zero client instance id
        (r"uuid\.UUID\(int=0\)", {"wire/codec.py"}),
        # milliseconds <-> kio's timedelta
        (r"timedelta\(milliseconds=|total_seconds\(\)\) \* 1000", {"wire/durations.py"}),
        # the HTTP status line of the scrape endpoints
        (r'[fb]?"HTTP/1\.1 ', {"http_endpoint.py"}),
        # the landing directory layout
        (r'/ "pushes"|/ "landing"|date=\*/hour=\*|date=%Y', {"telemetry/push_arrow.py"}),
        # reading a series key back
        (r'split_pattern\(series|rsplit\("\|"', {"pipeline/core/series.py"}),
        # Kafka's framing, the clients' side included (admin tool, simulator: wire/client.py)
        (r"FrameDecoder\(|encode_request_header\(", {"wire/"}),
        # every frame size rule (the size prefix, the limit before authentication) and
        # the request budget's reservation: the framer (the server's and the clients')
        (r"FrameTooLarge\(|negative frame size", {"wire/framing.py", "wire/errors.py"}),
        (r"try_reserve\(", {"wire/framing.py", "wire/limits.py"}),
        # waiting work queued per source address, round robin (SASL checks, push
        # decoding, the loop's telemetry share): one scheduler
        (
            r"OrderedDict\[str, deque|run_in_executor\(self\._decoder",
            {"gateway/turns.py", "dashboard/login_throttle.py"},
        ),  # the login throttle keeps failure times per key, not work per source
    ],
)
def test_one_home(pattern: str, home: set[str]) -> None:
    found = where(pattern)
    outside = {f for f in found if not any(f == h or f.startswith(h) for h in home if h)}
    assert not outside, f"outside its home: {sorted(outside)}"
    assert found, "the home no longer has it: update this test"


def test_api_keys_and_config_numbers_are_named_in_wire_api_only() -> None:
    names = {key.name for key in ApiKey} | {"CLIENT_METRICS", "OP_SET", "OP_DELETE"}
    for path in FILES:
        if path == SRC / "wire" / "api.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
                assert not targets & names, f"{path.relative_to(SRC)}:{node.lineno}"


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("decode_push", 1),
        ("PUSH_LABELS", 1),
        # where a frame written is joined to its size prefix, and the size rule itself
        ("COALESCE_BYTES", 1),
        ("frame_bytes", 1),
        ("check_size", 1),
    ],
)
def test_one_meaning_per_name(name: str, count: int) -> None:
    defined = where(rf"^(def {name}\(|{name} = )")
    assert len(defined) == count, sorted(defined)


def test_no_hand_written_sasl_bodies_on_the_client_side() -> None:
    # The SaslHandshake/SaslAuthenticate bodies are wire's codecs (client/sasl.py).
    assert not where(r"^import struct") & {
        str(p.relative_to(SRC)) for p in FILES if p.parts[-2] in ("admin", "client")
    }
