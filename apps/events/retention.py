"""How long the event log keeps each event type: session events `CONNECT_EVENT_RETENTION_DAYS`
(default 30, the window webhook deliveries are replayed and recovered in), segment events
`CONNECT_SEGMENT_EVENT_RETENTION_HOURS` (default 24), and so do internal events (filters.py:
they only serve live resources, whose resume window is minutes). Past it an event is gone for
every reader at once (REST, resume, recover), whether or not the purge has deleted its row yet."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Iterable

from django.conf import settings

from apps.events.filters import INTERNAL_TYPES
from apps.events.models import EventType


def retention(event_type: str) -> timedelta:
    if event_type == EventType.TRANSCRIPT_SEGMENT_CREATED or event_type in INTERNAL_TYPES:
        return timedelta(hours=settings.CONNECT_SEGMENT_EVENT_RETENTION_HOURS)
    return timedelta(days=settings.CONNECT_EVENT_RETENTION_DAYS)


def now_ms() -> int:
    return int(time.time() * 1000)


def cutoff_ms(event_type: str, now: int | None = None) -> int:
    """Events of this type recorded before this millisecond are past retention."""
    return (now if now is not None else now_ms()) - int(retention(event_type).total_seconds() * 1000)


def oldest_complete_ms(event_types: Iterable[str], now: int | None = None) -> int:
    """A reader who has everything up to this millisecond of these types has lost nothing to
    the purge: the latest cutoff among them (the shortest retention decides)."""
    now = now if now is not None else now_ms()
    return max(cutoff_ms(t, now) for t in event_types)
