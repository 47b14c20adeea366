"""Recording events. Called by the services that change workspace data, inside their
transaction: the outbox row and whatever `event_recorded` receivers write (webhook deliveries)
commit together or not at all. Only after commit is the fan-out told.

Internal events (filters.INTERNAL_TYPES, `record_internal_event`) are rows of the same log,
announced the same way, but no `event_recorded` receiver is told of them: every receiver serves
public events (webhook deliveries, MCP event subscriptions, embeddings)."""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connection, transaction

from apps.events import fanout, retention, selectors
from apps.events.filters import INTERNAL_TYPES
from apps.events.models import Event, EventType
from apps.events.positions import id_floor
from apps.events.signals import event_recorded


def record_event(*, workspace_id: int, type: str, session_id: str, occurred_at: datetime, data: dict) -> Event:
    return record_events(workspace_id=workspace_id, session_id=session_id, occurred_at=occurred_at,
                         items=[(type, data)])[0]


def record_events(*, workspace_id: int, session_id: str, occurred_at: datetime,
                  items: list[tuple[str, dict]]) -> list[Event]:
    """Events of one session, in their order (one, or a batch of appended segments' own): one
    INSERT for all their outbox rows, then each one's `event_recorded` and, after commit, all
    announced together (`fanout.announce_committed`). Their `position` is the same, as every event of one
    transaction's is on PostgreSQL; the log orders them by id (monotonic)."""
    events = [
        Event(workspace_id=workspace_id, type=type, session_id=session_id, occurred_at=occurred_at, data=data)
        for type, data in items
    ]
    _insert(events)
    for event in events:
        event_recorded.send(sender=Event, event=event)
    transaction.on_commit(lambda: fanout.announce_committed(events))
    return events


def record_internal_event(*, workspace_id: int, type: str, session_id: str, occurred_at: datetime,
                          data: dict) -> Event:
    """An internal event (filters.INTERNAL_TYPES) in the change's transaction: in log order with
    the public ones and announced after commit like them (a listen stream hears of it live, and
    on resume), with no `event_recorded`. Its `data` is for routing (which resource changed),
    never shown on a public wire."""
    if type not in INTERNAL_TYPES:
        raise ValueError(f"{type} is not an internal event type")
    event = Event(workspace_id=workspace_id, type=type, session_id=session_id, occurred_at=occurred_at, data=data)
    _insert([event])
    transaction.on_commit(lambda: fanout.announce_committed([event]))
    return event


def _insert(events: list[Event]) -> None:
    """One INSERT for a transaction's events. On PostgreSQL their varying columns travel as
    three parameters, whatever the count: ids and types as arrays (`unnest`), the data as one
    JSON array (an array of JSON texts is escaped element by element, quote by quote).
    `bulk_create` binds seven parameters a row, and turning its statement of thousands of
    placeholders into PostgreSQL's form cost more than the insert itself for a batch of
    appended segments (docs/decisions/mechanisms.md). Rows equal the ORM's
    (tests/events/test_outbox_insert.py)."""
    if connection.vendor != "postgresql" or len(events) < 2:
        for event in events:
            event.position = selectors.position_on_insert()
        Event.objects.bulk_create(events)
        return
    first = events[0]
    data = Event._meta.get_field("data")
    sql = (
        f"INSERT INTO {Event._meta.db_table} (id, workspace_id, type, session_id, occurred_at, data, position)"
        f" SELECT u.id, %s, u.type, %s, %s, d.data, {selectors.position_sql()}"
        " FROM unnest(%s::varchar[], %s::varchar[]) WITH ORDINALITY AS u(id, type, n)"
        " JOIN jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS d(data, n) USING (n) ORDER BY n"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [
            first.workspace_id, first.session_id, first.occurred_at, [e.id for e in events], [e.type for e in events],
            json.dumps([e.data for e in events], cls=data.encoder),
        ])  # fmt: skip
    for event in events:
        event._state.adding = False
        event._state.db = connection.alias


PURGE_BATCH = 1000


def purge_events(*, now_ms: int | None = None, batch_size: int = PURGE_BATCH) -> int:
    """Delete events past their type's retention (apps/events/retention.py), oldest first, in
    batches of `batch_size` (each its own short transaction), so the purge never holds the
    write lock or a long scan. The row holding the largest position is kept whatever its age:
    on SQLite the next position is computed from it (apps/events/selectors.py).

    Returns how many public events went. Internal ones are purged too, past their own retention,
    and left out of the count, as of every other public figure."""
    now_ms = now_ms if now_ms is not None else retention.now_ms()
    newest = Event.objects.order_by("-position", "-id").values_list("pk", flat=True).first()
    deleted = 0
    for type_ in (*EventType.values, *sorted(INTERNAL_TYPES)):
        floor = id_floor(retention.cutoff_ms(type_, now_ms))
        while True:
            ids = list(
                Event.objects.filter(type=type_, pk__lt=floor).exclude(pk=newest)
                .order_by("pk").values_list("pk", flat=True)[:batch_size]
            )
            if not ids:
                break
            gone = Event.objects.filter(pk__in=ids).delete()[1].get("events.Event", 0)
            if type_ not in INTERNAL_TYPES:
                deleted += gone
    return deleted
