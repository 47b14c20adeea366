"""`sweep_webhook_deliveries [--every S]`: queue due and orphaned deliveries once, or every S
seconds until stopped (`serve` runs it that way). Safe to run on several machines at once:
claims are atomic (apps/webhooks/delivery.py)."""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from apps.webhooks import tasks


class Command(BaseCommand):
    help = "Queue webhook deliveries that are due or whose lease expired."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--every", type=float, default=0, help="repeat every S seconds until stopped")

    def handle(self, *args, every: float, **options) -> None:
        if not every:
            self.stdout.write(f"queued {tasks.sweep()}")
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *a: stop.set())
        signal.signal(signal.SIGINT, lambda *a: stop.set())
        while not stop.is_set():
            try:
                tasks.sweep()
            except Exception as exc:  # noqa: BLE001 - a database hiccup must not end the loop
                self.stderr.write(f"sweep failed: {exc}")
            finally:
                close_old_connections()
            stop.wait(every)
