"""`retire_signing_keys [--older-than-days N]`: unpublish keys retiring for at least N days
(default and minimum 30) and erase their private halves."""

from django.core.management.base import BaseCommand, CommandError

from apps.webhooks import keys


class Command(BaseCommand):
    help = "Retire webhook signing keys that have been retiring for at least 30 days."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--older-than-days", type=int, default=keys.RETIRING_KEY_MIN_DAYS)

    def handle(self, *args, older_than_days: int, **options) -> None:
        try:
            retired = keys.retire(older_than_days=older_than_days)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        for kid in retired:
            self.stdout.write(f"retired {kid}")
        self.stdout.write(f"{len(retired)} key(s) retired")
