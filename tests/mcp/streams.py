"""Helpers for the /mcp stream tests: request bodies and headers as a 2026-07-28 (or 2025)
client sends them, an SSE reader of a POST answer on its own thread, and a listen opened on a
bare socket for clients that vanish."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.events.live import WAIT

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"}}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def listen_body(request_id: Any = 1, *, uris: list[str] = (), list_changed: bool | None = None,
                meta: dict | None = None, **extra) -> dict:
    notifications: dict[str, Any] = {"resourceSubscriptions": list(uris)}
    if list_changed is not None:
        notifications["resourcesListChanged"] = list_changed
    notifications.update(extra)
    return {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
            "params": {"_meta": {**META, **(meta or {})}, "notifications": notifications}}


def events_body(request_id: Any = 1, *, name: str, arguments: dict | None = None, cursor: str | None = None,
                modern: bool = True) -> dict:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}, "cursor": cursor}
    if modern:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": request_id, "method": "events/stream", "params": params}


def headers_for(key: str | None, body: dict, *, version: str | None = MODERN, **extra: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if version:
        headers["MCP-Protocol-Version"] = version
        if version == MODERN:
            headers["Mcp-Method"] = body["method"]
    headers.update(extra)
    return headers


def post(url: str, key: str | None, body: dict, **kw) -> httpx.Response:
    """A streaming request expected to be refused: its JSON answer."""
    return httpx.post(f"{url}/mcp", content=json.dumps(body), headers=headers_for(key, body, **kw), timeout=30)


@dataclass
class StreamReader:
    """A POST to /mcp answered with SSE, read on its own thread: `messages` (JSON-RPC, with the
    SSE id as `_sse_id`), `comments`, `status`, `body` (when refused), `ended`."""

    url: str
    key: str
    body: dict
    extra_headers: dict = field(default_factory=dict)
    status: int | None = None
    headers: dict = field(default_factory=dict)
    refused: bytes = b""
    messages: list = field(default_factory=list)
    comments: list = field(default_factory=list)
    ended: bool = False

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=60))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.wait(lambda r: r.status is not None, what="response status")

    def _run(self) -> None:
        headers = headers_for(self.key, self.body, **self.extra_headers)
        try:
            with self._client.stream("POST", f"{self.url}/mcp", content=json.dumps(self.body),
                                     headers=headers) as response:
                with self._cond:
                    self.status, self.headers = response.status_code, dict(response.headers)
                    self._cond.notify_all()
                if response.status_code != 200 or not response.headers["content-type"].startswith("text/event-stream"):
                    self.refused = response.read()
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
        with self._cond:
            fields: dict[str, str] = {}
            for line in lines:
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(": ")
                fields[name] = value
            if "data" in fields:
                message = json.loads(fields["data"])
                message["_sse_id"] = fields.get("id")
                self.messages.append(message)
            self._cond.notify_all()

    def wait(self, predicate, *, what: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; messages={self.messages[-5:]}")
                self._cond.wait(remaining)

    def of(self, method: str) -> list[dict]:
        with self._cond:
            return [m for m in self.messages if m.get("method") == method]

    def wait_for(self, method: str, n: int, timeout: float = WAIT) -> list[dict]:
        self.wait(lambda r: len(r.of(method)) >= n, what=f"{n} {method}", timeout=timeout)
        return self.of(method)

    def close(self) -> None:
        self._client.close()
        self._thread.join(timeout=10)


def raw_listen(port: int, key: str, body: dict, *, last_event_id: str | None = None) -> socket.socket:
    """A listen opened on a bare socket: returns once the 200 headers arrived."""
    sock = socket.socket()
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    payload = json.dumps(body).encode()
    headers = headers_for(key, body, **({"Last-Event-ID": last_event_id} if last_event_id else {}))
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(payload)}\r\n\r\n".encode()
                 + payload)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(1)
        assert chunk, "connection closed before headers"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock
