"""Retention, stated and enforced: session events live `CONNECT_EVENT_RETENTION_DAYS`, segment
events `CONNECT_SEGMENT_EVENT_RETENTION_HOURS`, measured from when each was recorded (its id's
time); the command and the hourly django-q2 schedule run the same purge, in bounded batches."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils.module_loading import import_string
from django_q.models import Schedule

from apps.events.models import Event
from apps.events.services import purge_events
from tests.factories import aged_event

SEGMENT, CREATED, CHANGED = "transcript.segment.created", "session.created", "session.status_changed"


@override_settings(CONNECT_EVENT_RETENTION_DAYS=30, CONNECT_SEGMENT_EVENT_RETENTION_HOURS=24)
def test_each_kind_of_event_is_kept_for_its_own_retention(acme):
    aged_event(acme, SEGMENT, timedelta(hours=25))
    aged_event(acme, CREATED, timedelta(days=31))
    aged_event(acme, CHANGED, timedelta(days=31))
    kept = [
        aged_event(acme, SEGMENT, timedelta(hours=23)),
        aged_event(acme, CREATED, timedelta(days=29)),
        aged_event(acme, CHANGED, timedelta(days=29)),
        aged_event(acme, CREATED, timedelta(0)),
    ]

    out = StringIO()
    call_command("purge_events", stdout=out)

    assert out.getvalue().strip() == "purged 3 events"
    assert set(Event.objects.values_list("id", flat=True)) == {e.id for e in kept}


@override_settings(CONNECT_EVENT_RETENTION_DAYS=2, CONNECT_SEGMENT_EVENT_RETENTION_HOURS=1)
def test_the_retention_settings_move_the_boundaries(acme):
    aged_event(acme, SEGMENT, timedelta(minutes=61))
    aged_event(acme, CREATED, timedelta(days=2, minutes=1))
    kept = [aged_event(acme, SEGMENT, timedelta(minutes=59)), aged_event(acme, CREATED, timedelta(days=1, hours=23))]
    assert purge_events() == 2
    assert set(Event.objects.values_list("id", flat=True)) == {e.id for e in kept}


def test_the_purge_deletes_in_bounded_batches(acme):
    for _ in range(7):
        aged_event(acme, CREATED, timedelta(days=40))
    aged_event(acme, CREATED, timedelta(0))
    with CaptureQueriesContext(connection) as queries:
        assert purge_events(batch_size=3) == 7
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) == 3  # 3 + 3 + 1


def test_the_newest_event_is_kept_whatever_its_age(acme):
    """On SQLite the next position is the largest one plus one: deleting the holder of the
    largest would let a position be given twice."""
    old = [aged_event(acme, CREATED, timedelta(days=40)) for _ in range(2)]
    assert purge_events() == 1
    assert list(Event.objects.values_list("id", flat=True)) == [old[-1].id]


def test_the_hourly_schedule_runs_the_purge(acme):
    schedule = Schedule.objects.get(name="connect.events.purge")
    assert (schedule.schedule_type, schedule.repeats) == (Schedule.HOURLY, -1)
    aged_event(acme, CREATED, timedelta(days=31))
    aged_event(acme, CREATED, timedelta(0))
    assert import_string(schedule.func)() == 1
    assert Event.objects.count() == 1
