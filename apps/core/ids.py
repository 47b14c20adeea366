"""Time-sortable random identifiers (ULID layout: 48-bit milliseconds + 80 random bits, Crockford base32)."""

from __future__ import annotations

import os
import secrets
import string
import time

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_BASE62 = string.digits + string.ascii_letters


def ulid(at_ms: int | None = None) -> str:
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str = "") -> str:
    """`prefix` + a ULID, e.g. `new_id("wh_")`; sessions and other records use the bare ULID."""
    return prefix + ulid()


def random_base62(length: int) -> str:
    return "".join(secrets.choice(_BASE62) for _ in range(length))
