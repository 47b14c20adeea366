"""Identifiers: the ULID text form is Crockford base32 of the 128-bit value, most significant
character first, so ids sort as their values do."""

from __future__ import annotations

import random

from apps.core.ids import crockford, ulid

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def by_hand(value: int) -> str:
    return "".join(ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def test_crockford_is_base32_of_the_value_most_significant_first():
    rng = random.Random(7)
    values = [0, 1, 31, 32, (1 << 128) - 1, 1 << 127] + [rng.getrandbits(128) for _ in range(2000)]
    for value in values:
        assert crockford(value) == by_hand(value), value


def test_ids_sort_as_their_values_and_times():
    values = sorted(random.Random(3).getrandbits(128) for _ in range(500))
    assert [crockford(v) for v in values] == sorted(crockford(v) for v in values)
    assert ulid(at_ms=1_000) < ulid(at_ms=1_001) and len(ulid()) == 26
