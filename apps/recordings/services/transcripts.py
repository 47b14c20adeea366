"""Writes to transcripts: the realtime path that appends committed segments (counted in round
trips, since a recording may run for hours), a producer's sequenced batches that a retry never
duplicates, and the final revision written as a whole. Every writer takes the session's lock
first (`lock_session`), so one session's segments keep one numbering."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from django.db import transaction
from django.utils import timezone

from apps.core.ids import new_id
from apps.core.timestamps import iso_ms
from apps.events import filters
from apps.events.models import EventType
from apps.events.services import record_events, record_internal_event
from apps.recordings.models import RevisionKind, Segment, Session, SessionStatus, Transcript
from apps.recordings.representations import transcript_segment_created_data
from apps.recordings.semantic import hooks as semantic_hooks
from apps.recordings.services.sessions import lock_session

# A segment row's columns, in the model's field order (`Segment.from_db` relies on it); the fast
# paths write them in this order (here and the backfill's).
SEGMENT_COLUMNS = (
    "id", "workspace_id", "transcript_id", "sequence", "session_committed_index", "timestamp_start",
    "timestamp_end", "speaker_label", "text", "confidence", "created_at",
)  # fmt: skip


class SequenceConflict(ValueError):
    """A batch that does not continue the committed revision: a gap, or a sequence already
    stored with other content. `expected`: the sequence the revision expects next."""

    def __init__(self, message: str, *, expected: int) -> None:
        super().__init__(message)
        self.expected = expected


class SessionClosed(ValueError):
    """New committed segments for a session that is no longer recording."""


@dataclass(frozen=True)
class SegmentInput:
    timestamp_start: int
    timestamp_end: int
    text: str
    speaker_label: str | None = None
    confidence: float | None = None


def _transcript(session_id: str, workspace_id, kind: str, now: datetime) -> Transcript:
    transcript, _ = Transcript.objects.get_or_create(
        session_id=session_id, revision_kind=kind, defaults={"workspace_id": workspace_id, "created_at": now}
    )
    return transcript


def _segment(s: SegmentInput, *, sequence: int, commit_index: int, now: datetime, **fields) -> Segment:
    """A segment row from its input; `fields` name the workspace and transcript (and the id)."""
    return Segment(
        sequence=sequence,
        session_committed_index=commit_index,
        timestamp_start=s.timestamp_start,
        timestamp_end=s.timestamp_end,
        speaker_label=s.speaker_label,
        text=s.text,
        confidence=s.confidence,
        created_at=now,
        **fields,
    )


def _segment_rows(
    transcript: Transcript,
    segments: Iterable[SegmentInput],
    *,
    first_sequence: int,
    first_commit_index: int,
    now: datetime,
) -> list[Segment]:
    return [
        _segment(s, sequence=first_sequence + i, commit_index=first_commit_index + i, now=now,
                 workspace_id=transcript.workspace_id, transcript=transcript)
        for i, s in enumerate(segments)
    ]


@transaction.atomic
def append_committed_segments(
    *, session: Session, segments: Iterable[SegmentInput], at: datetime | None = None
) -> list[Segment]:
    """Append realtime segments; sequence and the session's commit index continue from the last.

    The realtime path of a recording that may run for hours, so it is counted in round trips:
    one statement locks the session and finds its committed revision, one statement per 500
    segments numbers and inserts them, and one records their events (one per segment).
    The search index follows per inserted row (triggers, generated column), never per revision."""
    segments = list(segments)
    return _append_locked(session.id, session.workspace_id, _lock_for_append(session), segments,
                          at or timezone.now())


def _append_locked(session_id: str, workspace_id, transcript_id: str | None, segments: list[SegmentInput],
                   now: datetime) -> list[Segment]:
    """The append under the session lock the caller holds: the revision made if it is the first
    segment, the segments numbered and inserted, their events recorded."""
    if transcript_id is None:
        transcript_id = _transcript(session_id, workspace_id, RevisionKind.COMMITTED, now).id
    rows = _insert_numbered(workspace_id=workspace_id, transcript_id=transcript_id, segments=segments, now=now)
    record_events(
        workspace_id=workspace_id,
        session_id=session_id,
        occurred_at=now,
        items=[(EventType.TRANSCRIPT_SEGMENT_CREATED, transcript_segment_created_data(session_id, now, row))
               for row in rows],
    )
    return rows


def _lock_for_append(session: Session) -> str | None:
    """`lock_session` and the committed revision's id (None before the first segment) in one statement."""
    return _lock_with_revision("s.id = %s", [session.pk])[2]


