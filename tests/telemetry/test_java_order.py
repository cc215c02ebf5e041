"""Java HashSet / ConcurrentHashMap iteration order, with values worked out by hand."""

from __future__ import annotations

import string

from clientmetrics.telemetry.java_order import hash_set_order, map_key_order, string_hash


def test_string_hash_is_javas() -> None:
    """ "hello".hashCode() is 99162322; "Aa" and "BB" collide (2112); UTF-16 code units."""
    assert string_hash("hello") == 99162322
    assert string_hash("Aa") == string_hash("BB") == 2112
    assert string_hash("") == 0
    # U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00.
    assert string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_order_is_by_bucket_then_insertion() -> None:
    """Single letters hash to their code: "p" (112) is bucket 0 of 16, "a" (97) bucket 1;
    colliding strings keep the order they were added in."""
    assert hash_set_order(["a", "p"]) == ("p", "a")
    assert hash_set_order(["BB", "Aa"]) == ("BB", "Aa")
    assert hash_set_order(["Aa", "BB", "Aa"]) == ("Aa", "BB")


def test_the_table_grows_past_three_quarters() -> None:
    """13 strings overflow 16 buckets (threshold 12): in 32 buckets "p" (112 & 31 = 16)
    comes after "a".."m" (97..109 & 31 = 1..13)."""
    thirteen = ["p", *string.ascii_lowercase[:12]]
    assert hash_set_order(thirteen[:12])[0] == "p"
    assert hash_set_order(thirteen) == (*string.ascii_lowercase[:12], "p")


def test_a_copied_set_is_presized() -> None:
    """new HashSet<>(12 items): (int)(12 / .75f) + 1 = 17 -> 32 buckets from the start."""
    assert hash_set_order(["a", "p"], copy_of=12) == ("a", "p")
    assert hash_set_order(["a", "p"], copy_of=11) == ("p", "a")  # 11/.75 + 1 = 15 -> 16


def test_a_crowded_bucket_grows_a_small_table() -> None:
    """Nine strings in one bucket of 16 make HashMap resize rather than treeify: "a" (97)
    and "q" (113) share bucket 1 of 16; in 32 buckets "q" moves to 17, after "p" (16)."""
    crowded = ["a", "q", "A", "Q", "!", "1", "\x81", "\x91", "\xa1"]  # 97,113,65,81,33,49,...
    assert all(string_hash(s) & 15 == 1 for s in crowded)
    order = hash_set_order([*crowded, "p"])
    assert order.index("p") < order.index("q")  # 16 < 17: the table was resized
    assert hash_set_order([*crowded[:8], "p"])[0] == "p"  # 8 in a bucket: still 16


def test_map_key_order_follows_the_buckets() -> None:
    """Subscription names iterate by bucket too: "b" (98) bucket 2, "a" (97) bucket 1."""
    assert map_key_order(["b", "a"]) == ("a", "b")
    assert map_key_order(["p", "a"]) == ("p", "a")
