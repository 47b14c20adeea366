"""`purge_webhook_deliveries`: delete terminal deliveries past the 30-day retention window
(also run daily by django-q2's scheduler). Pending and retrying deliveries are never purged."""

from django.core.management.base import BaseCommand

from apps.webhooks.services import purge_terminal_deliveries


class Command(BaseCommand):
    help = "Delete webhook deliveries that reached a terminal state more than 30 days ago."

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"{purge_terminal_deliveries()} deliveries purged")
