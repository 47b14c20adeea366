"""Writes to recordings. Every change to workspace data goes through here (admin actions,
commands, producers, tests), because this is where its realtime event is recorded."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from apps.core.ids import new_id
from apps.events.models import EventType
from apps.events.services import record_event, record_events
from apps.recordings.models import BoardContent, BoardStatus, RevisionKind, Segment, Session, SessionStatus, Transcript
from apps.recordings.representations import (
    session_created_data,
    session_status_changed_data,
    transcript_segment_created_data,
)
from apps.tenancy.models import Workspace

# docs/api/sessions.md: recording→processing→completed, recording→completed, recording/processing→failed.
STATUS_TRANSITIONS: dict[str, set[str]] = {
    SessionStatus.RECORDING: {SessionStatus.PROCESSING, SessionStatus.COMPLETED, SessionStatus.FAILED},
    SessionStatus.PROCESSING: {SessionStatus.COMPLETED, SessionStatus.FAILED},
    SessionStatus.COMPLETED: set(),
    SessionStatus.FAILED: set(),
}


class InvalidTransition(ValueError):
    pass


class InvalidTimes(ValueError):
    """A session would end before it started."""


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


@transaction.atomic
def create_session(
    *,
    workspace: Workspace,
    label: str | None = None,
    memo: str | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    external_id: str | None = None,
    at: datetime | None = None,
) -> Session:
    now = at or timezone.now()
    if ended_at is not None and ended_at < (started_at or now):
        raise InvalidTimes("endedAt is before startedAt")
    session = Session.objects.create(
        workspace=workspace,
        label=label,
        memo=memo,
        status=SessionStatus.RECORDING,
        started_at=started_at or now,
        ended_at=ended_at,
        external_id=external_id,
        created_at=now,
        updated_at=now,
    )
    record_event(
        workspace_id=session.workspace_id,
        type=EventType.SESSION_CREATED,
        session_id=session.id,
        occurred_at=now,
        data=session_created_data(session, now),
    )
    return session


@transaction.atomic
def change_session_status(*, session: Session, status: str, at: datetime | None = None) -> Session:
    session = _lock(session)
    if status not in STATUS_TRANSITIONS.get(session.status, set()):
        raise InvalidTransition(f"{session.status} → {status} is not a session transition")
    now = at or timezone.now()
    if session.status == SessionStatus.RECORDING:
        session.ended_at = now
    previous_status = session.status
    session.status = status
    session.updated_at = now
    session.save(update_fields=["status", "ended_at", "updated_at"])
    record_event(
        workspace_id=session.workspace_id,
        type=EventType.SESSION_STATUS_CHANGED,
        session_id=session.id,
        occurred_at=now,
        data=session_status_changed_data(session, previous_status, now),
    )
    return session


SESSION_FIELDS = ("label", "memo", "started_at", "ended_at")


@transaction.atomic
def update_session(*, session: Session, at: datetime | None = None, **changes: Any) -> Session:
    """Set any of `SESSION_FIELDS` (None clears); `updated_at` moves only when a value changes.
    No event: the contract has none for a session's fields."""
    unknown = set(changes) - set(SESSION_FIELDS)
    if unknown:
        raise TypeError(f"not a session field: {', '.join(sorted(unknown))}")
    session = _lock(session)
    changed = [name for name, value in changes.items() if getattr(session, name) != value]
    if not changed:
        return session
    for name in changed:
        setattr(session, name, changes[name])
    if session.ended_at is not None and session.started_at is not None and session.ended_at < session.started_at:
        raise InvalidTimes("endedAt is before startedAt")
    session.updated_at = at or timezone.now()
    session.save(update_fields=[*changed, "updated_at"])
    return session


@transaction.atomic
def put_external_session(
    *, workspace: Workspace, external_id: str, at: datetime | None = None, **changes: Any
) -> tuple[Session, bool]:
    """The session the producer calls `external_id`, created (recording, `session.created`)
    or updated with `changes` (any of `SESSION_FIELDS`); True when created. Two producers
    creating the same id at once make one session: the loser of the unique constraint updates."""
    session = Session.objects.filter(workspace=workspace, external_id=external_id).first()
    if session is None:
        try:
            with transaction.atomic():
                return create_session(workspace=workspace, external_id=external_id, at=at, **changes), True
        except IntegrityError:
            session = Session.objects.get(workspace=workspace, external_id=external_id)
    return update_session(session=session, at=at, **changes), False


@transaction.atomic
def set_session_status(*, session: Session, status: str, at: datetime | None = None) -> tuple[Session, bool]:
    """`change_session_status`, where asking for the status the session already has is no
    change (a producer's retry), not an impossible transition; True when it changed."""
    session = _lock(session)
    if session.status == status:
        return session, False
    return change_session_status(session=session, status=status, at=at), True


def _lock(session: Session) -> Session:
    """Serialise writers of one session's transcripts and boards: they read the last sequence
    or version and write the next, which two concurrent writers would otherwise both take."""
    return Session.objects.select_for_update().get(pk=session.pk)


def _transcript(session: Session, kind: str, now: datetime) -> Transcript:
    transcript, _ = Transcript.objects.get_or_create(
        session=session, revision_kind=kind, defaults={"workspace_id": session.workspace_id, "created_at": now}
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
    now = at or timezone.now()
    segments = list(segments)
    transcript_id = _lock_for_append(session)
    if transcript_id is None:
        transcript_id = _transcript(session, RevisionKind.COMMITTED, now).id
    rows = _insert_numbered(workspace_id=session.workspace_id, transcript_id=transcript_id, segments=segments, now=now)
    record_events(
        workspace_id=session.workspace_id,
        session_id=session.id,
        occurred_at=now,
        items=[(EventType.TRANSCRIPT_SEGMENT_CREATED, transcript_segment_created_data(session.id, now, row))
               for row in rows],
    )
    return rows


def _lock_for_append(session: Session) -> str | None:
    """_lock and the committed revision's id (None before the first segment) in one statement.
    The revision row is read with the statement's snapshot, which on PostgreSQL may predate
    the lock wait; that is safe because a revision, once created, is never removed while its
    session lives, and a revision created meanwhile makes `_transcript` find it. The last
    sequence is not read here for the same reason: see _insert_numbered."""
    from django.db import connection

    sql = (
        f"SELECT s.id, t.id FROM {Session._meta.db_table} AS s LEFT JOIN {Transcript._meta.db_table} AS t"
        " ON t.session_id = s.id AND t.revision_kind = %s WHERE s.id = %s"
    )
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [RevisionKind.COMMITTED, session.pk])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist("Session matching query does not exist.")
    return row[1]


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
            f"INSERT INTO {Segment._meta.db_table} ({', '.join(_SEGMENT_COLUMNS)})"
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
        for segment_id, s in zip(ids, batch):
            seq, idx = numbers[segment_id]
            row = _segment(s, sequence=seq, commit_index=idx, now=now,
                           id=segment_id, workspace_id=workspace_id, transcript_id=transcript_id)
            row._state.adding = False
            row._state.db = connection.alias
            rows.append(row)
    return rows


@dataclass(frozen=True)
class SequencedAppend:
    created: list[Segment]  # the new segments, in sequence order
    acknowledged: int  # segments of the batch that were already stored, with the same content
    next_sequence: int  # what the revision expects next


def _same(stored: tuple, s: SegmentInput) -> bool:
    return stored == (s.timestamp_start, s.timestamp_end, s.speaker_label, s.text, s.confidence)


@transaction.atomic
def append_sequenced_segments(
    *, session: Session, first_sequence: int, segments: list[SegmentInput], at: datetime | None = None
) -> SequencedAppend:
    """Append a producer's batch numbered `first_sequence`, `first_sequence + 1`, … (0-based,
    the committed revision's own `sequence`), so that a retry never duplicates: the part of the
    batch already stored with the same content is acknowledged, the rest appended. A gap
    (`first_sequence` past the next) or a stored sequence with other content raises
    `SequenceConflict` and writes nothing; new segments for a session no longer recording raise
    `SessionClosed`. Under the session lock, so concurrent producers keep one numbering."""
    session = _lock(session)
    found = (
        Transcript.objects.filter(session=session, revision_kind=RevisionKind.COMMITTED)
        .annotate(last=Max("segments__sequence"))
        .values_list("id", "last")
        .first()
    )
    transcript_id, last = found if found is not None else (None, None)
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
        return SequencedAppend(created=[], acknowledged=stored_count, next_sequence=expected)
    if session.status != SessionStatus.RECORDING:
        raise SessionClosed(f"the session is {session.status}; committed segments are appended while recording")
    created = append_committed_segments(session=session, segments=new, at=at)
    return SequencedAppend(created=created, acknowledged=stored_count, next_sequence=expected + len(new))


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


