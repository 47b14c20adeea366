"""`rotate_signing_key`: a new active signing key; the previous one keeps being published as
`retiring` (at least 30 days), so receivers still verify deliveries signed before the switch."""

from django.core.management.base import BaseCommand

from apps.webhooks import keys


class Command(BaseCommand):
    help = "Create a new active webhook signing key; the old one becomes retiring."

    def handle(self, *args, **options) -> None:
        self.stdout.write(keys.rotate().kid)
