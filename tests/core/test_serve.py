"""`serve --workers N`: N daphne processes, each on its own SO_REUSEPORT socket of one port, so
the kernel spreads connections across them; a port in use still fails."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from engine.serve import ACCEPT_QUEUE, listening_sockets
from tests.servers import alive, cmdline_of, descendants, parent_of, serve, start, wait_until


def test_each_process_gets_its_own_socket_on_one_port():
    sockets = listening_sockets("127.0.0.1", 0, 3)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(ports) == 1 and 0 not in ports
        assert len({sock.fileno() for sock in sockets}) == 3
        assert all(sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) for sock in sockets)
        assert all(sock.get_inheritable() for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize("reuse_port", [False, True])
def test_a_port_in_use_is_refused_even_by_a_reuse_port_listener(reuse_port):
    """Another `serve` on the same port (its sockets have SO_REUSEPORT too) must not be joined."""
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if reuse_port:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    try:
        with pytest.raises(OSError) as refused:
            listening_sockets("127.0.0.1", other.getsockname()[1], 2, release_seconds=0.3)
        assert refused.value.errno == errno.EADDRINUSE
    finally:
        other.close()


def test_a_port_released_soon_after_is_taken():
    """A killed `serve`'s processes hold the port until they have finished exiting: the next
    `serve` waits for it (up to RELEASE_SECONDS) instead of failing at once."""
    other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    other.bind(("127.0.0.1", 0))
    other.listen(8)
    port = other.getsockname()[1]
    threading.Timer(0.5, other.close).start()
    sockets = listening_sockets("127.0.0.1", port, 2, release_seconds=60)
    try:
        assert [sock.getsockname()[1] for sock in sockets] == [port, port]
        assert other.fileno() == -1  # taken only once the other listener was gone
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.e2e
def test_connections_are_spread_over_both_processes(tmp_path, transactional_db):
    with serve(tmp_path, workers=2) as server:
        processes = []
        for _ in range(32):  # 32 connections: each lands on either socket by hash
            with httpx.Client(base_url=server.url, timeout=30) as client:
                processes.append(client.get("/test/thread").json()["process"])
    assert len(set(processes)) == 2, processes


@pytest.mark.e2e
def test_stopping_leaves_no_process_behind_even_when_a_child_does_not_stop(tmp_path, transactional_db):
    """django-q2's qcluster forks its sentinel, which forks workers, a monitor and a pusher. A
    qcluster that does not stop in time is killed; before, its sentinel and workers were left
    running, orphaned, with their database connections (seen after the test suite: a sentinel
    holding three sessions on the test database, so that it could not be dropped)."""
    server = start(tmp_path, tasks=True)
    try:
        wait = time.monotonic() + 60
        while time.monotonic() < wait and sum(b"qcluster" in cmdline_of(p) for p in descendants(server.process.pid)) < 4:
            time.sleep(0.2)  # the sentinel and its children are up
        qcluster = next(p for p in descendants(server.process.pid)
                        if b"qcluster" in cmdline_of(p) and parent_of(p) == server.process.pid)  # fmt: skip
        family = descendants(server.process.pid)
        assert sum(b"qcluster" in cmdline_of(p) for p in family) >= 4
        os.kill(qcluster, signal.SIGSTOP)  # it cannot stop gracefully now
    finally:
        server.stop()
    time.sleep(1)
    assert [p for p in family if alive(p)] == []



def test_each_socket_has_the_deepest_accept_queue_the_kernel_allows():
    """5,000 clients reconnecting at once overflowed an accept queue of 1,024 per socket: a
    handshake that found it full waited for the client's retransmission (a second or more)."""
    if shutil.which("ss") is None:
        pytest.skip("needs iproute2's ss to read a listening socket's queue length")
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    sockets = listening_sockets("127.0.0.1", 0, 2)
    try:
        port = sockets[0].getsockname()[1]
        listed = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
        queues = [int(line.split()[2]) for line in listed.stdout.splitlines()]  # Send-Q of a listener: its backlog
        assert queues == [min(ACCEPT_QUEUE, somaxconn)] * 2
    finally:
        for sock in sockets:
            sock.close()


