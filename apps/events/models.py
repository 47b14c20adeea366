from __future__ import annotations

from django.db import models

import os
import threading
import time

from apps.core.ids import crockford
from apps.tenancy.models import Workspace


class EventType(models.TextChoices):
    SESSION_CREATED = "session.created"
    SESSION_STATUS_CHANGED = "session.status_changed"
    TRANSCRIPT_SEGMENT_CREATED = "transcript.segment.created"


_last_id_lock = threading.Lock()
_last_ms = 0
_last_random = 0


def new_event_id() -> str:
    """`evt_` + a ULID that is also strictly increasing within this process ("monotonic ULID"):
    in the same millisecond the random part is incremented, so the events one transaction
    records (a batch of segments) sort in the order they were recorded."""
    global _last_ms, _last_random
    with _last_id_lock:
        now_ms = int(time.time() * 1000)
        if now_ms <= _last_ms:
            now_ms, _last_random = _last_ms, _last_random + 1
            if _last_random >= 1 << 80:  # 2^80 ids in one millisecond: borrow the next one
                now_ms, _last_random = now_ms + 1, int.from_bytes(os.urandom(10), "big") >> 1
        else:
            # Leave headroom below 2^80 so increments never carry into the time bits.
            _last_random = int.from_bytes(os.urandom(10), "big") >> 1
        _last_ms = now_ms
        return "evt_" + crockford((now_ms << 80) | _last_random)




class Event(models.Model):
    """The transactional outbox and the workspace's event log: one row per change, written in
    the change's transaction, its `data` fixed at that moment. The stream fans these out,
    webhook deliveries hang from them, and `GET /api/v1/events` pages them.

    `position` orders the log with `id` (apps/events/positions.py): given by the database at
    insert so that rows settle in position order (apps/events/selectors.py says how on each
    database); readers never see it."""

    id = models.CharField(primary_key=True, max_length=40, default=new_event_id, editable=False)
    # No index of its own: event_ws_position starts with it (migration 0005).
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+", db_index=False)
    type = models.CharField(max_length=40, choices=EventType.choices)
    session_id = models.CharField(max_length=40)
    occurred_at = models.DateTimeField()
    data = models.JSONField()
    position = models.BigIntegerField(default=0, editable=False)

    class Meta:
        indexes = [
            # The log of one workspace (REST, resume), in log order.
            models.Index(fields=["workspace", "position", "id"], name="event_ws_position"),
            # The whole log (the embedded follower), and its horizon on SQLite (MAX(position)).
            models.Index(fields=["position", "id"], name="event_position"),
            # Purge: by type, oldest ids first.
            models.Index(fields=["type", "id"], name="event_type_id"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.type}"


class StreamSlot(models.Model):
    """One open event stream. `number` is in [0, limit) and unique per workspace, so concurrent
    connects on any process or instance can never hold more than `limit` slots: the database's
    unique constraint arbitrates. A process renews the leases of its live streams' slots; a
    killed process's slots expire with the lease (apps/stream/slots). `holder` names the stream open that
    took the slot within its process, so a retried acquire finds its own row and never another
    process's: `(workspace, process, holder)` is unique too."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    number = models.PositiveIntegerField()
    process = models.CharField(max_length=64)
    # db_default: processes still running the previous release insert rows without it.
    holder = models.CharField(max_length=32, default="", db_default="", blank=True)
    lease_expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "number"], name="streamslot_unique_number"),
            models.UniqueConstraint(fields=["workspace", "process", "holder"], name="streamslot_unique_holder"),
        ]
        indexes = [models.Index(fields=["process"], name="streamslot_process")]
