"""`serve`'s process and socket management: N daphne processes listening on one port, and the
task side beside them, supervised until SIGINT/SIGTERM.

Daphne has no worker option, so the parent binds the sockets and hands each child its own
(`daphne --fd`). Each socket is bound with SO_REUSEPORT, so the kernel spreads new connections
across the processes by hash. One socket shared by all processes spread them by who woke first:
a process could accept a whole burst of keep-alive connections and serve them alone while the
other idled. A child that dies is restarted on its socket; SIGINT/SIGTERM stop all. Each child
leads a process group, killed whole once the child has stopped or failed to within 10 s, so
nothing a child forked outlives it.

Relies on: daphne's `--fd` option (an inherited listening socket, Twisted's endpoint
`fd:fileno=N`), Linux's SO_REUSEPORT, and `subprocess.Popen(process_group=0)` (Python 3.11).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TextIO

STOP_SECONDS = 10


def daphne_command(app: str, fd: int, *, access_log: bool) -> list[str]:
    command = [sys.executable, "-m", "connect.engine.daphne_worker", "-v", "1" if access_log else "0"]
    if access_log:
        command += ["--access-log", "-"]
    return command + ["--fd", str(fd), app]


def supervise(
    commands: list[list[str]],
    sockets: list[socket.socket],
    *,
    stderr: TextIO,
    on_exit: Callable[[int], object] = lambda pid: None,
) -> None:
    """Runs `commands` (the i-th of the first len(sockets) gets sockets[i]) until SIGINT or
    SIGTERM, restarting any that exits (after `on_exit(its pid)`); then stops them all and
    closes the sockets."""

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
    try:
        while not stopping:
            for i, child in enumerate(children):
                if child.poll() is not None and not stopping:
                    stderr.write(f"child process {child.pid} exited ({child.returncode}); restarting\n")
                    kill_group(child)
                    on_exit(child.pid)
                    time.sleep(0.5)
                    children[i] = spawn(i)
            time.sleep(0.2)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=STOP_SECONDS)
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
