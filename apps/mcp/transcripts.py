"""One page of a transcript, for get_transcript and the transcript resources alike: the flat
transcript or one revision kind, optionally only the segments that start in a time window
(`from` ≤ timestampStart < `to`, milliseconds), as REST's JSON or as text lines.

JSON pages are REST's bodies (apps/recordings: the same rows and encoders) holding a run of the
segments; text pages have one line per segment, `[HH:MM:SS.mmm] Speaker: text`, written by the
txt export's own formatter. A page takes segments while they fit the budget
(apps/mcp/budget.py) and, for a tool, up to `limit`. The cursor to the rest is signed, bound
to the session, the revision read (a new final revision invalidates it), the kind, the format
and the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from apps.core.cursors import decode_cursor, encode_cursor
from apps.core.errors import InvalidRequest
from apps.mcp import budget
from apps.recordings import exports, selectors
from apps.recordings.representations import flat_segment_rows_repr, transcript_revision_rows_repr
from apps.tenancy.models import Workspace

FORMATS = ("json", "text")
TEXT_MIME = "text/plain"
JSON_MIME = "application/json"
# Segments encoded at a time while filling a page (a page seldom holds more).
_CHUNK = 250


class TranscriptCursorError(InvalidRequest):
    """A cursor this listing did not hand out, or one for a revision that has since been replaced."""

    def __init__(self, detail: str) -> None:
        super().__init__(argument="cursor", detail=detail)


@dataclass(frozen=True)
class Query:
    session_id: str
    revision_kind: str | None = None  # None: the flat transcript
    fmt: str = "json"
    start_ms: int | None = None
    end_ms: int | None = None

    def filters(self) -> dict[str, Any]:
        return {"kind": self.revision_kind, "format": self.fmt, "from": self.start_ms, "to": self.end_ms}

    def window(self) -> str:
        if self.start_ms is None and self.end_ms is None:
            return ""
        low = exports.clock(self.start_ms or 0, ".")
        high = "the end" if self.end_ms is None else exports.clock(self.end_ms, ".")
        return f" starting from {low} to {high}"


@dataclass(frozen=True)
class Page:
    body: dict[str, Any] | None  # the JSON page (format json)
    text: str | None  # the text page (format text)
    start: int  # offset of the first segment of this page among the window's segments
    end: int
    total: int
    next_cursor: str | None
    cut: str | None = None  # a segment larger than a whole result, cut: says so and where it is whole

    @property
    def mime_type(self) -> str:
        return JSON_MIME if self.text is None else TEXT_MIME

    def content(self) -> str:
        return self.text if self.text is not None else orjson.dumps(self.body).decode()

    def describe(self, query: Query) -> str:
        what = "segment" if self.total == 1 else "segments"
        cut = f" {self.cut}" if self.cut else ""
        if self.end <= self.start:
            return f"No segments here of {self.total} {what}{query.window()}.{cut}"
        return f"Segments {self.start + 1}-{self.end} of {self.total}{query.window()}.{cut}"


def read(workspace: Workspace, query: Query, cursor: str | None = None, limit: int | None = None) -> Page:
    """The page at `cursor` (or the first); NotFound for a session not in `workspace`."""
    start, cursor_transcript = 0, None
    if cursor is not None:
        try:
            key = decode_cursor("mcp-transcript", workspace.id, cursor, query.filters())
            cursor_session, cursor_transcript, start = key
        except (InvalidRequest, ValueError, TypeError):
            raise TranscriptCursorError("is not a cursor handed out for this transcript; start without it") from None
        if cursor_session != query.session_id or not isinstance(start, int) or start < 0:
            raise TranscriptCursorError("is not a cursor handed out for this transcript; start without it")
    if query.revision_kind is None:
        rows = selectors.transcript_rows(workspace=workspace, session_id=query.session_id, flat=True)
        transcript, segments = rows.flat
        shape_rows = selectors.FLAT_SEGMENT_ROWS
    else:
        rows = selectors.transcript_rows(
            workspace=workspace, session_id=query.session_id, revision_kind=query.revision_kind
        )
        transcript, segments = rows.revisions[0] if rows.revisions else (None, [])
        shape_rows = selectors.REVISION_SEGMENT_ROWS
    transcript_id = transcript.id if transcript is not None and segments else ""
    if cursor is not None and cursor_transcript != transcript_id:
        raise TranscriptCursorError("the transcript changed since this cursor was issued; start again")

    at = shape_rows.index["timestamp_start"]
    low, high = query.start_ms, query.end_ms
    if low is not None or high is not None:
        segments = [s for s in segments if (low is None or s[at] >= low) and (high is None or s[at] < high)]
    total = len(segments)
    start = min(start, total)
    stop = total if limit is None else min(total, start + limit)
    space = budget.room()
    cut = None

    if query.fmt == "text":
        lines = []
        for row in segments[start:stop]:
            named = shape_rows.make(row)
            line = f"[{exports.clock(named.timestamp_start, '.')}] {exports.txt([named]).strip()}"
            cost = len(line.encode()) + 1
            if cost > space:
                if lines:
                    break
                line, cut = line[: budget.text_slice(line, 0, space - 1)], _cut_note(query, start, line)
                cost = len(line.encode()) + 1
            space -= cost
            lines.append(line)
        end = start + len(lines)
        body, text = None, "\n".join(lines) + ("\n" if lines else "")
    else:
        if query.revision_kind is None:
            encode_segments = flat_segment_rows_repr(rows.stamp)
        else:
            encode_revision = transcript_revision_rows_repr(rows.stamp)

            def encode_segments(chunk: list[tuple]) -> list[dict[str, Any]]:
                return encode_revision(transcript, chunk)["segments"]

        page: list[dict[str, Any]] = []
        position = start
        while position < stop:
            chunk = encode_segments(segments[position : min(stop, position + _CHUNK)])
            taken = budget.fitting((budget.size(item) for item in chunk), space - (1 if page else 0))
            if not page and taken == 0:
                # One segment larger than a whole result: it comes alone, its text cut to fit.
                chunk[0], cut = budget.cut_field(chunk[0], "text", space), _cut_note(query, position, chunk[0]["text"])
                taken = 1
            page += chunk[:taken]
            space -= sum(budget.size(item) + 1 for item in chunk[:taken])
            position += taken
            if taken < len(chunk):
                break
        end = start + len(page)
        if query.revision_kind is None:
            body = {"sessionId": query.session_id, "transcript": page}
        elif transcript is None:
            body = {"transcripts": []}
        else:
            revision = encode_revision(transcript, [])
            body = {"transcripts": [{**revision, "segments": page}]}
        text = None
    next_cursor = None
    if end < total:
        next_cursor = encode_cursor("mcp-transcript", workspace.id, [query.session_id, transcript_id, end],
                                    query.filters())
    return Page(body, text, start, end, total, next_cursor, cut)


def _cut_note(query: Query, position: int, text: str) -> str:
    return (f"Segment {position + 1} alone is larger than one result: its text ({len(text)} characters) was cut "
            f"to fit; GET /api/v1/sessions/{query.session_id}/transcript has it whole.")
