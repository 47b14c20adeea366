"""Backfill: whole historic sessions (seed data, imports) written in bulk beside the realtime
services, recording no events, and the statistics refresh that follows a bulk load."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from apps.core.ids import new_id
from apps.recordings.models import BoardContent, RevisionKind, Segment, Session, Transcript
from apps.recordings.services.boards import payload_hash
from apps.recordings.services.search_index import compact_search_index
from apps.recordings.services.transcripts import SEGMENT_COLUMNS, SegmentInput
from apps.tenancy.models import Workspace


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
            copy_sql = f"COPY {Segment._meta.db_table} ({', '.join(SEGMENT_COLUMNS)}) FROM STDIN"
            with cursor.cursor.copy(copy_sql) as copy:
                for row in segment_rows:
                    copy.write_row(row)
        elif segment_rows:
            # The sqlite3 module directly: Django's wrapper would rewrite the SQL and check
            # every parameter tuple of a million-row executemany.
            placeholders = ", ".join(["?"] * len(SEGMENT_COLUMNS))
            cursor.cursor.executemany(
                f"INSERT INTO {Segment._meta.db_table} ({', '.join(SEGMENT_COLUMNS)}) VALUES ({placeholders})",
                segment_rows,
            )
    return ids


def refresh_statistics() -> None:
    """After a bulk load. PostgreSQL: ANALYZE the recordings tables, which tables filled in one
    go would otherwise lack until autovacuum's next pass (every read of them is planned from
    these estimates). SQLite keeps no statistics the search relies on; its index is compacted
    (`compact_search_index`)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        tables = ", ".join(m._meta.db_table for m in (Session, Transcript, Segment, BoardContent))
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")
    compact_search_index()
