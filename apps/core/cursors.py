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


def encode_cursor(listing: str, workspace_id: Any, key: list[Any], filters: dict[str, Any] | None = None) -> str:
    """`filters`: the listing's filters (wire names, JSON values) the cursor is bound to; only
    those given (not None) are kept."""
    data: dict[str, Any] = {"w": str(workspace_id), "k": key}
    bound = _given(filters)
    if bound:
        data["f"] = bound
    return signing.dumps(data, salt=f"cursor:{listing}", compress=False)


def decode_cursor(listing: str, workspace_id: Any, cursor: str, filters: dict[str, Any] | None = None) -> list[Any]:
    """The key, if the cursor is this listing's in this workspace and was issued for the same
    `filters` (a page of other filters would silently mix two listings): else 400, the bound
    mismatch naming the filters that differ (they are the client's own)."""
    try:
        data = signing.loads(cursor, salt=f"cursor:{listing}")
    except signing.BadSignature as exc:
        raise InvalidCursor() from exc
    if not isinstance(data, dict) or data.get("w") != str(workspace_id) or not isinstance(data.get("k"), list):
        raise InvalidCursor()
    issued, now = data.get("f") or {}, _given(filters)
    if issued != now:
        differ = sorted(name for name in issued.keys() | now.keys() if issued.get(name) != now.get(name))
        raise InvalidRequest(
            detail=f"cursor: issued for other filters ({', '.join(differ)}); send it with the filters "
            "of the page it came from, or start again without a cursor"
        )
    return data["k"]


def _given(filters: dict[str, Any] | None) -> dict[str, Any]:
    return {name: value for name, value in (filters or {}).items() if value is not None}