@transaction.atomic
def put_board(
    *,
    session: Session,
    board_id: str,
    payload: Any,
    source_revision_kind: str,
    status: str,
    at: datetime | None = None,
) -> tuple[BoardContent, bool]:
    """`publish_board`, unless the current version already says the same (status, source
    revision kind and payload hash): then it is returned as it is, so a producer's retry adds no
    version. True when a version was added."""
    _lock(session)
    current = BoardContent.objects.filter(session=session, board_id=board_id, is_current=True).first()
    if (
        current is not None
        and current.status == status
        and current.source_revision_kind == source_revision_kind
        and current.payload_hash == payload_hash(payload)
    ):
        return current, False
    board = publish_board(
        session=session, board_id=board_id, payload=payload, source_revision_kind=source_revision_kind,
        status=status, at=at,
    )
    return board, True


# --- Backfill -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportedBoard:
    board_id: str
    payload: Any
    source_revision_kind: str
    status: str
    created_at: datetime


@dataclass
class ImportedSession:
    """A whole historic session as it ended up: the result of its lifetime of service calls.
    `committed` holds the realtime segments in commit order, in chunks with their commit time;
    `boards` every version of every board in publication order (the last of a board is current)."""

    label: str | None
    memo: str | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime
    updated_at: datetime
    committed: list[tuple[datetime, list[SegmentInput]]]
    final: list[SegmentInput] | None = None
    final_at: datetime | None = None
    boards: list[ImportedBoard] | None = None
    external_id: str | None = None


_SESSION_COLUMNS = (
    "id", "workspace_id", "label", "memo", "status", "started_at", "ended_at", "created_at", "updated_at",
    "external_id",
)  # fmt: skip
_TRANSCRIPT_COLUMNS = ("id", "workspace_id", "session_id", "revision_kind", "created_at")
_SEGMENT_COLUMNS = (
    "id", "workspace_id", "transcript_id", "sequence", "session_committed_index", "timestamp_start",
    "timestamp_end", "speaker_label", "text", "confidence", "created_at",
)  # fmt: skip
_BOARD_COLUMNS = (
    "id", "workspace_id", "session_id", "board_id", "version", "status", "is_current", "source_revision_kind",
    "payload", "payload_hash", "created_at",
)  # fmt: skip


