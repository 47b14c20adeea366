"""Recording events. Called by the services that change workspace data, inside their
transaction: the outbox row and whatever `event_recorded` receivers write (webhook deliveries)
commit together or not at all. Only after commit is the fan-out told."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.events import fanout
from apps.events.models import Event, EventType
from apps.events.signals import event_recorded


def record_event(*, workspace_id: int, type: str, session_id: str, occurred_at: datetime, data: dict) -> Event:
    event = Event.objects.create(
        workspace_id=workspace_id, type=type, session_id=session_id, occurred_at=occurred_at, data=data
    )
    event_recorded.send(sender=Event, event=event)
    transaction.on_commit(lambda: _announce(event))
    return event


def _announce(event: Event) -> None:
    fanout.announce_committed(event)


# Retention: segment events only serve resume, so they live as long as the
# resume window; session events stay 30 days, the horizon webhook deliveries look back on.
SESSION_EVENT_RETENTION = timedelta(days=30)
PURGE_BATCH = 1000


def purge_events(*, now: datetime | None = None) -> int:
    """Delete outbox events past their retention, in small batches (short write locks)."""
    now = now or timezone.now()
    cutoffs = {
        EventType.TRANSCRIPT_SEGMENT_CREATED: now - timedelta(seconds=settings.CONNECT_SSE_RESUME_SECONDS),
        EventType.SESSION_CREATED: now - SESSION_EVENT_RETENTION,
        EventType.SESSION_STATUS_CHANGED: now - SESSION_EVENT_RETENTION,
    }
    deleted = 0
    for type_, cutoff in cutoffs.items():
        while True:
            ids = list(
                Event.objects.filter(type=type_, occurred_at__lt=cutoff).values_list("pk", flat=True)[:PURGE_BATCH]
            )
            if not ids:
                break
            deleted += Event.objects.filter(pk__in=ids).delete()[1].get("events.Event", 0)
    return deleted
