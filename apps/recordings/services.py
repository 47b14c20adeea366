"""Writes to recordings. Every change to workspace data goes through here (admin actions,
commands, producers, tests), because this is where its realtime event is recorded."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.recordings.models import BoardContent, BoardStatus, RevisionKind, Segment, Session, SessionStatus, Transcript
from apps.tenancy.models import Workspace

# DESIGN.md §1: recording→processing→completed, recording→completed, recording/processing→failed.
STATUS_TRANSITIONS: dict[str, set[str]] = {
    SessionStatus.RECORDING: {SessionStatus.PROCESSING, SessionStatus.COMPLETED, SessionStatus.FAILED},
    SessionStatus.PROCESSING: {SessionStatus.COMPLETED, SessionStatus.FAILED},
    SessionStatus.COMPLETED: set(),
    SessionStatus.FAILED: set(),
}


class InvalidTransition(ValueError):
    pass


@dataclass(frozen=True)
class SegmentInput:
    timestamp_start: int
    timestamp_end: int
    text: str
    speaker_label: str | None = None
    confidence: float | None = None


@transaction.atomic
def create_session(
    *,
    workspace: Workspace,
    label: str | None = None,
    memo: str | None = None,
    started_at: datetime | None = None,
    at: datetime | None = None,
) -> Session:
    now = at or timezone.now()
    return Session.objects.create(
        workspace=workspace,
        label=label,
        memo=memo,
        status=SessionStatus.RECORDING,
        started_at=started_at or now,
        created_at=now,
        updated_at=now,
    )


@transaction.atomic
def change_session_status(*, session: Session, status: str, at: datetime | None = None) -> Session:
    session = _lock(session)
    if status not in STATUS_TRANSITIONS.get(session.status, set()):
        raise InvalidTransition(f"{session.status} → {status} is not a session transition")
    now = at or timezone.now()
    if session.status == SessionStatus.RECORDING:
        session.ended_at = now
    session.status = status
    session.updated_at = now
    session.save(update_fields=["status", "ended_at", "updated_at"])
    return session


def _lock(session: Session) -> Session:
    """Serialise writers of one session's transcripts and boards: they read the last sequence
    or version and write the next, which two concurrent writers would otherwise both take."""
    return Session.objects.select_for_update().get(pk=session.pk)


def _transcript(session: Session, kind: str, now: datetime) -> Transcript:
    transcript, _ = Transcript.objects.get_or_create(
        session=session, revision_kind=kind, defaults={"workspace_id": session.workspace_id, "created_at": now}
    )
    return transcript


def _segment_rows(
    transcript: Transcript,
    segments: Iterable[SegmentInput],
    *,
    first_sequence: int,
    first_commit_index: int,
    now: datetime,
) -> list[Segment]:
    return [
        Segment(
            workspace_id=transcript.workspace_id,
            transcript=transcript,
            sequence=first_sequence + i,
            session_committed_index=first_commit_index + i,
            timestamp_start=s.timestamp_start,
            timestamp_end=s.timestamp_end,
            speaker_label=s.speaker_label,
            text=s.text,
            confidence=s.confidence,
            created_at=now,
        )
        for i, s in enumerate(segments)
    ]


@transaction.atomic
def append_committed_segments(
    *, session: Session, segments: Iterable[SegmentInput], at: datetime | None = None
) -> list[Segment]:
    """Append realtime segments; sequence and the session's commit index continue from the last."""
    now = at or timezone.now()
    _lock(session)
    transcript = _transcript(session, RevisionKind.COMMITTED, now)
    last = Segment.objects.filter(transcript=transcript).aggregate(seq=Max("sequence"), idx=Max("session_committed_index"))
    next_seq = 0 if last["seq"] is None else last["seq"] + 1
    next_idx = 0 if last["idx"] is None else last["idx"] + 1
    rows = _segment_rows(transcript, segments, first_sequence=next_seq, first_commit_index=next_idx, now=now)
    Segment.objects.bulk_create(rows, batch_size=500)
    return rows


@transaction.atomic
def write_final_transcript(
    *, session: Session, segments: Iterable[SegmentInput], at: datetime | None = None
) -> Transcript:
    """Write (or rewrite) the post-recording revision as a whole."""
    now = at or timezone.now()
    _lock(session)
    Transcript.objects.filter(session=session, revision_kind=RevisionKind.FINAL).delete()
    transcript = _transcript(session, RevisionKind.FINAL, now)
    rows = _segment_rows(transcript, segments, first_sequence=0, first_commit_index=0, now=now)
    Segment.objects.bulk_create(rows, batch_size=500)
    return transcript


def payload_hash(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@transaction.atomic
def publish_board(
    *,
    session: Session,
    board_id: str,
    payload: Any,
    source_revision_kind: str,
    status: str = BoardStatus.READY,
    at: datetime | None = None,
) -> BoardContent:
    """Add the next version of a board and make it the current one."""
    now = at or timezone.now()
    _lock(session)
    versions = BoardContent.objects.filter(session=session, board_id=board_id)
    last = versions.aggregate(v=Max("version"))["v"] or 0
    versions.filter(is_current=True).update(is_current=False)
    return BoardContent.objects.create(
        workspace_id=session.workspace_id,
        session=session,
        board_id=board_id,
        version=last + 1,
        status=status,
        is_current=True,
        source_revision_kind=source_revision_kind,
        payload=payload,
        payload_hash=payload_hash(payload),
        created_at=now,
    )