@transaction.atomic
def import_sessions(*, workspace: Workspace, sessions: list[ImportedSession]) -> list[str]:
    """Backfill historic sessions (seed data, imports) in one transaction; returns their ids.

    A bulk path beside the realtime services: rows are built in Python and written with
    `executemany` (SQLite) or `COPY` (PostgreSQL, for segments), not one ORM round per change.
    It is a backfill, so it records **no events**: nothing happened live, and subscribers must
    not receive a replay of history. The database keeps the search index in step as for any
    write (triggers on SQLite, the generated column on PostgreSQL). After the last batch of a
    bulk load, call `refresh_statistics()`."""
    from django.db import connection

    datetime_value = connection.ops.adapt_datetimefield_value
    ws = workspace.pk
    session_rows, transcript_rows, segment_rows, board_rows, ids = [], [], [], [], []
    # Oldest first, so revisions are indexed in the order they were created (search walks the
    # newest revisions first).
    for s in sorted(sessions, key=lambda s: s.created_at):
        session_id = new_id()
        ids.append(session_id)
        session_rows.append((
            session_id, ws, s.label, s.memo, s.status, datetime_value(s.started_at), datetime_value(s.ended_at),
            datetime_value(s.created_at), datetime_value(s.updated_at), s.external_id,
        ))  # fmt: skip
        revisions = []
        if s.committed:
            revisions.append((RevisionKind.COMMITTED, s.committed[0][0], s.committed))
        if s.final is not None:
            revisions.append((RevisionKind.FINAL, s.final_at, [(s.final_at, s.final)]))
        for kind, created_at, chunks in revisions:
            transcript_id = new_id()
            transcript_rows.append((transcript_id, ws, session_id, kind, datetime_value(created_at)))
            sequence = 0
            for at, segments in chunks:
                at_value = datetime_value(at)
                for segment in segments:
                    segment_rows.append((
                        new_id(), ws, transcript_id, sequence, sequence, segment.timestamp_start,
                        segment.timestamp_end, segment.speaker_label, segment.text, segment.confidence, at_value,
                    ))  # fmt: skip
                    sequence += 1
        last_version: dict[str, int] = {}
        for board in s.boards or []:
            last_version[board.board_id] = last_version.get(board.board_id, 0) + 1
        versions: dict[str, int] = {}
        for board in s.boards or []:
            version = versions[board.board_id] = versions.get(board.board_id, 0) + 1
            board_rows.append((
                new_id(), ws, session_id, board.board_id, version, board.status,
                version == last_version[board.board_id], board.source_revision_kind, json.dumps(board.payload),
                payload_hash(board.payload), datetime_value(board.created_at),
            ))  # fmt: skip

    with connection.cursor() as cursor:
        for table, columns, rows in (
            (Session._meta.db_table, _SESSION_COLUMNS, session_rows),
            (Transcript._meta.db_table, _TRANSCRIPT_COLUMNS, transcript_rows),
            (BoardContent._meta.db_table, _BOARD_COLUMNS, board_rows),
        ):
            if rows:
                placeholders = ", ".join(["%s"] * len(columns))
                cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})", rows)
        if segment_rows and connection.vendor == "postgresql":
            copy_sql = f"COPY {Segment._meta.db_table} ({', '.join(_SEGMENT_COLUMNS)}) FROM STDIN"
            with cursor.cursor.copy(copy_sql) as copy:
                for row in segment_rows:
                    copy.write_row(row)
        elif segment_rows:
            # The sqlite3 module directly: Django's wrapper would rewrite the SQL and check
            # every parameter tuple of a million-row executemany.
            placeholders = ", ".join(["?"] * len(_SEGMENT_COLUMNS))
            cursor.cursor.executemany(
                f"INSERT INTO {Segment._meta.db_table} ({', '.join(_SEGMENT_COLUMNS)}) VALUES ({placeholders})",
                segment_rows,
            )
    return ids


def refresh_statistics() -> None:
    """After a bulk load. PostgreSQL: ANALYZE the recordings tables. Search chooses between its
    GIN lookup and its walk over the newest revisions from the planner's estimates, and tables
    filled in one go have none until autovacuum's next pass, so until then a common word can
    take the plan that ranks every match. SQLite keeps no statistics the search relies on; its
    index is compacted (`compact_search_index`)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        tables = ", ".join(m._meta.db_table for m in (Session, Transcript, Segment, BoardContent))
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")
    compact_search_index()


# Leaf pages one merge step writes: a step is one short write transaction, so appends wait at
# most that long behind it.
SEARCH_MERGE_PAGES = 500
SEARCH_MERGE_MAX_STEPS = 2000  # a bound per run, should writes keep adding b-trees; the next run goes on


def compact_search_index() -> int:
    """Merge what writes left scattered in the search index, in short steps; returns the steps.
    Run hourly by the task cluster (schedule `connect.recordings.compact_search_index`) and after
    bulk loads.

    SQLite: FTS5 adds a b-tree per flushed write and merges them only once four share a level
    (`automerge`), so a live or bulk-loaded index holds many, and every search seeks each word
    in every one of them. Migration 0004 sets `usermerge` to 2, so a 'merge' step joins any two
    b-trees of one level: the index ends with at most one per level, and a run after an hour of
    appends rewrites the small recent ones, not the whole index.
    PostgreSQL: moves the GIN index's pending list (entries written since the last vacuum,
    which every search scans in full) into the index, as autovacuum would."""
    from django.db import connection

    if connection.vendor == "sqlite":
        merge = "INSERT INTO recordings_segment_fts(recordings_segment_fts, rank) VALUES ('merge', %s)"
        for steps in range(1, SEARCH_MERGE_MAX_STEPS + 1):
            with transaction.atomic(), connection.cursor() as cursor:
                before = connection.connection.total_changes
                cursor.execute(merge, [SEARCH_MERGE_PAGES])
                # FTS5's own signal: a step that merged nothing changes fewer than two rows.
                if connection.connection.total_changes - before < 2:
                    break
        return steps
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT gin_clean_pending_list('recordings_segment_search_vector'::regclass)")
        return 1
    return 0
