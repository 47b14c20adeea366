"""Reads of the event log: REST's pages, the stream's resume and its embedded follower all read
it through `read_log`, in one order, `(position, id)` (apps/events/positions.py).

No reader ever skips an event: a page reads only rows below the log's *horizon*, a position under
which every transaction that could add a row has ended, and a row can only arrive above the
horizon of any earlier read. PostgreSQL: a row's position is its transaction's id, the horizon
the oldest transaction id the read's snapshot sees running. SQLite: one writer at a time takes
`MAX(position) + 1` (or the clock, if larger) under the write lock, so positions grow in commit
order; the purge never deletes the row holding the largest position, so none is given twice
(docs/decisions/event-log.md "The event log").

A long transaction holds the PostgreSQL horizon back for everyone (readers wait; they never
skip). The stream's resume reads `settled=False`: everything visible after the client's last
event, the follower delivering later any copy of a row it returned (the stream drops it)."""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

import orjson
from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from apps.events.models import Event
from apps.events.positions import Position, event_id_ms, id_floor, later
from apps.events.retention import now_ms
from engine.postgresql import prepared

EVENT_FIELDS = ("id", "workspace_id", "type", "session_id", "occurred_at", "data", "position")
TABLE = Event._meta.db_table

_POSITION_ON_INSERT = {
    "postgresql": "pg_current_xact_id()::text::bigint",
    # The larger of the last position + 1 and the time in microseconds: positions grow by one
    # under the write lock, and a log emptied behind a follower (a test's flush, a file restored)
    # still continues above every position given before it.
    "sqlite": f'(SELECT MAX(COALESCE(MAX("position"), 0) + 1, '
    "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 1000) "
    f'FROM "{TABLE}")',
}
# The oldest transaction id another session still runs (the snapshot's in-progress list), else
# the snapshot's xmax (the next id after the last one completed): below it everything is
# settled. Second column: the reader's own transaction id, if it has one (only tests read the
# log inside a writing transaction): it sees its own rows as its own writes.
_HORIZON = {
    "postgresql": "SELECT LEAST((SELECT MIN(x::text::bigint) FROM pg_snapshot_xip(s) x), "
    "GREATEST(pg_snapshot_xmax(s)::text::bigint, pg_current_xact_id_if_assigned()::text::bigint + 1)), "
    "pg_current_xact_id_if_assigned()::text::bigint FROM pg_current_snapshot() s",
    "sqlite": f'SELECT COALESCE(MAX("position"), 0) + 1, NULL FROM "{TABLE}"',
}


# Above every position given so far, committed or not: PostgreSQL's next transaction id (a
# transaction that has written a row has an id below it); SQLite's one writer, the horizon. With
# the positions whose rows may still commit (PostgreSQL: the transactions running now; SQLite:
# none, a reader runs beside no writer's uncommitted rows it could later see).
_END = {
    "postgresql": "SELECT pg_snapshot_xmax(s)::text::bigint, "
    "ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(s) x) FROM pg_current_snapshot() s",
    "sqlite": _HORIZON["sqlite"],
}


def position_on_insert() -> RawSQL:
    """The value of a new row's `position`, computed by the database inside the INSERT."""
    return RawSQL(position_sql(), ())


def position_sql() -> str:
    """`position_on_insert` as SQL, for an INSERT written by hand."""
    return _POSITION_ON_INSERT[connection.vendor]


def horizon() -> int:
    """Every row whose position is below this is committed, or will never be."""
    return _horizon()[0]


def log_snapshot() -> tuple[int, list[int]]:
    """(end, running): every row already written (by a transaction running now, too) has a
    position below `end`, and one whose position is in `running` may still commit; every other
    row below `end` is committed, or never will be. Read after a commit C, `end` bounds the rows
    of every transaction that could have read the database before C: once `horizon()` reaches
    it, all of them are settled."""
    with connection.cursor() as cursor:
        cursor.execute(_END[connection.vendor])
        end, running = cursor.fetchone()
    return int(end), sorted(int(p) for p in running or ())


