"""An attempt that fails says what happened in a sentence with the host and port — connection
refused, a TLS failure, a timeout after N s, the HTTP status answered, a refused destination —
over real sockets, and never repeats the URL's path, query or user info (they may hold a
secret). The sentence reaches REST (`errorDetail`) and the admin's attempts."""

from __future__ import annotations

import socket
import threading

import pytest

from apps.webhooks import delivery as engine
from apps.webhooks import outbound
from engine import ssrf
from apps.webhooks.models import Delivery, DeliveryAttempt
from tests import factories
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_api import Http

SECRET = "s3cr3t-token"
BODY = b"{}"


@pytest.fixture
def sender():
    s = outbound.Sender(ssrf.Policy(allow_private=True), timeout=1.0)
    yield s
    s.close()


def closed_port() -> int:
    """A port nothing listens on: bound, then closed (the kernel refuses connections to it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_names_host_and_port(sender):
    port = closed_port()
    outcome = sender.post(f"http://127.0.0.1:{port}/hook?token={SECRET}", [], BODY)
    assert outcome.error == "network_error"
    assert outcome.detail == f"connection refused by 127.0.0.1:{port}: nothing listens there"


def test_a_receiver_that_does_not_answer_is_a_timeout_with_its_seconds(sender):
    receiver = Receiver("http://127.0.0.1:9/unused", behaviour=lambda n: "hang")
    try:
        outcome = sender.post(receiver.url + f"/{SECRET}", [], BODY)
    finally:
        receiver.close()
    port = receiver.url.split(":")[2].split("/")[0]
    assert outcome.error == "timeout"
    assert outcome.detail == f"no complete response from 127.0.0.1:{port} within 1 s"


def test_tls_to_a_plain_http_server_is_a_tls_failure(sender):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def answer_plain_http():
            connection, _ = listener.accept()
            with connection:
                connection.recv(4096)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        threading.Thread(target=answer_plain_http, daemon=True).start()
        outcome = sender.post(f"https://user:{SECRET}@127.0.0.1:{port}/hook", [], BODY)
    assert outcome.error == "network_error"
    assert outcome.detail == f"TLS failure with 127.0.0.1:{port}: the handshake did not complete"


def test_an_http_error_and_a_redirect_say_the_status(sender):
    receiver = Receiver("http://127.0.0.1:9/unused", behaviour=lambda n: 503 if n == 1 else ("redirect", "/x"))
    try:
        failed = sender.post(receiver.url, [], BODY)
        moved = sender.post(receiver.url, [], BODY)
    finally:
        receiver.close()
    where = receiver.url.split("//")[1].split("/")[0]
    assert failed.detail == f"{where} answered HTTP 503; only a 2xx acknowledges a delivery"
    assert moved.detail.startswith(f"{where} answered HTTP 302 (a redirect, which is never followed)")


def test_a_refused_destination_says_why(sender):
    outcome = outbound.Sender(ssrf.Policy(), timeout=1.0).post(f"http://127.0.0.1:8/{SECRET}", [], BODY)
    assert outcome.error == "blocked_destination"
    assert outcome.detail.startswith("127.0.0.1:8 is not a permitted destination")


@pytest.mark.django_db
def test_the_sentence_reaches_rest_and_the_admin(alice, webhook_settings, staff, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    port = closed_port()
    http = Http(factories.api_key(alice, factories.ALL_SCOPES))
    endpoint_id = http.call("post", "/api/v1/webhooks", {
        "name": "gone", "url": f"http://127.0.0.1:{port}/hook?token={SECRET}",
        "filters": [{"type": "session.created"}]}).json()["id"]
    test = http.call("post", f"/api/v1/webhooks/{endpoint_id}/test").json()
    engine.drain()
    sentence = f"connection refused by 127.0.0.1:{port}: nothing listens there"
    [attempt] = http.call("get", f"/api/v1/webhook-deliveries/{test['id']}").json()["attempts"]
    assert (attempt["error"], attempt["errorDetail"]) == ("network_error", sentence)
    page = staff.get(f"/admin/webhooks/delivery/{test['id']}/change/").content.decode()
    assert sentence in page
    assert SECRET not in DeliveryAttempt.objects.get(delivery=Delivery.objects.get(pk=test["id"])).error_detail
