"""`serve`'s process and socket management: N daphne processes listening on one port, and the
task side beside them, supervised until SIGINT/SIGTERM.

Daphne has no worker option, so the parent binds the sockets and hands each child its own
(`daphne --fd`). Each socket is bound with SO_REUSEPORT, so the kernel spreads new connections
across the processes by hash. One socket shared by all processes spread them by who woke first:
a process could accept a whole burst of keep-alive connections and serve them alone while the
other idled. A child that dies is restarted on its socket; SIGINT/SIGTERM stop all. Each child
leads a process group, killed whole once the child has stopped or failed to within 10 s, so
nothing a child forked outlives it.

The task side starts once every server process is ready (its reactor runs, its socket is
watched) or has exited: each server is handed the write end of a pipe (`SERVE_READY_FD`,
written by engine/daphne_worker.py). Started together, the qcluster and the sweeper
(each a Django set-up, 1.3-1.7 s of CPU) took half of a 2-core machine while the servers
started, and a restart under 5,000 reconnecting streams waited for them (issue 26's storm).

Each socket listens with the deepest accept queue the kernel allows (`net.core.somaxconn`,
4096 by default since Linux 5.4): 5,000 clients reconnecting at once overflowed 1,024 per
socket, and a connection whose handshake found the queue full waited for the client's
retransmission, a second or more (TcpExtListenOverflows: 14,006 in one storm).

Every child is told to stop (SIGTERM) when `serve` dies, even by SIGKILL (`stop_with`).

Relies on: daphne's `--fd` option (an inherited listening socket, Twisted's endpoint
`fd:fileno=N`), Linux's SO_REUSEPORT and PR_SET_PDEATHSIG, and `subprocess.Popen(process_group=0)`
(Python 3.11).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TextIO

STOP_SECONDS = 10
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
READY_SECONDS = 60  # the task side starts anyway if a server is not ready by then
ACCEPT_QUEUE = 65535  # capped by the kernel at net.core.somaxconn
RELEASE_SECONDS = 5.0  # how long a port in use is tried again (`listening_sockets`)


def daphne_command(app: str, fd: int, *, access_log: bool) -> list[str]:
    command = [sys.executable, "-m", "engine.daphne_worker", "-v", "1" if access_log else "0"]
    if access_log:
        command += ["--access-log", "-"]
    return command + ["--fd", str(fd), app]


def supervise(
    servers: list[list[str]],
    sockets: list[socket.socket],
    tasks: list[list[str]] = (),
    *,
    stderr: TextIO,
    on_exit: Callable[[int], object] = lambda pid: None,
) -> None:
    """Runs `servers` (the i-th with sockets[i]) and, once each of them is ready or has exited,
    `tasks`, until SIGINT or SIGTERM, restarting any that exits (after `on_exit(its pid)`); then
    stops them all and closes the sockets."""
    waiting: dict[int, int] = {}  # read end of a server's ready pipe -> its index

    def spawn_server(i: int) -> subprocess.Popen:
        # Each child leads its own process group, so that what it forked goes with it.
        ready, told = os.pipe()
        try:
            env = {**os.environ, "SERVE_READY_FD": str(told)}
            child = subprocess.Popen(servers[i], pass_fds=[sockets[i].fileno(), told], env=env, process_group=0,
                                     preexec_fn=stop_with(parent))
        except BaseException:
            os.close(ready)
            raise
        finally:
            os.close(told)
        waiting[ready] = i
        return child

    def spawn_task(command: list[str]) -> subprocess.Popen:
        return subprocess.Popen(command, process_group=0, preexec_fn=stop_with(parent))

    parent = os.getpid()

    children = [spawn_server(i) for i in range(len(servers))]
    started_tasks: list[subprocess.Popen] = []
    tasks_due = time.monotonic() + READY_SECONDS
    stopping = False

    def stop(signum, frame) -> None:  # noqa: ARG001
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping:
            if waiting:  # a byte (ready) or end of file (the server exited): it has started, either way
                for ready in select.select(list(waiting), [], [], 0)[0]:
                    del waiting[ready]
                    os.close(ready)
            if tasks and not started_tasks and (not waiting or time.monotonic() > tasks_due):
                started_tasks = [spawn_task(command) for command in tasks]
            for i, child in enumerate(children + started_tasks):
                if child.poll() is not None and not stopping:
                    stderr.write(f"child process {child.pid} exited ({child.returncode}); restarting\n")
                    kill_group(child)
                    on_exit(child.pid)
                    time.sleep(0.5)
                    if i < len(children):
                        children[i] = spawn_server(i)
                    else:
                        started_tasks[i - len(children)] = spawn_task(tasks[i - len(children)])
            time.sleep(0.05 if waiting else 0.2)
    finally:
        for ready in waiting:
            os.close(ready)
        everyone = children + started_tasks
        for child in everyone:
            if child.poll() is None:
                child.terminate()
        for child in everyone:
            try:
                child.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            kill_group(child)
        for sock in sockets:
            sock.close()


def stop_with(parent: int) -> Callable[[], None]:
    """Run in a child between fork and exec: it gets SIGTERM when `serve` dies, however it dies
    (Linux's PR_SET_PDEATHSIG, kept across exec). A `serve` killed with SIGKILL (the OOM killer,
    a supervisor's last resort) left its servers listening on the port, so the next `serve`
    failed with EADDRINUSE, and its task side running (seen after a test run: a qcluster and a
    server per killed `make run`). A child whose parent died before the call exits at once."""
    libc = ctypes.CDLL(None, use_errno=True)

    def stop_when_parent_dies() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return stop_when_parent_dies


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


def listening_sockets(host: str, port: int, count: int, *, release_seconds: float = RELEASE_SECONDS) -> list[socket.socket]:
    """`count` sockets listening on (host, port) with SO_REUSEPORT, one per daphne process.

    SO_REUSEPORT would also let this group join sockets that another process (of the same user)
    bound with it, such as a second `serve` started by mistake on the same port, and split its
    traffic silently. So the port is first bound once without it: a port in use fails with
    EADDRINUSE as it always did, and port 0 picks the port the group then shares.

    A port in use is tried again for `release_seconds` first: a killed `serve`'s processes
    release their sockets only as they finish exiting, after /proc shows them gone (the kernel
    frees a process's memory, and with it its command line, before its files), and one holding
    2,500 connections takes a moment to close them; a restart right after the kill (issue 26's
    storm, a supervisor's restart) failed with EADDRINUSE."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    def bound(port: int, *, reuse_port: bool) -> socket.socket:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        return sock

    give_up = time.monotonic() + release_seconds
    while True:
        try:
            probe = bound(port, reuse_port=False)
            break
        except OSError as error:
            if error.errno != errno.EADDRINUSE or time.monotonic() >= give_up:
                raise
            time.sleep(0.05)
    with probe:
        port = probe.getsockname()[1]
    sockets = [bound(port, reuse_port=True) for _ in range(count)]
    for sock in sockets:
        sock.listen(ACCEPT_QUEUE)
        sock.set_inheritable(True)
    return sockets
