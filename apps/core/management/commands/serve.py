"""`serve [--host H] [--port P] [--workers N]`: N daphne processes on one listening socket.

Daphne has no worker option, so this command binds the socket once and hands its file
descriptor to each child (`daphne --fd`); the kernel spreads accepted connections across
them, and both cores serve. A child that dies is restarted; SIGINT/SIGTERM stop all.
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

    def handle(self, *args, host: str, port: int, workers: int, access_log: bool, **options) -> None:
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

        def spawn() -> subprocess.Popen:
            return subprocess.Popen(command, pass_fds=[fd])

        children = [spawn() for _ in range(max(1, workers))]
        stopping = False

        def stop(signum, frame) -> None:  # noqa: ARG001
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(f"Serving on http://{host}:{port} with {len(children)} daphne process(es)", ending="\n")
        self.stdout.flush()
        try:
            while not stopping:
                for i, child in enumerate(children):
                    if child.poll() is not None and not stopping:
                        self.stderr.write(f"daphne process {child.pid} exited ({child.returncode}); restarting")
                        time.sleep(0.5)
                        children[i] = spawn()
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
