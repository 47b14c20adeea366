"""Opaque keyset cursors: signed, URL-safe, bound to one listing and one workspace.

A cursor carries the sort key of the last item of a page; the next page starts strictly after
it, so rows inserted meanwhile never shift a page (unlike OFFSET). Tampered, foreign (another
workspace's, another listing's) or malformed cursors are `400 invalid_request` with the detail
`cursor: not a cursor this service issued` (InvalidCursor): which of those it was is not said,
so the answer tells a prober nothing about other workspaces or listings.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from apps.core.errors import InvalidRequest

CURSOR_DETAIL = "cursor: not a cursor this service issued"


class InvalidCursor(InvalidRequest):
    """`400 invalid_request` for a cursor that does not decode to this listing's key. Readers of
    a decoded key raise it too when the key's shape is not theirs (a cursor of another release)."""

    def __init__(self) -> None:
        super().__init__(detail=CURSOR_DETAIL)


def encode_cursor(listing: str, workspace_id: Any, key: list[Any]) -> str:
    return signing.dumps({"w": str(workspace_id), "k": key}, salt=f"cursor:{listing}", compress=False)


def decode_cursor(listing: str, workspace_id: Any, cursor: str) -> list[Any]:
    try:
        data = signing.loads(cursor, salt=f"cursor:{listing}")
    except signing.BadSignature as exc:
        raise InvalidCursor() from exc
    if not isinstance(data, dict) or data.get("w") != str(workspace_id) or not isinstance(data.get("k"), list):
        raise InvalidCursor()
    return data["k"]
