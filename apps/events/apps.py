from django.apps import AppConfig
from django.db.models.signals import post_migrate


def ensure_purge_schedule(sender, using="default", **kwargs) -> None:  # noqa: ARG001
    """Outbox retention as a django-q2 schedule: hourly `purge_events`, run by the task cluster
    that `serve` starts (and by `qcluster` workers), whether or not anyone streams."""
    from django.db import DEFAULT_DB_ALIAS
    from django_q.models import Schedule

    if using != DEFAULT_DB_ALIAS:
        return
    Schedule.objects.get_or_create(
        name="connect.events.purge",
        defaults={"func": "apps.events.services.purge_events", "schedule_type": Schedule.HOURLY, "repeats": -1},
    )


class EventsConfig(AppConfig):
    name = "apps.events"

    def ready(self) -> None:
        from apps.core.openapi import SCHEMA_EXTENDERS
        from apps.events import openapi

        post_migrate.connect(ensure_purge_schedule, sender=self, dispatch_uid="events.purge_schedule")
        if openapi.extend not in SCHEMA_EXTENDERS:
            SCHEMA_EXTENDERS.append(openapi.extend)