def _lock_with_revision(where: str, params: list[Any]) -> tuple[str, str, str | None]:
    """`lock_session` on the session `where` names (a condition on `s`), reading its id, its
    status and its committed revision's id (None before the first segment) in the same
    statement: (id, status, revision id); `Session.DoesNotExist` when there is none.
    The revision row is read with the statement's snapshot, which on PostgreSQL may predate
    the lock wait; that is safe because a revision, once created, is never removed while its
    session lives, and a revision created meanwhile makes `_transcript` find it. The status is
    the locked row's own (PostgreSQL returns a row it waited for as it is once locked). The
    last sequence is not read here for the same reason: see _insert_numbered and `_committed_revision`."""
    from django.db import connection

    sql = (
        f"SELECT s.id, s.status, t.id FROM {Session._meta.db_table} AS s LEFT JOIN {Transcript._meta.db_table} AS t"
        f" ON t.session_id = s.id AND t.revision_kind = %s WHERE {where}"
    )
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [RevisionKind.COMMITTED, *params])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist("Session matching query does not exist.")
    return row


def _committed_revision(session_id: str) -> tuple[str | None, int | None]:
    """The session's committed revision and its last stored sequence, (None, None) before the
    first segment. A statement of its own, after the lock was granted: on PostgreSQL it sees
    every revision and segment a previous holder committed, which the locking statement's
    snapshot may not (a revision made by the holder the lock waited for would be missed, and
    the batch numbered from 0 again)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.id, (SELECT MAX(g.sequence) FROM {Segment._meta.db_table} AS g WHERE g.transcript_id = t.id)"
            f" FROM {Transcript._meta.db_table} AS t WHERE t.session_id = %s AND t.revision_kind = %s",
            [session_id, RevisionKind.COMMITTED],
        )
        row = cursor.fetchone()
    return (row[0], row[1]) if row is not None else (None, None)


_APPEND_BATCH = 500


def _insert_numbered(*, workspace_id, transcript_id: str, segments: list[SegmentInput], now: datetime) -> list[Segment]:
    """Insert segments numbered after the revision's last one, the numbers computed by the
    INSERT itself. Under the session lock that is exact: on PostgreSQL the INSERT takes its
    snapshot after the lock was granted, so it sees every segment a previous holder committed
    (a SELECT MAX in the locking statement would not); SQLite writers are serialised anyway."""
    from django.db import connection

    created_at = connection.ops.adapt_datetimefield_value(now)
    rows: list[Segment] = []
    for start in range(0, len(segments), _APPEND_BATCH):
        batch = segments[start : start + _APPEND_BATCH]
        ids = [new_id() for _ in batch]
        params: list[Any] = [workspace_id, transcript_id, created_at]
        for n, (segment_id, s) in enumerate(zip(ids, batch)):
            params += [segment_id, n, s.timestamp_start, s.timestamp_end, s.speaker_label, s.text, s.confidence]
        params.append(transcript_id)
        values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(batch))
        # VALUES columns are column1..column7 on both databases; CASTs give an all-NULL column
        # its type on PostgreSQL (it would be text).
        sql = (
            f"INSERT INTO {Segment._meta.db_table} ({', '.join(SEGMENT_COLUMNS)})"
            " SELECT v.column1, %s, %s, last.seq + v.column2, last.idx + v.column2, v.column3, v.column4,"
            " CAST(v.column5 AS varchar(200)), v.column6, CAST(v.column7 AS double precision), %s"
            f" FROM (VALUES {values}) AS v, (SELECT COALESCE(MAX(sequence) + 1, 0) AS seq,"
            f" COALESCE(MAX(session_committed_index) + 1, 0) AS idx FROM {Segment._meta.db_table}"
            " WHERE transcript_id = %s) AS last"
            " RETURNING id, sequence, session_committed_index"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            numbers = {segment_id: (seq, idx) for segment_id, seq, idx in cursor.fetchall()}
        # The rows as stored, built the way Django builds the rows it loads (saved, in this
        # database): every column, in SEGMENT_COLUMNS' order, which is the model's field order.
        for segment_id, s in zip(ids, batch):
            seq, idx = numbers[segment_id]
            rows.append(Segment.from_db(connection.alias, SEGMENT_COLUMNS, (
                segment_id, workspace_id, transcript_id, seq, idx, s.timestamp_start, s.timestamp_end,
                s.speaker_label, s.text, s.confidence, now,
            )))  # fmt: skip
    return rows


@dataclass(frozen=True)
class SequencedAppend:
    session_id: str
    created: list[Segment]  # the new segments, in sequence order
    acknowledged: int  # segments of the batch that were already stored, with the same content
    next_sequence: int  # what the revision expects next


def _same(stored: tuple, s: SegmentInput) -> bool:
    return stored == (s.timestamp_start, s.timestamp_end, s.speaker_label, s.text, s.confidence)


@transaction.atomic(savepoint=False)
def append_sequenced_segments(
    *,
    session: Session | None = None,
    workspace_id: str | None = None,
    external_id: str | None = None,
    first_sequence: int,
    segments: list[SegmentInput],
    at: datetime | None = None,
) -> SequencedAppend:
    """Append a producer's batch numbered `first_sequence`, `first_sequence + 1`, … (0-based,
    the committed revision's own `sequence`), so that a retry never duplicates: the part of the
    batch already stored with the same content is acknowledged, the rest appended. A gap
    (`first_sequence` past the next) or a stored sequence with other content raises
    `SequenceConflict` and writes nothing; new segments for a session no longer recording raise
    `SessionClosed`. Under the session lock, so concurrent producers keep one numbering.

    The session is `session`, or the one its producer calls `external_id` in `workspace_id`
    (the ingest API's key), found by the statement that locks it (`Session.DoesNotExist` when
    there is none): a recorder's append reads no session row of its own.

    Inside a caller's transaction (the ingest view's, which stores the answer with the work) it
    opens no savepoint of its own: a refusal raised here ends the caller's transaction whole,
    which the caller rolls back anyway, and a SAVEPOINT and its RELEASE would be two more round
    trips on every append."""
    if session is not None:
        session_id, status, _ = _lock_with_revision("s.id = %s", [session.pk])
        workspace_id = session.workspace_id
    else:
        session_id, status, _ = _lock_with_revision(
            "s.workspace_id = %s AND s.external_id = %s", [workspace_id, external_id])
    transcript_id, last = _committed_revision(session_id)
    expected = 0 if last is None else last + 1
    if first_sequence > expected:
        raise SequenceConflict(f"expected sequence {expected} next, not {first_sequence}", expected=expected)
    stored_count = min(len(segments), expected - first_sequence)
    if stored_count:
        stored = Segment.objects.filter(
            transcript_id=transcript_id, sequence__gte=first_sequence, sequence__lt=first_sequence + stored_count
        ).order_by("sequence").values_list("timestamp_start", "timestamp_end", "speaker_label", "text", "confidence")
        for i, (row, segment) in enumerate(zip(stored, segments)):
            if not _same(row, segment):
                raise SequenceConflict(
                    f"segments[{i}]: sequence {first_sequence + i} is already stored with other content; "
                    f"expected sequence {expected} next",
                    expected=expected,
                )
    new = segments[stored_count:]
    if not new:
        return SequencedAppend(session_id=session_id, created=[], acknowledged=stored_count, next_sequence=expected)
    if status != SessionStatus.RECORDING:
        raise SessionClosed(f"the session is {status}; committed segments are appended while recording")
    created = _append_locked(session_id, workspace_id, transcript_id, new, at or timezone.now())
    return SequencedAppend(session_id=session_id, created=created, acknowledged=stored_count,
                           next_sequence=expected + len(new))


@transaction.atomic
def write_final_transcript(
    *, session: Session, segments: Iterable[SegmentInput], at: datetime | None = None
) -> Transcript:
    """Write (or rewrite) the post-recording revision as a whole, and record the internal
    `transcript.revision.replaced` with it (live resources of the transcript hear of it)."""
    now = at or timezone.now()
    lock_session(session)
    Transcript.objects.filter(session=session, revision_kind=RevisionKind.FINAL).delete()
    transcript = _transcript(session.id, session.workspace_id, RevisionKind.FINAL, now)
    rows = _segment_rows(transcript, segments, first_sequence=0, first_commit_index=0, now=now)
    Segment.objects.bulk_create(rows, batch_size=500)
    record_internal_event(
        workspace_id=session.workspace_id, type=filters.TRANSCRIPT_REVISION_REPLACED, session_id=session.id,
        occurred_at=now, data={"sessionId": session.id, "revisionKind": RevisionKind.FINAL.value,
                               "transcriptId": transcript.id, "segments": len(rows), "occurredAt": iso_ms(now)},
    )
    semantic_hooks.schedule(session.id)  # vectors after commit (appends are hooked at the event outbox)
    return transcript
