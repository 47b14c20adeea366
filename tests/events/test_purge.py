"""Outbox retention: segment events live for the resume window, session events 30 days; the
command and the hourly django-q2 schedule run the same purge."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.models import Schedule

from apps.events.models import Event
from apps.events.services import record_event


def _event(ws, type_: str, age: timedelta) -> Event:
    return record_event(
        workspace_id=ws.id, type=type_, session_id="s1", occurred_at=timezone.now() - age, data={"sessionId": "s1"}
    )


@override_settings(CONNECT_SSE_RESUME_SECONDS=300)
def test_each_kind_of_event_is_kept_for_its_own_retention(acme):
    kept = [
        _event(acme, "transcript.segment.created", timedelta(seconds=200)),
        _event(acme, "session.created", timedelta(days=29)),
        _event(acme, "session.status_changed", timedelta(days=29)),
    ]
    _event(acme, "transcript.segment.created", timedelta(seconds=400))
    _event(acme, "session.created", timedelta(days=31))
    _event(acme, "session.status_changed", timedelta(days=31))

    out = StringIO()
    call_command("purge_events", stdout=out)

    assert out.getvalue().strip() == "purged 3 events"
    assert set(Event.objects.values_list("id", flat=True)) == {e.id for e in kept}


def test_the_hourly_schedule_runs_the_purge(acme):
    schedule = Schedule.objects.get(name="connect.events.purge")
    assert (schedule.schedule_type, schedule.repeats) == (Schedule.HOURLY, -1)
    _event(acme, "session.created", timedelta(days=31))
    assert import_string(schedule.func)() == 1
    assert not Event.objects.exists()
