"""The periodic jobs exist after `migrate` (apps.core.periodic.keep_schedule), each callable,
and a later `migrate` keeps what an operator changed."""

from __future__ import annotations

import pydoc

import pytest
from django.core.management import call_command
from django.utils.module_loading import import_string
from django_q.models import Schedule

SCHEDULES = {
    "connect.events.purge": ("apps.events.services.purge_events", Schedule.HOURLY, None),
    "connect.recordings.compact_search_index": ("apps.recordings.services.compact_search_index", Schedule.HOURLY, None),
    "connect.webhooks.sweep": ("apps.webhooks.tasks.sweep", Schedule.MINUTES, 1),
    "connect.webhooks.purge": ("apps.webhooks.tasks.purge", Schedule.DAILY, None),
    "connect.ingest.purge_idempotency_keys": ("apps.ingest.tasks.purge_idempotency_keys", Schedule.HOURLY, None),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_every_periodic_job_is_scheduled_after_migrate(db, name):
    schedule = Schedule.objects.get(name=name)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == SCHEDULES[name]
    assert schedule.repeats == -1
    # The worker resolves the stored path with pydoc.locate (django_q/worker.py); Django's way too.
    assert callable(import_string(schedule.func)) and pydoc.locate(schedule.func) is import_string(schedule.func)


def test_migrate_keeps_an_operators_changes(db):
    Schedule.objects.filter(name="connect.events.purge").update(schedule_type=Schedule.DAILY)
    Schedule.objects.filter(name="connect.webhooks.purge").delete()

    call_command("migrate", verbosity=0)

    assert Schedule.objects.get(name="connect.events.purge").schedule_type == Schedule.DAILY
    assert Schedule.objects.filter(name="connect.webhooks.purge").count() == 1
    assert Schedule.objects.filter(name__startswith="connect.").count() == len(SCHEDULES)
