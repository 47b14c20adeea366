"""Input that no database column can hold.

PostgreSQL `text` and `jsonb` refuse U+0000 (psycopg raises DataError before the query is
sent), so a NUL that reached a lookup answered 500 there while SQLite simply found nothing.
Every way in refuses it first: paths and query strings in NulCharacterMiddleware, Bearer
credentials in bearer_credential, JSON bodies through `loads_text`, MCP tool arguments.
"""

from __future__ import annotations

from typing import Any

import orjson

NUL = "\x00"


class NotText(ValueError):
    """A request body that is not JSON every column can store."""


def loads_text(raw: bytes | str) -> Any:
    """A JSON body as Python, refusing what no database column can hold: orjson rejects a
    `"\\ud800"` escape (a lone surrogate is not text; PostgreSQL answered 500) and nesting past
    1,024 levels, and a string or key holding U+0000 is refused here."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise NotText() from None
    if holds_nul(value):
        raise NotText()
    return value


def holds_nul(value: Any) -> bool:
    """Whether a string, or any key or string inside decoded JSON, contains U+0000."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False