def log_end() -> int:
    """`log_snapshot`'s end alone."""
    return log_snapshot()[0]


def _horizon() -> tuple[int, int | None]:
    # Prepared on PostgreSQL (every poll and page asks): its planning cost more than its run.
    bound, own = prepared.fetchone("connect_log_horizon", _HORIZON[connection.vendor], [])
    return int(bound), own


def _past(after: Position) -> RawSQL:
    if not after.event_id:
        return RawSQL(f'"{TABLE}"."position" > %s', (after.seq,), output_field=BooleanField())
    return RawSQL(f'("{TABLE}"."position", "{TABLE}"."id") > (%s, %s)', (after.seq, after.event_id),
                  output_field=BooleanField())


def _log(workspace_id: int | None, types: Iterable[str] | None, session_id: str | None):
    events = Event.objects.all()
    if workspace_id is not None:
        events = events.filter(workspace_id=workspace_id)
    if types is not None:
        events = events.filter(type__in=list(types))
    if session_id is not None:
        events = events.filter(session_id=session_id)
    return events


class LogRow(NamedTuple):
    """One event of a page as `GET /api/v1/events` sends it: the columns the envelope reads, with
    `data` the stored JSON document unparsed (an `orjson.Fragment`, written into the page as
    is: no decode and re-encode of a document that was JSON when it was stored). On PostgreSQL
    its keys come in jsonb's order rather than the declaration's; the parsed value is the same."""

    id: str
    type: str
    session_id: str
    occurred_at: str  # already in wire form (apps/core/timestamps.iso_ms), formatted by the database
    data: orjson.Fragment
    position: int


# `occurred_at` as apps/core/timestamps.iso_ms writes it (UTC, milliseconds truncated, `Z`),
# formatted by the database: parsing 100 timestamps into datetimes to format them again was a
# tenth of a page's CPU on PostgreSQL (psycopg's timestamptz loader runs in Python under
# Django's). SQLite holds Django's text `YYYY-MM-DD HH:MM:SS[.ffffff]` (UTC).
_WIRE_TIME = {
    "postgresql": f"""to_char("{TABLE}"."occurred_at" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')""",
    "sqlite": f"""substr("{TABLE}"."occurred_at", 1, 10) || 'T' || substr("{TABLE}"."occurred_at", 12, 8) || '.' """
    f"""|| substr(substr("{TABLE}"."occurred_at", 21) || '000', 1, 3) || 'Z'""",
}


def read_log(
    *,
    after: Position | None,
    limit: int,
    workspace_id: int | None = None,
    types: Iterable[str] | None = None,
    session_id: str | None = None,
    settled: bool = True,
) -> tuple[list[Event], Position]:
    """Up to `limit` events after `after` in log order, and where the reader stands after them.

    `settled`: only rows below the horizon, so the returned place is never passed by a row that
    commits later; when the page is not full the reader stands at the horizon itself (every
    settled row up to it was read or did not match). `workspace_id=None`: every workspace (the
    follower routes by workspace itself)."""
    return _read(lambda events: list(events.only(*EVENT_FIELDS)), after=after, limit=limit,
                 workspace_id=workspace_id, types=types, session_id=session_id, settled=settled)


def read_log_rows(
    *,
    after: Position | None,
    limit: int,
    workspace_id: int,
    types: Iterable[str] | None = None,
    session_id: str | None = None,
) -> tuple[list[LogRow], Position]:
    """`read_log` (settled) for a page on the wire: the same rows and place, as `LogRow`s read
    in one statement of the needed columns (written once per combination of filters, not
    compiled by the ORM per request: that was a third of a page's CPU), with no model instances
    and `data` left as stored."""
    bound, own = _horizon()
    after = _settled_after(after, bound, own)
    sql, params = _rows_statement(connection.vendor, after=after, limit=limit, workspace_id=workspace_id,
                                  types=types, session_id=session_id, bound=bound, own=own)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    fragment = orjson.Fragment
    rows = [LogRow(i, t, s, o, fragment(d), p) for i, t, s, o, d, p in fetched]
    return rows, _place(rows, after=after, limit=limit, bound=bound)


