"""Helpers for the /mcp stream tests: request bodies and headers as a 2026-07-28 (or 2025)
client sends them, the SSE reader of a POST answer (tests/sse_reader.py), and a listen opened
on a bare socket for clients that vanish."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx

from tests.sse_reader import WAIT, SseEvent, SseReader

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
class StreamReader(SseReader):
    """A POST to /mcp answered with SSE, read on its own thread (tests/sse_reader.py):
    `messages` (JSON-RPC, with the SSE id as `_sse_id`), `comments`, `status`, `refused` (the
    body of an answer that is not an event stream), `ended`."""

    url: str
    key: str
    body: dict
    extra_headers: dict = field(default_factory=dict)
    refused: bytes = b""
    messages: list = field(default_factory=list)

    read_timeout = 60.0

    def __post_init__(self) -> None:
        self.start()

    def open(self, client: httpx.Client):
        headers = headers_for(self.key, self.body, **self.extra_headers)
        return client.stream("POST", f"{self.url}/mcp", content=json.dumps(self.body), headers=headers)

    def refused_with(self, body: bytes) -> None:
        self.refused = body

    def on_event(self, event: SseEvent) -> None:
        if event.data:
            message = json.loads(event.data)
            message["_sse_id"] = event.id
            self.messages.append(message)

    def progress(self) -> str:
        return f"messages={self.messages[-5:]}"

    def of(self, method: str) -> list[dict]:
        with self._cond:
            return [m for m in self.messages if m.get("method") == method]

    def wait_for(self, method: str, n: int, timeout: float = WAIT) -> list[dict]:
        self.wait(lambda r: len(r.of(method)) >= n, what=f"{n} {method}", timeout=timeout)
        return self.of(method)


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


UPDATED = "notifications/resources/updated"


def read_updates(sock: socket.socket, into: list, until: int, keep: Callable[[dict], Any] = lambda m: m) -> None:
    """Reads `notifications/resources/updated` off a raw listen socket (`raw_listen`) until
    `until` of them are in `into`, each as `keep` makes it."""
    buffer = b""
    while len(into) < until:
        chunk = sock.recv(65536)
        assert chunk, "stream ended"
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            data = [line[6:] for line in frame.split(b"\n") if line.startswith(b"data: ")]
            message = json.loads(data[0]) if data else {}
            if message.get("method") == UPDATED:
                into.append(keep(message))
