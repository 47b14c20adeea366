"""How recordings look on the wire. REST, MCP, the event stream and webhooks all call these:
if two entry points formatted a Session differently, one of them would be wrong."""

from __future__ import annotations

from typing import Any

from apps.core.timestamps import iso_ms
from apps.recordings.models import BoardContent, Segment, Session, Transcript


# The fields session_repr reads: a listing can fetch just these as named rows
# (`values_list(*SESSION_FIELDS, named=True)`), which cost far less than model instances.
SESSION_FIELDS = ("id", "label", "memo", "status", "started_at", "ended_at", "created_at", "updated_at")


def session_summary_repr(session: Session) -> dict[str, Any]:
    """The session as a search hit names it (contract §2.4)."""
    return {
        "id": session.id,
        "label": session.label,
        "status": session.status,
        "startedAt": iso_ms(session.started_at),
        "endedAt": iso_ms(session.ended_at),
        "createdAt": iso_ms(session.created_at),
    }


def session_repr(session: Session) -> dict[str, Any]:
    """A Session, or a named row of SESSION_FIELDS: the summary plus memo and updatedAt."""
    return {
        **session_summary_repr(session),
        "memo": session.memo,
        "updatedAt": iso_ms(session.updated_at),
    }


def flat_segment_repr(segment: Segment) -> dict[str, Any]:
    return {
        "id": segment.id,
        "sequence": segment.sequence,
        "timestampStart": segment.timestamp_start,
        "timestampEnd": segment.timestamp_end,
        "speakerLabel": segment.speaker_label,
        "text": segment.text,
        "confidence": segment.confidence,
        "createdAt": iso_ms(segment.created_at),
    }


def revision_segment_repr(segment: Segment) -> dict[str, Any]:
    return {**flat_segment_repr(segment), "sessionCommittedIndex": segment.session_committed_index}


def transcript_revision_repr(transcript: Transcript, segments: list[Segment]) -> dict[str, Any]:
    return {
        "id": transcript.id,
        "revisionKind": transcript.revision_kind,
        "createdAt": iso_ms(transcript.created_at),
        "segments": [revision_segment_repr(s) for s in segments],
    }


def search_hit_repr(transcript: Transcript, session: Session, snippet: str) -> dict[str, Any]:
    """Both item shapes of contract §2.4 at once: the revision-aware fields and, at the top
    level, the session-level ones, so a client written against either shape reads it."""
    summary = session_summary_repr(session)
    return {
        "transcriptId": transcript.id,
        "revisionKind": transcript.revision_kind,
        "session": summary,
        **summary,
        "snippet": snippet,
    }


def board_summary_repr(board: BoardContent) -> dict[str, Any]:
    return {
        "id": board.id,
        "boardId": board.board_id,
        "version": board.version,
        "status": board.status,
        "isCurrent": board.is_current,
        "sourceRevisionKind": board.source_revision_kind,
        "createdAt": iso_ms(board.created_at),
    }


def board_repr(board: BoardContent) -> dict[str, Any]:
    return {**board_summary_repr(board), "payload": board.payload, "payloadHash": board.payload_hash}
