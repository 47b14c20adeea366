"""Search cursors: what a page's nextCursor carries, and reading it back.

A cursor is signed and bound to the workspace (apps.core.cursors) and to the query's words and
revisionKind (`scope_digest`), and is one of two keys:
- ["next", digest, position]: the window shown is done; the next window begins past `position`.
- ["in", digest, first, last, more, score, created_at, transcript_id]: the window shown (its
  bounds, so that its later pages rank the same revisions even while newer ones are written)
  and the last hit's ranking key in it; the next page holds the hits ranked after that key.
created_at is kept to the microsecond, not the wire's milliseconds: the keyset must be exact.
Positions are the engines' walk order: an FTS5 rowid (int) on SQLite, a transcript's
(created_at, id) on PostgreSQL ([ISO string, id] in the key). A well-signed cursor whose key is
malformed is `invalid_request`, like a tampered one.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from apps.core.cursors import InvalidCursor, decode_cursor, encode_cursor
from apps.core.timestamps import parse_iso
from apps.recordings.search.scoring import RankedHit, RankKey
from apps.recordings.search.windows import Position, WindowBounds

LISTING = "search"


def scope_digest(terms: list[str], revision_kind: str | None) -> str:
    """What a cursor is bound to besides the workspace: the query's words (in any order and
    case) and the revisionKind filter."""
    canonical = "\x1f".join([revision_kind or "", *sorted(t.casefold() for t in terms)])
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class PageStart:
    """Where a page starts, as its cursor says.

    Either after the hit ranked `after` in the window `shown`, or, without them, at the start
    of the window from `window_from` (the previous window's end; None = the newest revision)."""

    window_from: Position = None
    shown: WindowBounds | None = None
    after: RankKey | None = None


def encode_position(position: Position) -> Any:
    """A position as a cursor key holds it (JSON)."""
    if position is None or isinstance(position, int):
        return position
    created_at, transcript_id = position
    return [created_at.isoformat(), transcript_id]


def decode_position(value: Any, vendor: str) -> Position:
    """A cursor key's position back, checked for the engine of `vendor`."""
    if value is None:
        return None
    if vendor == "sqlite":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidCursor()
        return value
    created_at, transcript_id = value
    if not isinstance(created_at, str) or not isinstance(transcript_id, str):
        raise InvalidCursor()
    return parse_iso(created_at), transcript_id


def read_cursor(workspace_id: Any, cursor: str, digest: str, vendor: str) -> PageStart:
    """Where the page of `cursor` starts; `InvalidCursor` (400 `invalid_request`, its detail
    naming the cursor) for any cursor not issued for this workspace, these words and this
    filter, or malformed."""
    key = decode_cursor(LISTING, workspace_id, cursor)
    try:
        if key[:2] == ["next", digest] and len(key) == 3 and key[2] is not None:
            return PageStart(window_from=decode_position(key[2], vendor))
        if key[:2] != ["in", digest] or len(key) != 8:
            raise InvalidCursor()
        first, last, more, score, created_at, transcript_id = key[2:]
        if first is None or not isinstance(more, bool) or not isinstance(transcript_id, str):
            raise InvalidCursor()
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise InvalidCursor()
        shown = WindowBounds(decode_position(first, vendor), decode_position(last, vendor), more)
        return PageStart(shown=shown, after=(float(score), parse_iso(created_at), transcript_id))
    except (AttributeError, TypeError, ValueError):
        raise InvalidCursor() from None


def next_window_cursor(workspace_id: Any, digest: str, window_end: Position) -> str:
    """The cursor of the page that starts the window after one that ended at `window_end`."""
    return encode_cursor(LISTING, workspace_id, ["next", digest, encode_position(window_end)])


def same_window_cursor(workspace_id: Any, digest: str, shown: WindowBounds, last_hit: RankedHit) -> str:
    """The cursor of the page after `last_hit`, in the same window `shown`."""
    bounds = [encode_position(shown.first), encode_position(shown.last), shown.more]
    key = ["in", digest, *bounds, last_hit.score, last_hit.session_created.isoformat(), last_hit.transcript_id]
    return encode_cursor(LISTING, workspace_id, key)