class FollowedRow(NamedTuple):
    """One event of the whole log as the stream's follower reads it: `LogRow`'s columns with
    its workspace (the follower routes by it), `data` the stored JSON text (its frame parses
    it once, apps/events/representations.frame_for_row)."""

    workspace_id: int
    id: str
    type: str
    session_id: str
    occurred_at: str  # wire form, as `LogRow`'s
    data: str
    position: int


def follow_log(*, after: Position | None, limit: int) -> tuple[list[FollowedRow], Position]:
    """`read_log(after=…, limit=…)` over every workspace (settled): the same rows and place, as
    `FollowedRow`s read in one statement written once and prepared on PostgreSQL (the follower
    polls on every commit; the ORM compiled its query and built an `Event` per row each time)."""
    bound, own = _horizon()
    after = _settled_after(after, bound, own)
    sql, params = _statement(connection.vendor, "follow", after=after, workspace_id=None, types=None,
                             session_id=None, bound=bound, own=own)
    with connection.cursor() as cursor:
        prepared.run(cursor, None, sql, [*params, limit])
        rows = list(map(FollowedRow._make, cursor.fetchall()))
    return rows, _place(rows, after=after, limit=limit, bound=bound)


_STATEMENTS: dict[tuple, str] = {}
# `data` as the stored text. SQLite keeps a JSONField as text already.
_DATA_TEXT = {"postgresql": '"data"::text', "sqlite": 'CAST("data" AS text)'}


def _rows_statement(vendor, *, after, limit, workspace_id, types, session_id, bound, own) -> tuple[str, list]:
    """The page's SQL (`_read`'s ORM query, written out) and its parameters."""
    sql, params = _statement(vendor, "rows", after=after, workspace_id=workspace_id, types=types,
                             session_id=session_id, bound=bound, own=own)
    return sql, [*params, limit]


def _statement(vendor, select, *, after, workspace_id, types, session_id, bound, own) -> tuple[str, list]:
    """SQL over one workspace's log (every workspace's when `workspace_id` is None) and its
    parameters, written once per shape of the filters (which are given, `after` with or without
    an id, whether an own transaction's rows count) and kept: `select` "rows" (a page), "follow"
    (the follower's rows; both take their LIMIT as the last parameter) or "exists"."""
    types = sorted(types) if types is not None else None
    shape = (vendor, select, workspace_id is not None, -1 if types is None else len(types), session_id is not None,
             0 if after is None else (2 if after.event_id else 1), 0 if bound is None else (2 if own else 1))
    sql = _STATEMENTS.get(shape)
    if sql is None:
        conditions = [] if workspace_id is None else ['"workspace_id" = %s']
        if types is not None:
            conditions.append(f'"type" IN ({", ".join(["%s"] * len(types))})' if types else "FALSE")
        if session_id is not None:
            conditions.append('"session_id" = %s')
        if after is not None:
            conditions.append('("position", "id") > (%s, %s)' if after.event_id else '"position" > %s')
        if bound is not None:
            conditions.append('("position" < %s OR "position" = %s)' if own else '"position" < %s')
        where = f'WHERE {" AND ".join(conditions)} ' if conditions else ""
        if select in ("rows", "follow"):
            time = _WIRE_TIME[vendor].replace(f'"{TABLE}".', "")
            workspace = '"workspace_id", ' if select == "follow" else ""
            sql = (f'SELECT {workspace}"id", "type", "session_id", {time}, {_DATA_TEXT[vendor]}, "position" '
                   f'FROM "{TABLE}" {where}ORDER BY "position", "id" LIMIT %s')
        else:
            sql = f'SELECT 1 FROM "{TABLE}" {where}LIMIT 1'
        _STATEMENTS[shape] = sql
    params: list = [] if workspace_id is None else [workspace_id]
    params += types or ()
    if session_id is not None:
        params.append(session_id)
    if after is not None:
        params += [after.seq, after.event_id] if after.event_id else [after.seq]
    if bound is not None:
        params += [bound, own] if own else [bound]
    return sql, params


