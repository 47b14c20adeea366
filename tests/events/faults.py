"""Faults for the live event-stream tests: a redis-server of the test's own on a free port that
can be killed with SIGKILL and started again on the same port (tests/redis_server.py), and the
termination of a live server's PostgreSQL backends."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from django.db import connection

from tests.events.live import raw_stream
from tests.redis_server import REDIS_SERVER, RedisServer  # noqa: F401 (the stream fault tests' Redis)
from tests.servers import LiveServer, descendants


def terminate_backends(application_name: str) -> int:
    """`pg_terminate_backend` on every connection of this test database that names itself
    `application_name` (a live server's, pooled ones and the hub threads' included; never this
    process's); returns how many were ended."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s AND pid <> pg_backend_pid()) AS ended",
            [application_name],
        )
        return cursor.fetchone()[0]


def backends(application_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            [application_name],
        )
        return cursor.fetchone()[0]


def client_sockets(server: LiveServer) -> int:
    """Sockets the server's daphne processes hold for client connections on its port (any TCP
    state but LISTEN). Unlike all descriptors, this does not move with the database pool's size."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == server.port and fields[3] != "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    held = 0
    for pid in descendants(server.process.pid):
        try:
            if b"daphne" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    held += 1
        except OSError:
            continue
    return held


def raw_resume(port: int, key: str, last_event_id: str | None) -> socket.socket:
    """A stream opened (resumed after `last_event_id`, if given) on a bare socket, so the test
    can vanish with a reset (`live.abort`); returns once the 200 headers arrived."""
    return raw_stream(port, key, last_event_id=last_event_id)


def read_until(sock: socket.socket, *needles: bytes, timeout: float = 60) -> bytes:
    """What the stream sent until every needle was seen (fails on EOF or after `timeout`)."""
    sock.settimeout(timeout)
    received = b""
    while not all(needle in received for needle in needles):
        chunk = sock.recv(65536)
        assert chunk, f"stream ended before {needles}"
        received += chunk
    return received
