"""Every answer is ours: a request head daphne's HTTP parser refuses gets our JSON `400
invalid_request` with a detail and a request id (engine/http_limits.py), not Twisted's
bare `400`; tried with raw bytes on a live `serve`, as a client that builds its own head would
send them."""

from __future__ import annotations

import json
import re
import socket

import httpx
import pytest

from engine.http_limits import DETAILS
from tests.servers import serve

pytestmark = pytest.mark.e2e

FRESH = re.compile(r"req_[0-9a-f]{24}")
HOST = b"Host: 127.0.0.1\r\n"


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    with serve(tmp_path_factory.mktemp("heads")) as live:
        yield live


def exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Sends `request` on a raw socket, reads until the server closes; the status, the headers
    (lower-cased names) and the body."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("ascii").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split(" ")[1]), headers, body


MALFORMED = {
    "non-ASCII target": ("GET /api/v1/transcripts/search?query=café HTTP/1.1\r\n".encode() + HOST + b"\r\n",
                         "request line"),
    "not a request line": (b"GET /healthz\r\n" + HOST + b"\r\n", "request line"),
    "CR in a header value": (b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Note: one\rtwo\r\n\r\n", "header"),
    "header name not a token": (b"GET /healthz HTTP/1.1\r\n" + HOST + b"X Note: one\r\n\r\n", "header"),
    "Content-Length with Transfer-Encoding": (
        b"POST /api/v1/webhooks HTTP/1.1\r\n" + HOST
        + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "framing"),
    "negative Content-Length": (b"POST /api/v1/webhooks HTTP/1.1\r\n" + HOST + b"Content-Length: -1\r\n\r\n",
                                "framing"),
    "malformed chunk": (b"POST /api/v1/webhooks HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
                        "body"),
}  # fmt: skip


@pytest.mark.parametrize("request_bytes, part", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_head_is_our_json_400_with_a_request_id(server, request_bytes, part):
    status, headers, body = exchange(server.url, request_bytes)
    assert status == 400
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    answer = json.loads(body)
    assert answer == {"error": "invalid_request", "detail": DETAILS[part], "requestId": headers["x-request-id"]}
    assert FRESH.fullmatch(answer["requestId"])
    assert int(headers["content-length"]) == len(body)


def test_the_detail_never_echoes_what_was_sent(server):
    secret = "s3cr3t-t0ken-value"
    _, _, body = exchange(server.url, f"GET /healthz?token={secret}é HTTP/1.1\r\n".encode() + HOST + b"\r\n")
    assert secret.encode() not in body and "é".encode() not in body


def test_each_refusal_has_its_own_id_and_the_server_serves_on(server):
    ids = {exchange(server.url, MALFORMED["negative Content-Length"][0])[1]["x-request-id"] for _ in range(3)}
    assert len(ids) == 3
    assert httpx.get(f"{server.url}/healthz", timeout=60).status_code == 200
    # The same search, percent-encoded as the detail asks, reaches the application.
    response = httpx.get(f"{server.url}/api/v1/transcripts/search", params={"query": "café"}, timeout=60)
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"
