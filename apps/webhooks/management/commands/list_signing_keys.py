"""`list_signing_keys`: kid, status and dates of every key. Public information only."""

from django.core.management.base import BaseCommand

from apps.webhooks.models import SigningKey


class Command(BaseCommand):
    help = "List webhook signing keys (never their private halves)."

    def handle(self, *args, **options) -> None:
        rows = SigningKey.objects.order_by("-created_at").values_list("kid", "status", "created_at", "retiring_at")
        count = 0
        for kid, status, created_at, retiring_at in rows:
            since = f" retiring since {retiring_at:%Y-%m-%d %H:%M}" if retiring_at else ""
            self.stdout.write(f"{kid}\t{status}\tcreated {created_at:%Y-%m-%d %H:%M}{since}")
            count += 1
        self.stdout.write(f"{count} key(s)")
