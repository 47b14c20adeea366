"""`serve --workers N`: N daphne processes, each on its own SO_REUSEPORT socket of one port, so
the kernel spreads connections across them; a port in use still fails."""

from __future__ import annotations

import errno
import os
import signal
import socket
import time

import httpx
import pytest

from connect.engine.serve import listening_sockets
from tests.servers import alive, cmdline_of, descendants, parent_of, serve, start


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
            listening_sockets("127.0.0.1", other.getsockname()[1], 2)
        assert refused.value.errno == errno.EADDRINUSE
    finally:
        other.close()


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

