"""Helpers for the live event-stream tests: `manage.py serve` instances with small stream
settings, the event stream's SSE reader (tests/sse_reader.py, opened with a GET), and raw
sockets for clients that misbehave (stop reading, vanish)."""

from __future__ import annotations

import functools
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from django.conf import settings

from tests import servers
from tests.servers import ROOT, LiveServer, server_env, start
from tests.sse_reader import WAIT, SseEvent, SseReader

STREAM = "/api/v1/events/stream"


STREAM_ENV = {
    "CONNECT_SSE_HEARTBEAT_SECONDS": "1",
    "CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE": "3",
    "CONNECT_SSE_QUEUE_EVENTS": "40",
}


class Server(LiveServer):
    def stats(self) -> dict:
        return httpx.get(f"{self.url}/api/v1/events/_stats", timeout=5).json()


def start_server(log_dir: Path, *, port: int | None = None, **overrides: str) -> Server:
    """An instance with small stream limits. Every instance names the test settings' base URL:
    two instances on different ports are one service."""
    return start(log_dir, port=port, base_url=settings.CONNECT_BASE_URL, env={**STREAM_ENV, **overrides}, kind=Server)


def simulate(slug: str, *, sessions: int = 1, segments: int = 2, interval: float = 0.02) -> str:
    """Run `simulate_activity` as its own process against the test database."""
    result = subprocess.run(
        [sys.executable, "manage.py", "simulate_activity", slug, "--sessions", str(sessions),
         "--segments", str(segments), "--interval", str(interval)],
        cwd=ROOT, env=server_env(**STREAM_ENV), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@dataclass
class Reader(SseReader):
    """The event stream read on its own thread (tests/sse_reader.py): `events`, `comments`,
    `raw_frames`, `status`, `body` (when refused)."""

    url: str
    key: str
    params: dict = field(default_factory=dict)
    last_event_id: str | None = None
    body: bytes = b""

    def __post_init__(self) -> None:
        self.start()

    def open(self, client: httpx.Client):
        headers = {"Authorization": f"Bearer {self.key}"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        return client.stream("GET", self.url + STREAM, params=self.params, headers=headers)

    def refused_with(self, body: bytes) -> None:
        self.body = body

    def wait_events(self, n: int, **kw) -> list[SseEvent]:
        self.wait(lambda r: len(r.events) >= n, what=f"{n} events", **kw)
        return list(self.events)

    def types(self) -> list[str]:
        return [e.event for e in self.events]


def raw_stream(port: int, key: str, *, rcvbuf: int | None = None, path: str = STREAM,
               last_event_id: str | None = None) -> socket.socket:
    """A stream opened (resumed after `last_event_id`, if given) on a bare socket: returns once
    the 200 headers arrived; nothing more is read."""
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    resume = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id else ""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n{resume}\r\n".encode())
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(1)
        assert chunk, "connection closed before headers"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


def abort(sock: socket.socket) -> None:
    """Vanish without a goodbye: SO_LINGER 0 makes close() send a reset."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# Polls a condition for at most one of these tests' waits.
wait_until = functools.partial(servers.wait_until, timeout=WAIT, every=0.1)
