"""The outbox's hand-written batch INSERT on PostgreSQL (apps/events/services.py `_insert`)
writes the rows `bulk_create` writes: the same columns, the same JSON, the same position."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.events import selectors, services
from apps.events.models import Event
from tests import factories

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the unnest INSERT is PostgreSQL's")

DATA = [
    {"sessionId": "ses_1", "segment": {"text": "naïve café — “quoted” \\ back", "confidence": 0.25, "speakerLabel": None}},
    {"sessionId": "ses_1", "nested": {"list": [1, 2.5, True, None, {"k": "v"}], "empty": {}}},
    {"sessionId": "ses_1", "status": "completed"},
]


def _rows(ids: list[str]) -> list[tuple]:
    rows = Event.objects.filter(pk__in=ids).order_by("pk")
    return [(e.workspace_id, e.type, e.session_id, e.occurred_at, e.data, e.position) for e in rows]


@pytest.mark.django_db
def test_the_batch_insert_writes_what_bulk_create_writes():
    ws = factories.workspace("outbox-insert")
    now = timezone.now()
    types = ["transcript.segment.created", "transcript.segment.created", "session.status_changed"]

    def events() -> list[Event]:
        return [Event(workspace_id=ws.id, type=t, session_id="ses_1", occurred_at=now, data=d) for t, d in zip(types, DATA)]

    with transaction.atomic():
        ours = events()
        services._insert(ours)
        stock = events()
        for event in stock:
            event.position = selectors.position_on_insert()
        Event.objects.bulk_create(stock)
    assert _rows([e.id for e in ours]) == _rows([e.id for e in stock])
    assert [e.data for e in Event.objects.filter(pk__in=[e.id for e in ours]).order_by("pk")] == DATA
    assert all(not e._state.adding for e in ours)
