"""`purge_events`: delete outbox events past their retention (also run hourly by the task
cluster: the `connect.events.purge` schedule, apps/events/apps.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.events.services import purge_events


class Command(BaseCommand):
    help = ("Delete events past their retention (CONNECT_EVENT_RETENTION_DAYS for session events, "
            "CONNECT_SEGMENT_EVENT_RETENTION_HOURS for segment events), in batches.")

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"purged {purge_events()} events")
