"""A real threaded HTTP receiver for tests, REST's endpoints' and MCP event subscriptions' alike.
Every request's `Svc-Signature` is verified with the code from docs/webhooks.md against the JWKS
served over HTTP (the live server's, or a tiny one this module serves from the test database's
keys); a test checks the Standard Webhooks signature itself, with the secret it chose. An MCP
subscription's verification envelope is answered as `verification` says."""

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

    @property
    def json(self) -> dict:
        return json.loads(self.body)


class Receiver:
    """`behaviour(request_number) -> int | "hang" | ("redirect", url)`; default 204. `by_path`
    answers a request to one of its paths first. `verification`: how a `{"type": "verification"}`
    body (the MCP Events handshake) is answered: "echo" its challenge in a 200, "ignore" it (200
    without it), "fail" (500); None: like any other request."""

    def __init__(self, jwks_url: str, behaviour: Callable[[int], object] | None = None, host: str = "127.0.0.1",
                 verification: str | None = None, path: str = "/hook") -> None:
        self.doc = doc_receiver()
        self.keyset = self.doc.KeySet(jwks_url)
        self.behaviour = behaviour or (lambda n: 204)
        self.by_path: dict[str, object] = {}
        self.verification = verification
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
                received = Received(self.path, dict(self.headers), body, verified, event, self.client_address[1])
                with receiver.lock:
                    receiver.requests.append(received)
                    number = len(receiver.requests)
                challenge = receiver.challenge_of(received)
                if challenge is not None:
                    action = {"echo": (200, json.dumps({"challenge": challenge}).encode()), "ignore": (200, b"{}"),
                              "fail": 500}[receiver.verification]
                else:
                    action = receiver.by_path.get(self.path) or receiver.behaviour(number)
                if action == "hang":
                    receiver.release.wait(30)
                    action = 204
                answer, kind = b"ok", "text/plain"
                if isinstance(action, tuple) and action[0] == "redirect":
                    self.send_response(302)
                    self.send_header("Location", action[1])
                    status = 302
                else:
                    if isinstance(action, tuple):  # (status, a JSON body)
                        status, answer, kind = action[0], action[1], "application/json"
                    else:
                        status = int(action)
                    self.send_response(status)
                # A 204 has no body (RFC 9110 §15.3.5): bytes after it would be read as the
                # start of the next response on this keep-alive connection.
                answer = b"" if status == 204 else answer
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = f"http://{host}:{self.port}"
        self.url = f"{self.base}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for_arrivals(self, count: int, timeout: float = 30) -> list[int]:
        """The client ports of the first `count` requests, as soon as they arrive (unverified)."""
        return self._wait(self.arrivals, count, timeout, "to arrive")

    def wait_for(self, count: int, timeout: float = 30) -> list[Received]:
        return self._wait(self.requests, count, timeout, "recorded")

    def challenge_of(self, received: Received) -> str | None:
        """The challenge of an MCP verification envelope this receiver answers, else None."""
        if self.verification is None:
            return None
        try:
            body = received.json
        except ValueError:
            return None
        return body.get("challenge") if isinstance(body, dict) and body.get("type") == "verification" else None

    def of_type(self, kind: str | None) -> list[Received]:
        """Requests whose JSON body is an MCP control envelope of `kind`, or (None) an MCP event
        occurrence (a REST delivery's body has a `type` too: the event's)."""
        with self.lock:
            return [r for r in self.requests if r.json.get("type") == kind]

    def wait_for_events(self, count: int, timeout: float = 90) -> list[Received]:
        """The first `count` event bodies (no control envelope) once they have arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.of_type(None)
            if len(events) >= count:
                return events
            time.sleep(0.05)
        raise AssertionError(f"expected {count} event bodies, got {len(self.of_type(None))}")

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
