"""`serve [--host H] [--port P] [--workers N]`: N daphne processes listening on one port
(processes and sockets: connect/engine/serve.py).

Beside daphne it runs the task side (unless `--no-tasks`): the django-q2 cluster (`qcluster`;
ORM broker by default, Redis when REDIS_URL is set) and the webhook sweeper, which re-queues
due retries and expired leases every CONNECT_WEBHOOK_SWEEP_SECONDS. On other machines,
`manage.py qcluster` runs workers alone.
"""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from connect.engine.serve import daphne_command, listening_sockets, supervise


class Command(BaseCommand):
    help = "Serve the ASGI app with N daphne processes listening on one port."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
        parser.add_argument("--access-log", action="store_true", help="log every request to stdout")
        parser.add_argument("--no-tasks", action="store_true", help="do not start the django-q2 cluster and sweeper")

    def handle(
        self, *args, host: str, port: int, workers: int, access_log: bool, no_tasks: bool = False, **options
    ) -> None:
        workers = max(1, workers)
        sockets = listening_sockets(host, port, workers)
        app = settings.ASGI_APPLICATION.replace(".application", ":application")
        commands = [daphne_command(app, sock.fileno(), access_log=access_log) for sock in sockets]
        if not no_tasks:
            django = [sys.executable, "-m", "django"]  # DJANGO_SETTINGS_MODULE is inherited
            commands.append(django + ["qcluster"])
            sweep_every = str(settings.CONNECT_WEBHOOK_SWEEP_SECONDS)
            commands.append(django + ["sweep_webhook_deliveries", "--every", sweep_every])
        self.stdout.write(
            f"Serving on http://{host}:{port} with {workers} daphne process(es)"
            + ("" if no_tasks else " and the task cluster"),
            ending="\n",
        )
        self.stdout.flush()
        supervise(commands, sockets, stderr=self.stderr)
