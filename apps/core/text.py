"""Input that no database column can hold.

PostgreSQL `text` and `jsonb` refuse U+0000 (psycopg raises DataError before the query is
sent), so a NUL that reached a lookup answered 500 there while SQLite simply found nothing.
Every way in refuses it first: paths and query strings in NulCharacterMiddleware, Bearer
credentials in bearer_credential, JSON bodies where they are parsed, MCP tool arguments.
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"


def holds_nul(value: Any) -> bool:
    """Whether a string, or any key or string inside decoded JSON, contains U+0000."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False
