"""The recordings' wire shapes (docs/api/sessions.md to boards.md, events-and-stream.md), each declared once. The
representation functions in apps/recordings/representations.py, the /openapi.json components,
the MCP tools' output schemas and the event data all come from these declarations."""

from __future__ import annotations

from apps.core.shapes import BOOLEAN, INTEGER, JSON, NUMBER, STRING, TIMESTAMP, Field, Shape, Spread, envelope, page_of
from apps.recordings.models import BoardStatus, RevisionKind, SessionStatus

NEXT_CURSOR = "pass back as `cursor` for the next page; null on the last"

SESSION_SUMMARY = Shape(
    "SessionSummaryOut",
    (
        Field("id", STRING),
        Field("label", STRING, nullable=True),
        Field("status", STRING, choices=SessionStatus),
        Field("startedAt", TIMESTAMP, nullable=True),
        Field("endedAt", TIMESTAMP, nullable=True),
        Field("createdAt", TIMESTAMP),
    ),
    description="The session as a search hit names it.",
    component=True,
)
SESSION = SESSION_SUMMARY.extend(
    "SessionOut",
    Field("memo", STRING, nullable=True),
    Field("updatedAt", TIMESTAMP),
    description="A session: the summary's fields, then memo and updatedAt.",
    component=True,
)

FLAT_SEGMENT = Shape(
    "FlatSegmentOut",
    (
        Field("id", STRING),
        Field("sequence", INTEGER),
        Field("timestampStart", INTEGER, description="milliseconds from the session start"),
        Field("timestampEnd", INTEGER, description="milliseconds from the session start"),
        Field("speakerLabel", STRING, nullable=True),
        Field("text", STRING),
        Field("confidence", NUMBER, nullable=True, description="0.0 to 1.0"),
        Field("createdAt", TIMESTAMP),
    ),
    component=True,
)
REVISION_SEGMENT = FLAT_SEGMENT.extend(
    "RevisionSegmentOut", Field("sessionCommittedIndex", INTEGER), component=True
)
TRANSCRIPT_REVISION = Shape(
    "TranscriptRevisionOut",
    (
        Field("id", STRING, source="transcript.id"),
        Field("revisionKind", STRING, source="transcript.revision_kind", choices=RevisionKind),
        Field("createdAt", TIMESTAMP, source="transcript.created_at"),
        Field("segments", REVISION_SEGMENT, many=True),
    ),
    params=("transcript", "segments"),
    component=True,
)

SEARCH_HIT = Shape(
    "SearchHitOut",
    (
        Field("transcriptId", STRING, source="transcript.id"),
        Field("revisionKind", STRING, source="transcript.revision_kind", choices=RevisionKind),
        Field("session", SESSION_SUMMARY),
        # Both item shapes of a search hit at once (docs/api/search.md): the revision-aware fields above and the
        # session-level ones at the top level, so a client written against either reads it.
        Spread(SESSION_SUMMARY, "session"),
        Field("snippet", STRING, description="plain text, at most 200 characters, around the first match"),
        # Where the match is (extensions), so a client can jump to the moment.
        Field("sequence", INTEGER, description="extension: the matching segment's sequence in the revision "
              "(the segment the snippet is cut from: the best match among the revision's first matching "
              "segments, the earliest of equal ones)"),
        Field("timestampStart", INTEGER, source="timestamp_start",
              description="extension: the matching segment's start, milliseconds from the session start"),
    ),
    description="One matching transcript revision (a SearchHit: apps/recordings/search/pages.py).",
    component=True,
)

BOARD_SUMMARY = Shape(
    "BoardSummaryOut",
    (
        Field("id", STRING),
        Field("boardId", STRING, description="the board spec's id (use it as boardSpecId)"),
        Field("version", INTEGER),
        Field("status", STRING, choices=BoardStatus),
        Field("isCurrent", BOOLEAN),
        Field("sourceRevisionKind", STRING, choices=RevisionKind),
        Field("createdAt", TIMESTAMP),
    ),
    component=True,
)
BOARD = BOARD_SUMMARY.extend(
    "BoardOut",
    Field("payload", JSON, description="free-form JSON; its shape depends on the board definition"),
    Field("payloadHash", STRING, description="`sha256:` + hex of the canonical JSON"),
    component=True,
)

# --- REST response bodies ---------------------------------------------------------------------

SESSION_PAGE = page_of(SESSION, "SessionPage", cursor_description=NEXT_CURSOR)
SESSION_ENVELOPE = envelope("SessionEnvelope", "session", SESSION)
TRANSCRIPT_REVISIONS = envelope("TranscriptRevisions", "transcripts", TRANSCRIPT_REVISION, many=True)
FLAT_TRANSCRIPT = Shape(
    "FlatTranscript",
    (Field("sessionId", STRING, source="session_id"), Field("transcript", FLAT_SEGMENT, many=True)),
    params=("session_id", "transcript"),
    component=True,
)
SEARCH_PAGE = page_of(SEARCH_HIT, "SearchPage", cursor_description=NEXT_CURSOR)
BOARD_LIST = envelope("BoardList", "items", BOARD_SUMMARY, many=True)
BOARD_ENVELOPE = envelope("BoardEnvelope", "board", BOARD)

# --- Event data (docs/api/events-and-stream.md): what the events recorded by apps/recordings/services/ carry ---

SESSION_CREATED_DATA = Shape(
    "SessionCreatedData",
    (
        Field("sessionId", STRING, source="session.id"),
        Field("occurredAt", TIMESTAMP, source="occurred_at"),
        Field("session", SESSION, description="the session as REST shows it, at that moment"),
    ),
    params=("session", "occurred_at"),
    closed=True,
)
SESSION_STATUS_CHANGED_DATA = Shape(
    "SessionStatusChangedData",
    (
        Field("sessionId", STRING, source="session.id"),
        Field("status", STRING, source="session.status", choices=SessionStatus),
        Field("previousStatus", STRING, source="previous_status", choices=SessionStatus),
        Field("occurredAt", TIMESTAMP, source="occurred_at"),
        Field("session", SESSION, description="the session as REST shows it, at that moment"),
    ),
    params=("session", "previous_status", "occurred_at"),
    closed=True,
)
TRANSCRIPT_SEGMENT_CREATED_DATA = Shape(
    "TranscriptSegmentCreatedData",
    (
        Field("sessionId", STRING, source="session_id"),
        Field("occurredAt", TIMESTAMP, source="occurred_at"),
        Spread(FLAT_SEGMENT, "segment"),
    ),
    params=("session_id", "occurred_at", "segment"),
    closed=True,
)
