"""Faults for the live event-stream tests: a redis-server of the test's own on a free port that
can be killed with SIGKILL and started again on the same port, and the termination of a live
server's PostgreSQL backends."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from django.db import connection

from tests.servers import LiveServer, descendants, free_port

REDIS_SERVER = shutil.which("redis-server")
START_SECONDS = 30


class RedisServer:
    """`redis-server --port <free> --save ''` as a subprocess: no persistence, so a restart is
    an empty Redis, as after a crash of a cache-only deployment."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.log_dir = log_dir
        self.process: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.log_dir / f"redis-{self.port}.log").open("a")
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_SECONDS
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on {self.port}; see {log.name}")
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no goodbye to any client, as when the machine or the container dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


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
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    resume = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id else ""
    sock.sendall(
        f"GET /api/v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"{resume}\r\n".encode()
    )
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(1)
        assert chunk, "connection closed before headers"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


def read_until(sock: socket.socket, *needles: bytes, timeout: float = 20) -> bytes:
    """What the stream sent until every needle was seen (fails on EOF or after `timeout`)."""
    sock.settimeout(timeout)
    received = b""
    while not all(needle in received for needle in needles):
        chunk = sock.recv(65536)
        assert chunk, f"stream ended before {needles}"
        received += chunk
    return received