SUPERVISED = """
import sys, time
from engine import serve
serve.READY_SECONDS = float(sys.argv[1])
servers = [[sys.executable, "-c", sys.argv[2], sys.argv[4] + "-" + str(i)] for i in range(2)]
tasks = [[sys.executable, "-c", sys.argv[3], sys.argv[4] + "-task"]]
serve.supervise(servers, serve.listening_sockets("127.0.0.1", 0, 2), tasks)
"""
RECORD = "import os, sys, time; open(sys.argv[1], 'a').write(f'{time.time()!r}\\n'); "
READY_AFTER_A_WHILE = RECORD + (
    "time.sleep(1); open(sys.argv[1], 'a').write(f'{time.time()!r}\\n'); "
    "os.write(int(os.environ['SERVE_READY_FD']), b'.'); time.sleep(600)"
)
EXITS = "import sys; sys.exit(3)"
NEVER_READY = "import time; time.sleep(600)"
TASK = RECORD + "time.sleep(600)"


def _supervise(tmp_path, server: str, *, ready_seconds: float = 60) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SUPERVISED, str(ready_seconds), server, TASK, str(tmp_path / "ran")],
        cwd=Path(__file__).resolve().parents[2], start_new_session=True,
    )


def _times(path: Path) -> list[float]:
    return [float(line) for line in path.read_text().split()] if path.exists() else []


def _stop(supervisor: subprocess.Popen) -> None:
    supervisor.terminate()
    supervisor.wait(timeout=30)


def test_the_task_side_starts_once_every_server_serves(tmp_path):
    """The qcluster and the sweeper (each a Django set-up) started beside the servers took half
    of a 2-core machine while they started; now they wait for each server's ready byte."""
    supervisor = _supervise(tmp_path, READY_AFTER_A_WHILE)
    try:
        wait_until(lambda: _times(tmp_path / "ran-task"), what="the task side", timeout=60)
        started = _times(tmp_path / "ran-task")[0]
        for i in range(2):
            began, ready = _times(tmp_path / f"ran-{i}")  # both servers said ready before the task began
            assert began < ready < started
    finally:
        _stop(supervisor)


def test_a_server_that_exits_before_serving_does_not_hold_the_task_side(tmp_path):
    supervisor = _supervise(tmp_path, EXITS)
    try:
        wait_until(lambda: _times(tmp_path / "ran-task"), what="the task side", timeout=60)
    finally:
        _stop(supervisor)


def test_a_server_that_never_says_it_serves_holds_the_task_side_for_a_while_only(tmp_path):
    supervisor = _supervise(tmp_path, NEVER_READY, ready_seconds=1)
    try:
        wait_until(lambda: _times(tmp_path / "ran-task"), what="the task side", timeout=60)
        assert supervisor.poll() is None
    finally:
        _stop(supervisor)


@pytest.mark.e2e
def test_the_supervising_process_does_not_set_django_up(tmp_path, transactional_db):
    """`manage.py serve` only reads settings; its servers each set Django up (a second or more
    saved on every restart). orjson is imported by the application only."""
    with serve(tmp_path, workers=2) as server:
        wait_until(lambda: len([p for p in descendants(server.process.pid) if b"daphne" in cmdline_of(p)]) == 2,
                   what="both servers", timeout=60)
        servers = [p for p in descendants(server.process.pid) if b"daphne" in cmdline_of(p)]
        assert all("orjson" in _mapped(p) for p in servers)
        assert "orjson" not in _mapped(server.process.pid)


def _mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.e2e
def test_a_killed_serve_takes_its_servers_and_task_side_with_it(tmp_path, transactional_db):
    """SIGKILL cannot be caught: the children are told by the kernel (PR_SET_PDEATHSIG). Before,
    they kept the port (the next `serve` failed with EADDRINUSE) and the task side ran on."""
    server = start(tmp_path, workers=2, tasks=True)
    try:
        wait_until(lambda: sum(b"qcluster" in cmdline_of(p) for p in descendants(server.process.pid)) >= 2
                   and any(b"sweep_webhook_deliveries" in cmdline_of(p) for p in descendants(server.process.pid)),
                   what="the task side", timeout=60)
        family = descendants(server.process.pid)
        assert sum(b"daphne" in cmdline_of(p) for p in family) == 2
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        wait_until(lambda: not [p for p in family if alive(p)], what="every child of the killed serve gone", timeout=60)
        again = start(tmp_path, port=server.port)  # the port is free again
        again.stop()
    finally:
        for pid in [p for p in descendants(server.process.pid) if alive(p)]:
            os.kill(pid, signal.SIGKILL)
        server.stop()
