"""A real threaded HTTP receiver for tests. Every request's signature is verified with the
code from docs/webhooks.md against the JWKS served over HTTP (the live server's, or a tiny
one this module serves from the test database's keys)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Callable

from tests import docs

DOC = docs.ROOT / "docs" / "webhooks.md"


def doc_receiver() -> ModuleType:
    """The receiver block of docs/webhooks.md, executed as a module."""
    return docs.run_block(DOC, "python receiver", name="doc_receiver")


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    event: dict | None
    peer_port: int = 0
    at: float = field(default_factory=time.monotonic)


class Receiver:
    """`behaviour(request_number) -> int | "hang" | ("redirect", url)`; default 204."""

    def __init__(self, jwks_url: str, behaviour: Callable[[int], object] | None = None, host: str = "127.0.0.1") -> None:
        self.doc = doc_receiver()
        self.keyset = self.doc.KeySet(jwks_url)
        self.behaviour = behaviour or (lambda n: 204)
        self.requests: list[Received] = []
        # The client port of each request as it arrives, before its signature is checked: the
        # check may first fetch the key set from the server, which under load can take longer
        # than the attempt's timeout (a test that kills the worker mid-attempt must find it
        # while the request is still open).
        self.arrivals: list[int] = []
        self.lock = threading.Lock()
        self.release = threading.Event()  # set to free requests held by "hang"
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                with receiver.lock:
                    receiver.arrivals.append(self.client_address[1])
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    event = receiver.doc.verify(receiver.keyset, self.headers.get("Svc-Signature"), body)
                    verified = True
                except receiver.doc.InvalidRequest:
                    event, verified = None, False
                with receiver.lock:
                    receiver.requests.append(
                        Received(self.path, dict(self.headers), body, verified, event, self.client_address[1])
                    )
                    number = len(receiver.requests)
                action = receiver.behaviour(number)
                if action == "hang":
                    receiver.release.wait(30)
                    action = 204
                self._status = 302 if isinstance(action, tuple) else int(action)
                if isinstance(action, tuple):
                    self.send_response(302)
                    self.send_header("Location", action[1])
                else:
                    self.send_response(int(action))
                # A 204 has no body (RFC 9110 §15.3.5): bytes after it would be read as the
                # start of the next response on this keep-alive connection.
                body = b"" if int(self._status) == 204 else b"ok"
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for_arrivals(self, count: int, timeout: float = 30) -> list[int]:
        """The client ports of the first `count` requests, as soon as they arrive (unverified)."""
        return self._wait(self.arrivals, count, timeout, "to arrive")

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        return self._wait(self.requests, count, timeout, "recorded")

    def _wait(self, items: list, count: int, timeout: float, what: str) -> list:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(items) >= count:
                    return list(items)
            time.sleep(0.01)
        raise AssertionError(f"expected {count} requests {what}, got {len(items)}")

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class JwksServer:
    """Serves the test database's published keys over HTTP, like /.well-known/webhook-signing-keys.json
    (read in the test's thread: `refresh()` after a rotation)."""

    def __init__(self) -> None:
        self.refresh()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def refresh(self) -> None:
        from apps.webhooks import keys

        self.document = keys.jwks()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