def _settled_after(after: Position | None, bound: int | None, own: int | None) -> Position | None:
    if bound is not None and after is not None and after.seq >= bound and after.seq != own:
        # A place not settled yet: the position of an `evt_` id the stream handed out while an
        # older transaction still ran (or a log restarted below the reader). Read on from the
        # horizon: events around it may come again (readers deduplicate on the id), none is
        # skipped.
        return Position(bound - 1, "", after.ms)
    return after


def _read(fetch, *, after, limit, workspace_id, types, session_id, settled):
    bound, own = _horizon() if settled else (None, None)
    after = _settled_after(after, bound, own)
    events = _log(workspace_id, types, session_id)
    if after is not None:
        events = events.filter(_past(after))
    if bound is not None:
        events = events.filter(Q(position__lt=bound) | Q(position=own)) if own else events.filter(position__lt=bound)
    rows = fetch(events.order_by("position", "id")[:limit])
    return rows, _place(rows, after=after, limit=limit, bound=bound)


def _place(rows, *, after: Position | None, limit: int, bound: int | None) -> Position:
    """Where a reader stands after `rows`, read after `after` below `bound`."""
    if rows and (len(rows) == limit or bound is None or rows[-1].position >= bound):  # the last: own rows
        last = rows[-1]
        place = Position(last.position, last.id, event_id_ms(last.id) or 0)
    elif bound is not None:
        place = Position(bound - 1, "", now_ms())
    else:
        place = after or Position(0, "", now_ms())
    return later(place, after) if after is not None else place


def unsettled_after(
    *, place: Position, workspace_id: int, types: Iterable[str] | None = None, session_id: str | None = None
) -> bool:
    """Whether events past `place` are committed and visible but not settled yet (an older
    transaction still runs): a reader catching up once, before following a live stream, should
    page again shortly rather than stop."""
    sql, params = _statement(connection.vendor, "exists", after=place, workspace_id=workspace_id, types=types,
                             session_id=session_id, bound=None, own=None)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def log_has_more_than(count: int, *, after: Position, workspace_id: int, types: Iterable[str]) -> bool:
    """Whether more than `count` events of `types` follow `after` in the workspace's log (settled
    or not): a resume too far behind to replay. Reads index entries, not rows."""
    events = _log(workspace_id, types, None).filter(_past(after)).order_by("position", "id")
    return events[count : count + 1].exists()


def position_of(*, workspace_id: int, event_id: str) -> Position | None:
    """Where an event of this workspace stands in the log, or None (unknown, another workspace's,
    or purged)."""
    found = Event.objects.filter(workspace_id=workspace_id, pk=event_id).values_list("position", flat=True).first()
    return None if found is None else Position(found, event_id, event_id_ms(event_id) or 0)


def events_recorded_between(
    *, workspace_id: int, types: Iterable[str], start_ms: int, end_ms: int, chunk: int
) -> Iterator[list[Event]]:
    """A workspace's events recorded in [start_ms, end_ms) (their ids' time), oldest first, in
    chunks (webhook recover)."""
    last = id_floor(start_ms)
    first = True
    while True:
        bound = {"pk__gte": last} if first else {"pk__gt": last}
        events = list(
            Event.objects.filter(workspace_id=workspace_id, type__in=list(types), pk__lt=id_floor(end_ms), **bound)
            .only(*EVENT_FIELDS).order_by("pk")[:chunk]
        )
        if not events:
            return
        yield events
        last, first = events[-1].pk, False


def event_in_workspace(*, workspace_id: int, event_id: str) -> Event | None:
    return Event.objects.filter(workspace_id=workspace_id, pk=event_id).only(*EVENT_FIELDS).first()
