"""`purge_events`: delete outbox events past their retention (also run hourly by the task
cluster: the `connect.events.purge` schedule, apps/events/apps.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.events.services import purge_events


class Command(BaseCommand):
    help = "Delete outbox events past their retention (segment events: the resume window; session events: 30 days)."

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"purged {purge_events()} events")
