"""`serve [--host H] [--port P] [--workers N]`: N daphne processes on one listening socket.

Daphne has no worker option, so this command binds the socket once and hands its file
descriptor to each child (`daphne --fd`); the kernel spreads accepted connections across
them, and both cores serve. A child that dies is restarted; SIGINT/SIGTERM stop all.

Beside daphne it runs the task side (unless `--no-tasks`): the django-q2 cluster (`qcluster`;
ORM broker by default, Redis when REDIS_URL is set) and the webhook sweeper, which re-queues
due retries and expired leases every CONNECT_WEBHOOK_SWEEP_SECONDS. On other machines,
`manage.py qcluster` runs workers alone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the ASGI app with N daphne processes sharing one socket."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
        parser.add_argument("--access-log", action="store_true", help="log every request to stdout")
        parser.add_argument("--no-tasks", action="store_true", help="do not start the django-q2 cluster and sweeper")

    def handle(
        self, *args, host: str, port: int, workers: int, access_log: bool, no_tasks: bool = False, **options
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
        sock.set_inheritable(True)
        fd = sock.fileno()

        command = [sys.executable, "-m", "daphne", "--fd", str(fd), "-v", "1" if access_log else "0"]
        if access_log:
            command += ["--access-log", "-"]
        command.append(settings.ASGI_APPLICATION.replace(".application", ":application"))

        commands = [command] * max(1, workers)
        if not no_tasks:
            django = [sys.executable, "-m", "django"]  # DJANGO_SETTINGS_MODULE is inherited
            commands.append(django + ["qcluster"])
            sweep_every = str(settings.CONNECT_WEBHOOK_SWEEP_SECONDS)
            commands.append(django + ["sweep_webhook_deliveries", "--every", sweep_every])

        def spawn(i: int) -> subprocess.Popen:
            return subprocess.Popen(commands[i], pass_fds=[fd] if commands[i] is command else [])

        children = [spawn(i) for i in range(len(commands))]
        stopping = False

        def stop(signum, frame) -> None:  # noqa: ARG001
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(
            f"Serving on http://{host}:{port} with {max(1, workers)} daphne process(es)"
            + ("" if no_tasks else " and the task cluster"),
            ending="\n",
        )
        self.stdout.flush()
        try:
            while not stopping:
                for i, child in enumerate(children):
                    if child.poll() is not None and not stopping:
                        self.stderr.write(f"child process {child.pid} exited ({child.returncode}); restarting")
                        time.sleep(0.5)
                        children[i] = spawn(i)
                time.sleep(0.2)
        finally:
            for child in children:
                if child.poll() is None:
                    child.terminate()
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
            sock.close()
