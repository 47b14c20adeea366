"""Time-sortable random identifiers (ULID layout: 48-bit milliseconds + 80 random bits, Crockford base32)."""

from __future__ import annotations

import base64
import os
import secrets
import string
import time

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"  # ULID's base32 alphabet, lowercased
_FROM_BASE32 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", CROCKFORD)
_BASE62 = string.digits + string.ascii_letters


def crockford(value: int) -> str:
    """A 128-bit value as 26 Crockford base32 characters (ULID's text form), most significant
    first. Encoded by the standard library's base32 (RFC 4648's alphabet, translated), whose
    32 characters for 160 bits end with these 26."""
    return base64.b32encode(value.to_bytes(20, "big")).decode("ascii")[6:].translate(_FROM_BASE32)


def ulid(at_ms: int | None = None) -> str:
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    return crockford((ms << 80) | int.from_bytes(os.urandom(10), "big"))


def new_id(prefix: str = "") -> str:
    """`prefix` + a ULID, e.g. `new_id("wh_")`; sessions and other records use the bare ULID."""
    return prefix + ulid()


def random_base62(length: int) -> str:
    return "".join(secrets.choice(_BASE62) for _ in range(length))
