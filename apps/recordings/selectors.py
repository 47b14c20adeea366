"""Reads of recordings. Every function takes `workspace=`: a row of another workspace is
indistinguishable from a missing one (`NotFound`)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from operator import itemgetter
from typing import Any

from django.db import connection
from django.db.models import Count, Max

from apps.core.cursors import InvalidCursor, decode_cursor, encode_cursor
from apps.core.errors import NotFound
from apps.core.shapes import TIMESTAMP, Shape
from apps.core.timestamps import IsoMs, iso_ms_sql, iso_us_sql, parse_iso, stamp_read
from apps.recordings.models import BoardContent, RevisionKind, Segment, Session, Transcript
from apps.recordings import shapes
from apps.tenancy.models import Workspace
from engine.postgresql import prepared


def session_by_external_id(*, workspace: Workspace, external_id: str) -> Session:
    """The session its producer calls `external_id` (the ingest API's key), in `workspace`."""
    try:
        return Session.objects.get(workspace=workspace, external_id=external_id)
    except Session.DoesNotExist:
        raise NotFound() from None


def get_session(*, workspace: Workspace, session_id: str) -> Session:
    try:
        return Session.objects.get(workspace=workspace, id=session_id)
    except Session.DoesNotExist:
        raise NotFound() from None


def session_row(*, workspace: Workspace, session_id: str) -> Any:
    """The session as a row of the fields its wire shape reads, timestamps in wire form
    (`session_row_repr` takes it): what REST's and MCP's session get answer from. One query
    written once (`_SessionSql`), no ORM query building, prepared once per PostgreSQL connection
    as the API-key lookup is (its planning cost more than its run)."""
    row = prepared.fetchone("connect_session_row", _SESSION_SQL.one(), [workspace.pk, session_id])
    if row is None:
        raise NotFound()
    return SESSION_ROWS.make(row)


class _SessionSql:
    """The session reads of the two hottest answers (the list and one session), written by
    hand once per database vendor and filter shape from the model's columns: the same SQL the
    ORM would build from `SESSION_ROWS` (tests/recordings/test_session_rows.py compares them),
    without building it per request."""

    def __init__(self) -> None:
        self._cache: dict[tuple, str] = {}

    def _columns(self) -> tuple[str, str, dict[str, str]]:
        q = connection.ops.quote_name
        table = q(Session._meta.db_table)
        names = {f: f"{table}.{q(Session._meta.get_field(f).column)}" for f in ("workspace", "created_at", "status")}
        names["id"] = f"{table}.{q(Session._meta.pk.column)}"
        select = ", ".join(
            iso_ms_sql(connection.vendor, f"{table}.{q(Session._meta.get_field(f).column)}")
            if f in SESSION_ROWS.stamps
            else f"{table}.{q(Session._meta.get_field(f).column)}"
            for f in SESSION_ROWS.fields
        )
        return table, select, names

    def one(self) -> str:
        key = (connection.vendor, "one")
        if key not in self._cache:
            table, select, c = self._columns()
            self._cache[key] = f"SELECT {select} FROM {table} WHERE {c['workspace']} = %s AND {c['id']} = %s"  # noqa: S608
        return self._cache[key]

    def page(self, statuses: int, after: bool, before: bool, cursor: bool) -> str:
        """Newest first, at most %s rows (the last parameter), with the next key last."""
        key = (connection.vendor, "page", statuses, after, before, cursor)
        if key not in self._cache:
            table, select, c = self._columns()
            where = [f"{c['workspace']} = %s"]
            if statuses:
                where.append(f"{c['status']} IN ({', '.join(['%s'] * statuses)})")
            if after:
                where.append(f"{c['created_at']} >= %s")
            if before:
                where.append(f"{c['created_at']} < %s")
            if cursor:
                where.append(f"({c['created_at']} < %s OR ({c['created_at']} = %s AND {c['id']} < %s))")
            self._cache[key] = (
                f"SELECT {select}, {iso_us_sql(connection.vendor, c['created_at'])} FROM {table} "  # noqa: S608
                f"WHERE {' AND '.join(where)} ORDER BY {c['created_at']} DESC, {c['id']} DESC LIMIT %s"
            )
        return self._cache[key]


_SESSION_SQL = _SessionSql()


def sessions_page(
    *,
    workspace: Workspace,
    limit: int,
    cursor: str | None = None,
    statuses: list[str] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> tuple[list[Any], str | None]:
    """Newest first, keyset-paginated on (created_at, id).
    Filters: `statuses` (any of), `created_after` < createdAt < `created_before` (both
    exclusive); the cursor is bound to them (a cursor sent with other filters is 400).

    Items are rows of SESSION_ROWS (timestamps written by the database in wire form, no
    datetime per row; `session_row_repr` takes them); the next page's key is read the same way,
    in microseconds (`iso_us_sql`)."""
    params: list[Any] = [workspace.pk]
    if statuses:
        statuses = sorted(set(statuses))
        params += statuses
    # Compared as the wire shows createdAt, in whole milliseconds: `createdAfter=<a session's
    # createdAt>` never returns that session again, though it is stored in microseconds.
    stamp = connection.ops.adapt_datetimefield_value
    if created_after is not None:
        params.append(stamp(_floor_ms(created_after) + timedelta(milliseconds=1)))
    if created_before is not None:
        ceiling = _floor_ms(created_before)
        if ceiling != created_before:
            ceiling += timedelta(milliseconds=1)
        params.append(stamp(ceiling))
    # Bound as the instant in UTC microseconds: `…Z` and `…+00:00` are the same filter.
    filters = {
        "status": statuses or None,
        "createdAfter": _instant(created_after),
        "createdBefore": _instant(created_before),
    }
    if cursor:
        key = decode_cursor("sessions", workspace.id, cursor, filters)
        try:
            created_at, last_id = parse_iso(key[0]), str(key[1])
        except (IndexError, TypeError, ValueError):
            raise InvalidCursor() from None
        params += [stamp(created_at), stamp(created_at), last_id]
    sql = _SESSION_SQL.page(len(statuses or ()), created_after is not None, created_before is not None, bool(cursor))
    with connection.cursor() as db:
        db.execute(sql, [*params, limit + 1])
        rows = db.fetchall()
    make = SESSION_ROWS.make
    if len(rows) <= limit:
        return [make(row[:-1]) for row in rows], None
    page = [make(row[:-1]) for row in rows[:limit]]
    # Microseconds, not the wire's milliseconds: the key must be exact for the keyset to hold.
    return page, encode_cursor("sessions", workspace.id, [rows[limit - 1][-1], page[-1].id], filters)


def _floor_ms(value: datetime) -> datetime:
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).isoformat()


# --- The transcript fast path -----------------------------------------------------------------
# REST (both paths, every format) and MCP get_transcript read transcripts as rows: tuples of
# exactly the columns the wire shape reads, as the cursor returns them (no model instances, no
# named tuple per segment), encoded by the shape's row encoder
# (apps/core/shapes.py `encode_rows`). Segment timestamps are read as `stamp_read` says: wire
# text from PostgreSQL, stored text on SQLite that the encoder slices (`TranscriptRows.stamp`).

# The session columns a transcript answer needs besides its segments: the export's filename
# comes from the label, and a changed session changes the validator.
TRANSCRIPT_SESSION_FIELDS = ("id", "label", "updated_at")


class WireRows:
    """Rows of `fields` (named, for the representations and the exports), the `stamps` among
    them in wire form."""

    def __init__(self, name: str, fields: tuple[str, ...], stamps: frozenset[str] = frozenset()) -> None:
        self.fields, self.stamps = fields, stamps
        self.columns = self.through("")
        self.make = namedtuple(name, fields)._make
        self.index = {f: i for i, f in enumerate(fields)}

    def through(self, relation: str) -> list[Any]:
        """The columns, read through `relation` (`"transcripts__"`) from another model."""
        return [IsoMs(relation + f) if f in self.stamps else relation + f for f in self.fields]

    @classmethod
    def of(cls, name: str, shape: Shape) -> WireRows:
        """The fields `shape` reads, its timestamps in wire form."""
        return cls(name, shape.source_attributes(), frozenset(f.path for f in shape.fields if f.kind == TIMESTAMP))


FLAT_SEGMENT_ROWS = WireRows.of("FlatSegmentRow", shapes.FLAT_SEGMENT)
SESSION_ROWS = WireRows.of("SessionWireRow", shapes.SESSION)
REVISION_SEGMENT_ROWS = WireRows.of("RevisionSegmentRow", shapes.REVISION_SEGMENT)
# What TRANSCRIPT_REVISION reads of `transcript` (its kind also orders the revisions).
TRANSCRIPT_ROWS = WireRows("TranscriptRow", ("id", "revision_kind", "created_at"), frozenset({"created_at"}))


@dataclass(frozen=True)
class TranscriptRows:
    """A session's transcript revisions as rows: `revisions` is [(transcript row, segment rows)]
    in revision-kind order (committed, final). Segment rows are plain tuples of their WireRows'
    fields, their timestamps in wire form after `stamp` (None: already)."""

    session: Any
    revisions: list[tuple[Any, list[tuple]]]
    stamp: Callable[[str], str] | None = None

    @property
    def flat(self) -> tuple[Any, list[Any]] | tuple[None, list[Any]]:
        """The flat transcript's revision: final when there is one, else committed."""
        by_kind = {t.revision_kind: (t, rows) for t, rows in self.revisions}
        return by_kind.get(RevisionKind.FINAL) or by_kind.get(RevisionKind.COMMITTED) or (None, [])


SessionRow = namedtuple("SessionRow", TRANSCRIPT_SESSION_FIELDS)


def _session_and_transcripts(workspace: Workspace, session_id: str, revision_kind: str | None) -> tuple[Any, list[Any]]:
    """The session row and its revisions' rows (only `revision_kind` when given), in one query:
    the session left-joined to its (at most two) revisions. The session's `updated_at` is read
    in microseconds as text (`iso_us_sql`): it only enters the answer's validator."""
    width = len(TRANSCRIPT_SESSION_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(_TRANSCRIPT_SQL.session_and_revisions(), [workspace.pk, session_id])
        rows = cursor.fetchall()
    if not rows:
        raise NotFound()
    transcripts = [
        TRANSCRIPT_ROWS.make(row[width:])
        for row in rows
        if row[width] is not None and (not revision_kind or row[width + 1] == revision_kind)
    ]
    return SessionRow._make(rows[0][:width]), transcripts


def segment_rows(transcript: Any, rows: WireRows = FLAT_SEGMENT_ROWS) -> list[tuple]:
    """A revision's segments in its order, as tuples of `rows.fields` (timestamps as
    `segment_stamp()` says)."""
    with connection.cursor() as cursor:
        cursor.execute(_TRANSCRIPT_SQL.segments(rows, transcript.revision_kind), [transcript.id])
        return cursor.fetchall()


def segment_stamp() -> Callable[[str], str] | None:
    """What turns `segment_rows`' timestamps into wire form on this database (`stamp_read`)."""
    return stamp_read(connection.vendor, "")[1]


class _TranscriptSql:
    """The transcript answer's two reads, written by hand once per database vendor (and row
    shape, and revision order) from the models' columns: the ORM queries they replaced
    (`Session … values_list(…, "transcripts__…")` and `Segment … values_list(…)`, ordered by
    the commit order for committed segments, else the sequence) built their SQL anew per request (tests/recordings/test_transcript_fast_path.py
    holds the rows to the ORM's)."""

    def __init__(self) -> None:
        self._cache: dict[tuple, str] = {}

    def session_and_revisions(self) -> str:
        key = (connection.vendor, "session")
        if key not in self._cache:
            q, vendor = connection.ops.quote_name, connection.vendor
            s, t = Session._meta, Transcript._meta
            columns = [
                f"s.{q(s.pk.column)}", f"s.{q(s.get_field('label').column)}",
                iso_us_sql(vendor, f"s.{q(s.get_field('updated_at').column)}"),
                *(iso_ms_sql(vendor, f"t.{q(t.get_field(f).column)}") if f in TRANSCRIPT_ROWS.stamps
                  else f"t.{q(t.pk.column if f == 'id' else t.get_field(f).column)}" for f in TRANSCRIPT_ROWS.fields),
            ]  # fmt: skip
            self._cache[key] = (
                f"SELECT {', '.join(columns)} FROM {q(s.db_table)} s "  # noqa: S608 - our own names
                f"LEFT JOIN {q(t.db_table)} t ON t.{q(t.get_field('session').column)} = s.{q(s.pk.column)} "
                f"WHERE s.{q(s.get_field('workspace').column)} = %s AND s.{q(s.pk.column)} = %s "
                f"ORDER BY t.{q(t.get_field('revision_kind').column)}"
            )
        return self._cache[key]

    def segments(self, rows: WireRows, revision_kind: str) -> str:
        key = (connection.vendor, rows.fields, revision_kind == RevisionKind.COMMITTED)
        if key not in self._cache:
            q, vendor, m = connection.ops.quote_name, connection.vendor, Segment._meta
            columns = [
                stamp_read(vendor, q(m.get_field(f).column))[0] if f in rows.stamps
                else q(m.pk.column if f == "id" else m.get_field(f).column) for f in rows.fields
            ]  # fmt: skip
            # Both orders are an index's (models.Segment.Meta): no sort. A final revision's
            # order is its sequence alone (unique per transcript).
            order = (
                f"{q(m.get_field('session_committed_index').column)}, {q(m.get_field('sequence').column)}"
                if revision_kind == RevisionKind.COMMITTED else q(m.get_field("sequence").column)
            )  # fmt: skip
            self._cache[key] = (
                f"SELECT {', '.join(columns)} FROM {q(m.db_table)} "  # noqa: S608 - our own names
                f"WHERE {q(m.get_field('transcript').column)} = %s ORDER BY {order}"
            )
        return self._cache[key]


_TRANSCRIPT_SQL = _TranscriptSql()


def transcript_rows(
    *, workspace: Workspace, session_id: str, revision_kind: str | None = None, flat: bool = False
) -> TranscriptRows:
    """The session's revisions (only `revision_kind` when given) with their segments. `flat`:
    only the flat transcript's revision is read, with the flat segment's fields.

    The revisions and their segments are two statements, each seeing what was committed when it
    began; a final revision replaced in between (`write_final_transcript`: one transaction
    deletes the old revision and writes the new) leaves the first naming a revision the second
    finds empty. Segments are read whole per statement, so emptiness is the only sign: a
    revision read empty is looked up again, and the read repeated if it was replaced."""
    for _ in range(_REPLACED_RETRIES):
        rows = _transcript_rows(workspace, session_id, revision_kind, flat)
        empty = {t.id for t, segments in rows.revisions if not segments}
        if not empty:
            return rows
        _, now = _session_and_transcripts(workspace, session_id, revision_kind)
        if empty <= {t.id for t in now}:
            return rows
    return rows


# A revision replaced during the read, again and again: after these many reads, the last stands.
_REPLACED_RETRIES = 5


def _transcript_rows(workspace: Workspace, session_id: str, revision_kind: str | None, flat: bool) -> TranscriptRows:
    session, transcripts = _session_and_transcripts(workspace, session_id, revision_kind)
    if flat:
        chosen, _ = TranscriptRows(session, [(t, []) for t in transcripts]).flat
        return TranscriptRows(session, [(chosen, segment_rows(chosen))] if chosen else [], segment_stamp())
    return TranscriptRows(session, [(t, segment_rows(t, REVISION_SEGMENT_ROWS)) for t in transcripts], segment_stamp())


def transcript_validator(
    *, workspace: Workspace, session_id: str, revision_kind: str | None = None, flat: bool = False
) -> tuple[Any, list[tuple[str, int, int | None]]]:
    """What a transcript answer is made from, without its segments: the session row and, per
    revision the answer shows, (transcript id, segment count, last sequence). Segments are only
    ever appended to a revision (a new final revision is a new transcript), so these change
    whenever the answer does. `transcript_version` gives the same triples from read rows."""
    session, transcripts = _session_and_transcripts(workspace, session_id, revision_kind)
    if flat:
        chosen, _ = TranscriptRows(session, [(t, []) for t in transcripts]).flat
        transcripts = [chosen] if chosen else []
    counts = dict.fromkeys((t.id for t in transcripts), (0, None))
    if counts:
        aggregates = (
            Segment.objects.filter(transcript_id__in=list(counts))
            .values_list("transcript_id")
            .annotate(count=Count("id"), last=Max("sequence"))
            .order_by()
        )
        counts.update((tid, (count, last)) for tid, count, last in aggregates)
    return session, [(tid, *counts[tid]) for tid in counts]


_SEQUENCE = itemgetter(FLAT_SEGMENT_ROWS.index["sequence"])
if REVISION_SEGMENT_ROWS.index["sequence"] != FLAT_SEGMENT_ROWS.index["sequence"]:  # REVISION_SEGMENT extends FLAT_SEGMENT
    raise RuntimeError("a revision segment's sequence is not where a flat segment's is")


def transcript_version(rows: TranscriptRows) -> list[tuple[str, int, int | None]]:
    """`transcript_validator`'s triples from rows already read."""
    return [(t.id, len(segments), max(map(_SEQUENCE, segments), default=None)) for t, segments in rows.revisions]


def session_boards(*, workspace: Workspace, session_id: str, with_payload: bool = False) -> list[BoardContent]:
    """Every version, grouped by board, newest version first. The REST list shows summaries,
    so the payload is left in the database unless asked for (MCP's list_boards shows it)."""
    session = get_session(workspace=workspace, session_id=session_id)
    boards = BoardContent.objects.filter(session=session).order_by("board_id", "-version")
    return list(boards if with_payload else boards.defer("payload"))


def current_board(*, workspace: Workspace, session_id: str, board_id: str) -> BoardContent:
    session = get_session(workspace=workspace, session_id=session_id)
    try:
        return BoardContent.objects.get(session=session, board_id=board_id, is_current=True)
    except BoardContent.DoesNotExist:
        raise NotFound() from None


