"""Periodic jobs as django-q2 schedules, run by the task cluster that `serve` starts (and by
`qcluster` workers on other machines), whether or not anyone is using the service."""

from __future__ import annotations

from django.apps import AppConfig
from django.db import DEFAULT_DB_ALIAS
from django.db.models.signals import post_migrate


def keep_schedule(app: AppConfig, name: str, func: str, schedule_type: str, minutes: int | None = None) -> None:
    """Create the schedule `name` (calling the dotted path `func`) after every `migrate` of the
    default database, unless it exists: an operator's edits to it in the admin are kept."""

    def ensure(sender, using=DEFAULT_DB_ALIAS, **kwargs) -> None:  # noqa: ARG001 - signal
        from django_q.models import Schedule

        if using != DEFAULT_DB_ALIAS:
            return
        Schedule.objects.get_or_create(
            name=name, defaults={"func": func, "schedule_type": schedule_type, "minutes": minutes, "repeats": -1}
        )

    post_migrate.connect(ensure, sender=app, weak=False, dispatch_uid=f"schedule:{name}")
