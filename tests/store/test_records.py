"""The topic store's record codec: bounded decoding, signatures, the key file, refusal logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from tests.hostile_store import DEEP, POISON

from clientmetrics.errors import ConfigurationError
from clientmetrics.store.log_state import LogState, Outcome
from clientmetrics.store.records import (
    MAX_VALUE_BYTES,
    Decoded,
    Reason,
    Refused,
    decode_record,
    depth_of,
    encode_value,
)
from clientmetrics.store.refusals import Refusals
from clientmetrics.store.signing import SIGNATURE_HEADER, RecordSigner, load_signer
from clientmetrics.telemetry.configs import ConfigError

KEY = b"k" * 32
SIGNER = RecordSigner([KEY])


def reason(record: Decoded | Refused) -> Reason | None:
    return record.reason if isinstance(record, Refused) else None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (b"a", POISON, Reason.TOO_LARGE),
        (b"a", DEEP, Reason.TOO_DEEP),
        (b"a", b'{"configs": {"metrics": [[[["x"]]]]}}', Reason.TOO_DEEP),
        (b"a", b"\xff{", Reason.NOT_JSON),
        (b"a", b'{"configs": ', Reason.NOT_JSON),
        (b"a", b"[1]", Reason.BAD_SHAPE),
        (b"a", b'{"configs": {"metrics": 1}}', Reason.BAD_SHAPE),
        (b"a", b'{"configs": {}, "base": "7"}', Reason.BAD_SHAPE),
        (b"a", b'{"configs": {}, "base": true}', Reason.BAD_SHAPE),
        (b"\xff\xfe", b'{"configs": {}}', Reason.BAD_NAME),
        (b"", b'{"configs": {}}', Reason.BAD_NAME),
        (b"n" * 1025, b'{"configs": {}}', Reason.BAD_NAME),
    ],
)
def test_unusable_records_are_refused_with_their_reason(
    key: bytes, value: bytes, expected: Reason
) -> None:
    assert reason(decode_record(key, value, None, None, "t")) is expected


def test_brackets_inside_strings_do_not_nest() -> None:
    text = 'client_id=[[[[[{{{{"]]'  # a quote inside: escaped in the JSON
    value = json.dumps({"configs": {"match": text}}).encode()
    assert depth_of(value) == 2
    assert decode_record(b"a", value, None, None, "t") == Decoded("a", {"match": text}, None)


def test_an_alter_too_large_to_store_is_refused_before_it_is_written() -> None:
    with pytest.raises(ConfigError, match="at most"):
        encode_value({"metrics": "x" * MAX_VALUE_BYTES}, base=-1)


def signed(topic: str, key: bytes, value: bytes | None) -> dict[str, bytes]:
    return {SIGNATURE_HEADER: SIGNER.sign(topic, key, value)}


def test_only_a_record_signed_for_its_name_and_topic_verifies() -> None:
    value = encode_value({"metrics": "a."}, base=-1)
    headers = signed("subs", b"a", value)
    assert decode_record(b"a", value, headers, SIGNER, "subs") == Decoded(
        "a", {"metrics": "a."}, -1
    )
    assert reason(decode_record(b"b", value, headers, SIGNER, "subs")) is Reason.BAD_SIGNATURE
    assert reason(decode_record(b"a", value, headers, SIGNER, "other")) is Reason.BAD_SIGNATURE
    assert (
        reason(decode_record(b"a", value + b" ", headers, SIGNER, "subs")) is Reason.BAD_SIGNATURE
    )
    assert reason(decode_record(b"a", value, None, SIGNER, "subs")) is Reason.UNSIGNED
    assert reason(decode_record(b"a", None, None, SIGNER, "subs")) is Reason.UNSIGNED
    other = RecordSigner([b"o" * 32])
    assert reason(decode_record(b"a", value, headers, other, "subs")) is Reason.BAD_SIGNATURE
    # A signed empty value is not a signed tombstone.
    assert reason(decode_record(b"a", None, signed("subs", b"a", b""), SIGNER, "subs")) is (
        Reason.BAD_SIGNATURE
    )
    # Rotation: a second key verifies what it signed; the first still signs.
    rotating = RecordSigner([b"n" * 32, KEY])
    assert decode_record(b"a", value, headers, rotating, "subs") == Decoded(
        "a", {"metrics": "a."}, -1
    )


def test_the_key_file_must_be_private_and_its_keys_long(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("x" * 64 + "\n\n" + "y" * 40 + "\n")
    path.chmod(0o640)
    with pytest.raises(ConfigurationError, match="readable by others"):
        load_signer(path)
    path.chmod(0o600)
    signer = load_signer(path)
    assert signer.verify("t", b"a", b"v", RecordSigner([b"y" * 40]).sign("t", b"a", b"v"))
    path.write_text("short\n")
    with pytest.raises(ConfigurationError, match="at least 32 bytes"):
        load_signer(path)
    with pytest.raises(ConfigurationError, match="No such file"):
        load_signer(tmp_path / "missing")


def test_the_cap_refuses_new_names_in_log_order_and_deletions_make_room() -> None:
    log = LogState(max_subscriptions=2)
    outcomes = [
        log.apply(Decoded(name, configs, None), offset)
        for offset, (name, configs) in enumerate(
            [("a", {"m": "1"}), ("b", {"m": "1"}), ("c", {"m": "1"}), ("a", {"m": "2"}),
             ("b", {}), ("c", {"m": "1"})]
        )
    ]  # fmt: skip
    assert outcomes == [Outcome.APPLIED, Outcome.APPLIED, Outcome.OVER_CAP, Outcome.APPLIED,
                        Outcome.APPLIED, Outcome.APPLIED]  # fmt: skip
    assert log.configs == {"a": {"m": "2"}, "c": {"m": "1"}}


def test_a_flood_of_refusals_is_counted_whole_and_logged_within_a_bound() -> None:
    now = [0.0]
    refusals = Refusals("subs", burst=3, window_s=60, clock=lambda: now[0])
    with capture_logs() as logs:
        for offset in range(10):
            refusals.refused(f"n{offset}", Reason.UNSIGNED, "no signature", 0, offset)
        refusals.flush_due()  # the minute is not over: nothing summed up yet
        now[0] = 61.0
        refusals.refused("late", Reason.TOO_DEEP, "deep", 0, 10)
        for offset in range(11, 14):
            refusals.refused("later", Reason.OVER_CAP, "cap", 0, offset)
        now[0] = 125.0
        refusals.flush_due()
    named = [e for e in logs if e["event"] == "subscription_change_refused"]
    assert [e["subscription"] for e in named] == ["n0", "n1", "n2", "late", "later", "later"]
    assert named[0]["source"] == "subs[0]@0"
    assert named[0]["api"] == "store record"
    summary = [e for e in logs if e["event"] == "subscription_records_refused_unlogged"]
    assert [s["counts"] for s in summary] == [{"unsigned": 7}, {"over_cap": 1}]
    assert refusals.snapshot()["unsigned"] == 10
    assert refusals.snapshot()["too_deep"] == 1
