"""`serve`'s process and socket management: N daphne processes listening on one port, and the
task side beside them, supervised until SIGINT/SIGTERM (docs/decisions/serve-liveness.md).

- Each server has its own SO_REUSEPORT socket of the port, held by `serve` across restarts, so
  connections queued on it wait for the next server; the server listens on it itself once its
  application is built (a socket only bound is not in the kernel's group).
- Each server beats a byte a second on the pipe named by `SERVE_READY_FD`; the task side starts
  once every server has beaten once or exited. A server silent for `liveness_seconds` (frozen)
  is killed and replaced, as is one that exits; a silent server's socket is closed at once and
  its replacement gets a fresh one, not yet listening, so new connections go to the others.
- Each child leads a process group, killed whole if it has not stopped STOP_SECONDS after the
  stop began (one deadline for all), and gets SIGTERM when `serve` dies (PR_SET_PDEATHSIG).

Relies on: daphne's `--fd` (Twisted's `fd:` endpoint), Linux's SO_REUSEPORT and PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

STOP_SECONDS = 10
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
READY_SECONDS = 60  # the task side starts anyway if a server is not ready by then
# The deepest accept queue the kernel allows (capped at net.core.somaxconn): clients reconnecting
# at once after a restart overflow a shallow one, and each dropped handshake waits for the
# client's retransmission.
ACCEPT_QUEUE = 65535
RELEASE_SECONDS = 5.0  # how long a port in use is tried again (`listening_sockets`)
TICK_SECONDS = 0.2  # the supervising loop's pace; a much longer gap means `serve` did not run
RESTART_PAUSE_SECONDS = 0.5  # between a child's end and its replacement: no restart storm


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
    on_exit: Callable[[int], object] = lambda pid: None,
    liveness_seconds: float | None = None,
) -> None:
    """Runs `servers` (the i-th with sockets[i]) and, once each of them is ready or has exited,
    `tasks`, until SIGINT or SIGTERM, replacing any that exits or, with `liveness_seconds`, any
    server silent that long (after `on_exit(its pid)`; a silent one's entry of `sockets` is
    replaced by `unlisted_like` it); then stops them all and closes the sockets."""
    pipes: dict[int, int] = {}  # read end of a server's heartbeat pipe -> its index
    unready: set[int] = set()  # servers that have neither written their first byte nor exited
    heard: dict[int, float] = {}  # index -> when its server last wrote, from its first byte on

    def spawn_server(i: int) -> subprocess.Popen:
        # Each child leads its own process group, so that what it forked goes with it.
        heartbeat, told = os.pipe()
        try:
            env = {**os.environ, "SERVE_READY_FD": str(told)}
            child = subprocess.Popen(servers[i], pass_fds=[sockets[i].fileno(), told], env=env, process_group=0,
                                     preexec_fn=stop_with(parent))
        except BaseException:
            os.close(heartbeat)
            raise
        finally:
            os.close(told)
        pipes[heartbeat] = i
        unready.add(i)
        heard.pop(i, None)
        return child

    def close_pipe_of(i: int) -> None:
        for heartbeat, index in list(pipes.items()):
            if index == i:
                del pipes[heartbeat]
                os.close(heartbeat)

    def spawn_task(command: list[str]) -> subprocess.Popen:
        return subprocess.Popen(command, process_group=0, preexec_fn=stop_with(parent))

    def listen(now: float) -> None:
        """Reads what the servers wrote: a byte says alive (the first, ready), end of file exited."""
        for heartbeat in select.select(list(pipes), [], [], 0)[0]:
            i = pipes[heartbeat]
            unready.discard(i)
            if os.read(heartbeat, 4096):
                heard[i] = now
            else:
                del pipes[heartbeat]
                os.close(heartbeat)
                heard.pop(i, None)

    def ended(child: subprocess.Popen) -> bool:
        if child.poll() is None:
            return False
        logger.warning("child process %d exited (%s); restarting", child.pid, child.returncode)
        return True

    def silent(i: int, child: subprocess.Popen, now: float) -> bool:
        if not liveness_seconds or i not in heard or now - heard[i] <= liveness_seconds:
            return False
        logger.error("server process %d silent for %.0f s; killing and restarting it", child.pid, now - heard[i])
        return True

    def end(child: subprocess.Popen, *, renew_socket_of: int | None = None) -> None:
        kill_group(child)
        if renew_socket_of is not None:
            sockets[renew_socket_of] = unlisted_like(sockets[renew_socket_of])
        on_exit(child.pid)
        time.sleep(RESTART_PAUSE_SECONDS)

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
    last_tick = time.monotonic()
    try:
        while not stopping:
            now = time.monotonic()
            if now - last_tick > 5 * TICK_SECONDS:  # `serve` itself was stopped or starved meanwhile
                for i in heard:
                    heard[i] += now - last_tick
            last_tick = now
            listen(now)
            if tasks and not started_tasks and (not unready or now > tasks_due):
                started_tasks = [spawn_task(command) for command in tasks]
            for i, child in enumerate(children):
                if stopping:
                    break
                if ended(child):
                    end(child)
                elif silent(i, child, now):
                    end(child, renew_socket_of=i)
                else:
                    continue
                close_pipe_of(i)
                children[i] = spawn_server(i)
            for i, child in enumerate(started_tasks):
                if not stopping and ended(child):
                    end(child)
                    started_tasks[i] = spawn_task(tasks[i])
            time.sleep(TICK_SECONDS / 4 if unready else TICK_SECONDS)
    finally:
        for heartbeat in pipes:
            os.close(heartbeat)
        everyone = children + started_tasks
        for child in everyone:
            if child.poll() is None:
                child.terminate()
        # One deadline for them all: waiting STOP_SECONDS for each in turn let a stop take a
        # multiple of it, long enough for a supervisor to kill `serve` first and leave the
        # children's own children (the task cluster's sentinel and workers) running, orphaned.
        deadline = time.monotonic() + STOP_SECONDS
        for child in everyone:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
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
    release their sockets only as they finish exiting (after /proc shows them gone), and a
    restart right after the kill would otherwise fail with EADDRINUSE."""
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


def unlisted_like(sock: socket.socket) -> socket.socket:
    """Closes `sock` and returns a socket bound to its address with SO_REUSEPORT, not listening,
    at its descriptor number (the server's command line names it).

    Closing takes `sock` out of the kernel's group at once, so new connections go to the other
    servers; the connections queued on it are reset (they have waited a whole liveness period
    for a process that did not accept). A socket that is only bound is not in the group: the
    replacement joins when it calls listen() itself, once it can serve; being bound, the port
    stays ours meanwhile (with one server, new connections are refused until then)."""
    fresh = socket.socket(sock.family, sock.type)
    try:
        fresh.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        fresh.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        fresh.bind(sock.getsockname())
        number = sock.detach()
        os.dup2(fresh.fileno(), number)  # closes the old socket, atomically
    finally:
        fresh.close()
    return socket.socket(fileno=number)
