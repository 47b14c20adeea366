"""Helpers for the live event-stream tests: `manage.py serve` instances with small stream
settings, SSE readers over httpx on their own threads, and raw sockets for clients that
misbehave (stop reading, vanish)."""

from __future__ import annotations

import functools
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from django.conf import settings

from tests import servers
from tests.servers import ROOT, LiveServer, server_env, start

STREAM = "/api/v1/events/stream"
WAIT = 60  # seconds any single wait in these tests may take before it fails (a long transaction
# anywhere in the PostgreSQL cluster holds the log horizon, and with it live delivery, back)


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
class SseEvent:
    id: str | None
    event: str | None
    data: str

    @property
    def json(self) -> dict:
        return json.loads(self.data)


@dataclass
class Reader:
    """An SSE client on its own thread: `events`, `comments`, `status`, `body` (on error)."""

    url: str
    key: str
    params: dict = field(default_factory=dict)
    last_event_id: str | None = None
    status: int | None = None
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    events: list = field(default_factory=list)
    comments: list = field(default_factory=list)
    ended: bool = False
    raw_frames: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=30))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.wait(lambda r: r.status is not None, what="response status")

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        try:
            with self._client.stream("GET", self.url + STREAM, params=self.params, headers=headers) as response:
                with self._cond:
                    self.status, self.headers = response.status_code, dict(response.headers)
                    self._cond.notify_all()
                if response.status_code != 200:
                    self.body = response.read()
                    return
                frame: list[str] = []
                for line in response.iter_lines():
                    if line == "":
                        self._frame(frame)
                        frame = []
                    else:
                        frame.append(line)
        except (httpx.HTTPError, RuntimeError, ValueError):
            pass
        finally:
            with self._cond:
                self.ended = True
                if self.status is None:
                    self.status = -1
                self._cond.notify_all()

    def _frame(self, lines: list[str]) -> None:
        if not lines:
            return
        with self._cond:
            self.raw_frames.append(lines)
            if all(line.startswith(":") for line in lines):
                self.comments.extend(line[1:].strip() for line in lines)
            else:
                fields = {}
                for line in lines:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                self.events.append(SseEvent(fields.get("id"), fields.get("event"), fields.get("data", "")))
            self._cond.notify_all()

    def wait(self, predicate, *, what: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; events={[e.event for e in self.events]}")
                self._cond.wait(remaining)

    def wait_events(self, n: int, **kw) -> list[SseEvent]:
        self.wait(lambda r: len(r.events) >= n, what=f"{n} events", **kw)
        return list(self.events)

    def types(self) -> list[str]:
        return [e.event for e in self.events]

    def close(self) -> None:
        self._client.close()
        self._thread.join(timeout=10)


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
