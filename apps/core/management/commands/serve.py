"""`serve [--host H] [--port P] [--workers N]`: N daphne processes listening on one port.

Daphne has no worker option, so this command binds the sockets and hands each child its own
(`daphne --fd`). Each socket is bound with SO_REUSEPORT, so the kernel spreads new connections
across the processes by hash. One socket shared by all processes spread them by who woke first:
a process could accept a whole burst of keep-alive connections and serve them alone while the
other idled (seen in bench/search.py: 51 against 132-143 req/s in the same run, one process at
120 % CPU). A child that dies is restarted on its socket; SIGINT/SIGTERM stop all. Each child
leads a process group, killed whole once the child has stopped or failed to within 10 s, so
nothing a child forked outlives it.

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
        sockets = listening_sockets(host, port, max(1, workers))
        daphne = [sys.executable, "-m", "daphne", "-v", "1" if access_log else "0"]
        if access_log:
            daphne += ["--access-log", "-"]
        app = settings.ASGI_APPLICATION.replace(".application", ":application")

        commands = [daphne + ["--fd", str(sock.fileno()), app] for sock in sockets]
        if not no_tasks:
            django = [sys.executable, "-m", "django"]  # DJANGO_SETTINGS_MODULE is inherited
            commands.append(django + ["qcluster"])
            sweep_every = str(settings.CONNECT_WEBHOOK_SWEEP_SECONDS)
            commands.append(django + ["sweep_webhook_deliveries", "--every", sweep_every])

        def spawn(i: int) -> subprocess.Popen:
            # Each child leads its own process group, so that what it forked goes with it.
            fds = [sockets[i].fileno()] if i < len(sockets) else []
            return subprocess.Popen(commands[i], pass_fds=fds, process_group=0)

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
                        kill_group(child)
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
                    pass
                kill_group(child)
            for sock in sockets:
                sock.close()


def kill_group(child: subprocess.Popen) -> None:
    """Kills what is left of a child's process group, the child included, and reaps the child.
    django-q2's qcluster forks a sentinel that forks workers, a monitor and a pusher: a qcluster
    that died or did not stop in time left them running, orphaned, with their database
    connections."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone: everything in it has exited
    child.wait()


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` sockets listening on (host, port) with SO_REUSEPORT, one per daphne process.

    SO_REUSEPORT would also let this group join sockets that another process (of the same user)
    bound with it, such as a second `serve` started by mistake on the same port, and split its
    traffic silently. So the port is first bound once without it: a port in use fails with
    EADDRINUSE as it always did, and port 0 picks the port the group then shares."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    def bound(port: int, *, reuse_port: bool) -> socket.socket:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        return sock

    with bound(port, reuse_port=False) as probe:
        port = probe.getsockname()[1]
    sockets = [bound(port, reuse_port=True) for _ in range(count)]
    for sock in sockets:
        sock.listen(1024)
        sock.set_inheritable(True)
    return sockets
