"""Robust edges (issue 19 point 6): bodies over the upload limit are `413 payload_too_large` on
every path that takes one, tried on a live server with real oversized bodies; every 400 says
which parameter or field and why in `detail`, and never echoes what was sent."""

from __future__ import annotations

import importlib
import json
import socket
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.test import Client

from apps.core.cursors import CURSOR_DETAIL, encode_cursor
from apps.core.errors import as_api_error, bad_request_view
from apps.events import filters as stream_filters
from apps.webhooks import filters as webhook_filters
from apps.webhooks.destinations import DEVELOPMENT_HINT
from engine import http_limits
from tests import factories
from tests.servers import ROOT, free_port, serve, server_env, without_request_id

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE


# --- 413 on a live server --------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    with serve(tmp_path_factory.mktemp("edges")) as live:
        yield live


# Every POST/PATCH/DELETE path outside the admin; ids need not exist: the limit comes first.
BODY_PATHS = [
    ("POST", "/api/v1/webhooks", "application/json"),
    ("PATCH", "/api/v1/webhooks/wh_missing", "application/json"),
    ("DELETE", "/api/v1/webhooks/wh_missing", "application/json"),
    ("POST", "/api/v1/webhooks/wh_missing/test", "application/json"),
    ("POST", "/api/v1/webhook-deliveries/dlv_missing/replay", "application/json"),
    ("POST", "/api/auth/oauth2/token", "application/x-www-form-urlencoded"),
    ("POST", "/api/auth/oauth2/revoke", "application/x-www-form-urlencoded"),
    ("POST", "/api/auth/oauth2/register", "application/json"),
]


def oversized(content_type: str) -> bytes:
    if content_type == "application/json":
        return json.dumps({"name": "x" * (LIMIT + 1)}).encode()
    return b"grant_type=authorization_code&code=" + b"c" * (LIMIT + 1)


@pytest.mark.e2e
@pytest.mark.parametrize("method, path, content_type", BODY_PATHS)
def test_a_body_over_the_upload_limit_is_413_everywhere(server, transactional_db, method, path, content_type):
    key = factories.api_key(factories.member(factories.workspace("edges"), "e@edges.test"), factories.ALL_SCOPES)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": content_type}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        response = http.request(method, path, content=oversized(content_type), headers=headers)
        assert response.status_code == 413, response.text
        assert without_request_id(response.json()) == {"error": "payload_too_large"}
        # The connection still serves: the body was read, nothing was left to confuse the next request.
        assert http.get("/healthz").status_code == 200


@pytest.mark.e2e
def test_a_chunked_body_without_content_length_is_measured_too(server, transactional_db):
    key = factories.api_key(factories.member(factories.workspace("chunks"), "c@chunks.test"), factories.ALL_SCOPES)
    body = oversized("application/json")

    def chunks():
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    response = httpx.post(
        f"{server.url}/api/v1/webhooks",
        content=chunks(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert response.status_code == 413 and without_request_id(response.json()) == {"error": "payload_too_large"}


@pytest.mark.e2e
def test_a_body_at_the_limit_reaches_the_view(server, transactional_db):
    key = factories.api_key(factories.member(factories.workspace("atlimit"), "a@atlimit.test"), factories.ALL_SCOPES)
    head, tail = b'{"name": "', b'"}'
    body = head + b"x" * (LIMIT - len(head) - len(tail)) + tail
    assert len(body) == LIMIT
    response = httpx.post(
        f"{server.url}/api/v1/webhooks",
        content=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=60,
    )
    # Read and judged by the view: the body misses url and filters.
    assert response.status_code == 400 and without_request_id(response.json()) == {"error": "invalid_request", "detail": "filters: required"}


@pytest.mark.e2e
@pytest.mark.parametrize(
    "params, headers, body",
    [
        ({"filters": json.dumps([{"type": "session.created"}, {"type": "transcript.segment.created"}])}, {},
         {"error": "invalid_filters", "detail": "filters[1].sessionId: required for transcript.segment.created"}),
        ({"filters": "not json"}, {}, {"error": "invalid_filters", "detail": "filters: not JSON"}),
        ({}, {"Last-Event-ID": "e" * 65}, {"error": "invalid_request", "detail": "Last-Event-ID: at most 64 characters"}),
        # A typo of `filters` would stream everything unfiltered: refused, named (issue 23).
        ({"filter": "[]"}, {}, {"error": "invalid_request",
                                "detail": "filter: unknown query parameter; the parameters are filters"}),
    ],
)
def test_the_event_stream_says_what_is_wrong_too(server, transactional_db, params, headers, body):
    key = factories.api_key(factories.member(factories.workspace("stream"), "s@stream.test"), factories.ALL_SCOPES)
    response = httpx.get(
        f"{server.url}/api/v1/events/stream", params=params, headers={"Authorization": f"Bearer {key}", **headers},
        timeout=60,
    )
    assert response.status_code == 400 and without_request_id(response.json()) == body


@pytest.mark.e2e
def test_the_event_stream_authenticates_before_it_reads_parameters(server, transactional_db):
    """No valid credential: 401 whatever the parameters; a key in `access_token` is not one."""
    key = factories.api_key(factories.member(factories.workspace("streamq"), "s@streamq.test"), factories.ALL_SCOPES)
    for params in ({"filter": "[]"}, {"access_token": key}, {"filters": "not json", "x": "1"}):
        response = httpx.get(f"{server.url}/api/v1/events/stream", params=params, timeout=60)
        assert response.status_code == 401 and response.json()["error"] == "unauthorized", params


def test_request_data_too_big_is_413_wherever_it_surfaces():
    """Behind the middleware: DRF's handler (which answered 500) and Django's handler400 (400)."""
    assert as_api_error(RequestDataTooBig()).body() == {"error": "payload_too_large"}
    response = bad_request_view(None, RequestDataTooBig())
    assert response.status_code == 413 and without_request_id(json.loads(response.content)) == {"error": "payload_too_large"}


# --- 400s say which and why ------------------------------------------------------------------

SECRET = "s3cr3t-t0ken-value"


@pytest.mark.parametrize(
    "path, params, detail",
    [
        ("/api/v1/sessions", {"limit": "0"}, "limit: must be an integer from 1 to 100"),
        ("/api/v1/sessions", {"limit": SECRET}, "limit: must be an integer from 1 to 100"),
        ("/api/v1/sessions", {"cursor": SECRET}, CURSOR_DETAIL),
        ("/api/v1/sessions", {"cursor": ""}, "cursor: must not be empty"),
        ("/api/v1/transcripts/search", {}, "query: required"),
        ("/api/v1/transcripts/search", {"query": "x" * 501}, "query: must be 1 to 500 characters"),
        ("/api/v1/transcripts/search", {"query": "a", "revisionKind": SECRET}, "revisionKind: must be one of committed, final"),
        ("/api/v1/transcripts/search", {"query": "a", "cursor": SECRET}, CURSOR_DETAIL),
        ("/api/v1/sessions/s/transcripts", {"revisionKind": "draft"}, "revisionKind: must be one of committed, final"),
        ("/api/v1/webhooks", {"limit": "101"}, "limit: must be an integer from 1 to 100"),
        ("/api/v1/webhook-deliveries", {"status": SECRET},
         "status: must be one of pending, retrying, succeeded, dead_letter, cancelled"),
        ("/api/v1/webhook-deliveries", {"kind": "x"}, "kind: must be one of event, test"),
        ("/api/v1/webhook-deliveries", {"cursor": SECRET}, CURSOR_DETAIL),
        ("/api/v1/sessions", {"limit": "x" + "\x00"}, "limit: holds U+0000"),
    ],
)
def test_every_query_400_says_which_parameter_and_why(api, alice, path, params, detail):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    response = api.get(path, key, **params)
    assert response.status_code == 400
    assert without_request_id(response.json()) == {"error": "invalid_request", "detail": detail}
    assert SECRET.encode() not in response.content


def test_a_signed_cursor_of_another_listing_or_shape_is_named_too(api, acme, alice_key):
    factories.sessions_at_distinct_times(acme, 2)
    for cursor in (
        encode_cursor("webhooks", acme.id, ["2026-01-01T00:00:00+00:00", "x"]),  # another listing
        encode_cursor("sessions", acme.id, ["not a time"]),  # ours, but a key this release cannot read
        encode_cursor("search", acme.id, ["in", "digest", 1]),
    ):
        for target, extra in (("/api/v1/sessions", {}), ("/api/v1/transcripts/search", {"query": "a"})):
            response = api.get(target, alice_key, cursor=cursor, **extra)
            assert without_request_id(response.json()) == {"error": "invalid_request", "detail": CURSOR_DETAIL}, (cursor, target)


@pytest.mark.parametrize(
    "body, detail",
    [
        ({"name": "x", "url": f"https://user:{SECRET}@hooks.example.com/", "filters": [{"type": "session.created"}]},
         "url: must not carry credentials"),
        ({"name": "x", "url": f"https://10.0.0.1/{SECRET}", "filters": [{"type": "session.created"}]},
         "url: is an address that is private" + DEVELOPMENT_HINT),
        ({"name": "x", "url": f"https://[::ffff:127.0.0.1]/{SECRET}", "filters": [{"type": "session.created"}]},
         "url: is an IPv6 address embedding a refused IPv4 address" + DEVELOPMENT_HINT),
        ({"name": "x", "url": f"https://localhost/{SECRET}", "filters": [{"type": "session.created"}]},
         "url: names a refused host (localhost or the deny list)" + DEVELOPMENT_HINT),
        ({"name": "x", "url": f"https://private.example.com/?token={SECRET}", "filters": [{"type": "session.created"}]},
         "url: resolves to an address that is private" + DEVELOPMENT_HINT),
        ({"name": "x", "url": f"ftp://hooks.example.com/{SECRET}", "filters": [{"type": "session.created"}]},
         "url: must be https"),
        ({"name": "x", "url": SECRET, "filters": [{"type": "session.created"}]},
         "url: must be an absolute https URL of at most 2048 characters"),
        ({"name": "x", "url": "https://hooks.example.com/", "filters": []},
         "filters: must be a list of 1 to 20 entries"),
        ({"name": "x", "url": "https://hooks.example.com/",
          "filters": [{"type": "session.created"}, {"type": "session.created", "status": ["completed"]}]},
         "filters[1].status: applies to session.status_changed entries only"),
        ({"name": "x", "url": "https://hooks.example.com/",
          "filters": [{"type": "session.status_changed", "status": [SECRET]}]},
         "filters[0].status: must be a non-empty list of unique values of recording, processing, completed, failed"),
        ({"name": "x", "url": "https://hooks.example.com/", "filters": [{"type": SECRET}]},
         "filters[0].type: must be one of session.created, session.status_changed"),
        ({"name": "x", "url": "https://hooks.example.com/", "filters": [{"type": "session.created", SECRET: 1}]},
         "filters[0]: unknown property; an entry has only type, sessionId and status"),
    ],
)
def test_a_refused_webhook_says_why_without_echoing_it(db, alice, monkeypatch, body, detail):
    answers = {"hooks.example.com": ["93.184.216.34"], "private.example.com": ["93.184.216.34", "192.168.1.9"]}
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, port: answers[host])
    key = factories.api_key(alice, factories.ALL_SCOPES)
    response = Client().post(
        "/api/v1/webhooks", json.dumps(body), content_type="application/json", headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 400
    assert without_request_id(response.json()) == {"error": "invalid_request", "detail": detail}
    assert SECRET.encode() not in response.content


def test_patch_names_the_field_too(db, alice, monkeypatch):
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, port: ["93.184.216.34"])
    key = factories.api_key(alice, factories.ALL_SCOPES)
    headers = {"Authorization": f"Bearer {key}"}
    created = Client().post(
        "/api/v1/webhooks",
        json.dumps({"name": "x", "url": "https://hooks.example.com/", "filters": [{"type": "session.created"}]}),
        content_type="application/json",
        headers=headers,
    ).json()
    response = Client().patch(
        f"/api/v1/webhooks/{created['id']}", json.dumps({"active": "yes"}), content_type="application/json", headers=headers
    )
    assert without_request_id(response.json()) == {"error": "invalid_request", "detail": "active: must be true or false"}


@pytest.mark.parametrize(
    "raw, detail",
    [
        ("not json", "filters: not JSON"),
        ("[]", "filters: must be an array of 1 to 20 entries"),
        (json.dumps([{"type": "session.created"}, {"type": "session.created"}, {"type": "transcript.segment.created"}]),
         "filters[2].sessionId: required for transcript.segment.created"),
        (json.dumps([{"type": "session.created", "sessionId": 7}]), "filters[0].sessionId: must be a non-empty string"),
        (json.dumps([{"type": SECRET}]),
         "filters[0].type: must be one of session.created, session.status_changed, transcript.segment.created"),
        (json.dumps(["session.created"]), "filters[0]: must be an object"),
        (json.dumps([{"type": "session.created", SECRET: 1}]),
         "filters[0]: unknown property; an entry has only type and sessionId"),
    ],
)
def test_stream_filters_say_where_and_why(raw, detail):
    with pytest.raises(stream_filters.InvalidFilters) as caught:
        stream_filters.parse_filters(raw)
    assert caught.value.detail == detail and SECRET not in caught.value.detail


def test_webhook_and_stream_filters_share_one_error_class():
    assert webhook_filters.InvalidFilters is stream_filters.InvalidFilters


# --- 414 / 431: the request head over daphne's limits (engine/http_limits.py) --------


@pytest.fixture(scope="module")
def limits_server(django_db_setup, tmp_path_factory):
    """daphne with the adaptation installed, as connect/asgi.py installs it in service."""
    port = free_port()
    code = (
        "from engine import http_limits; http_limits.install(); "
        "from daphne.cli import CommandLineInterface; CommandLineInterface.entrypoint()"
    )
    log = tmp_path_factory.mktemp("limits") / "daphne.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", code, "-p", str(port), "connect.asgi:application"],
            cwd=ROOT, env=server_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # generous: a busy machine imports slowly
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def raw_exchange(url: str, request: bytes) -> bytes:
    """Send `request` on a raw socket and read until the server closes: what a client sees."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        try:
            sock.sendall(request)
        except OSError:
            pass  # the server may stop reading: what it answered is still to be read
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


@pytest.mark.e2e
def test_a_request_line_over_the_limit_is_414_json(limits_server):
    with httpx.Client(base_url=limits_server, timeout=60) as http:
        response = http.get("/api/v1/sessions", params={"cursor": "a" * 20_000})
        assert response.status_code == 414 and without_request_id(response.json()) == {"error": "uri_too_long"}
        assert response.headers["connection"] == "close"
        assert http.get("/healthz").status_code == 200  # a new connection is served as usual


@pytest.mark.e2e
def test_a_request_line_the_client_is_still_sending_gets_its_answer(limits_server):
    """2 MB of request line: the server answers after 16 KiB and drains the rest, so the
    answer is not lost to a reset."""
    received = raw_exchange(limits_server, b"GET /healthz?x=" + b"a" * 2_000_000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 ") and without_request_id(json.loads(body)) == {"error": "uri_too_long"}


@pytest.mark.e2e
@pytest.mark.parametrize("headers", [
    {f"X-Filler-{i}": "v" * 100 for i in range(200)},  # 16 KiB of header block
    {f"X-{i}": "v" for i in range(600)},  # more than 500 headers
], ids=["bytes", "count"])
def test_a_header_block_over_the_limit_is_431_json(limits_server, headers):
    response = httpx.get(f"{limits_server}/healthz", headers=headers, timeout=60)
    assert response.status_code == 431 and without_request_id(response.json()) == {"error": "request_header_fields_too_large"}


@pytest.mark.e2e
def test_heads_within_the_limits_are_served(limits_server):
    with httpx.Client(base_url=limits_server, timeout=60) as http:
        assert http.get("/healthz", params={"x": "a" * 15_000}).status_code == 200
        assert http.get("/healthz", headers={f"X-{i}": "v" for i in range(400)}).status_code == 200
        response = http.post("/api/v1/webhooks", content=b"{}", headers={"Content-Type": "application/json"})
        assert response.status_code == 401 and response.json()["error"] == "unauthorized"  # same connection


def test_the_private_names_the_adaptation_relies_on_exist():
    for module, path in http_limits.PRIVATE_NAMES:
        target = importlib.import_module(module)
        for name in path.split("."):
            assert hasattr(target, name), (module, path)
            target = getattr(target, name)


def test_the_channel_builds_requests_without_twisteds_form_parsing():
    """daphne hands the raw body to the application; Twisted's own parse of a POST's
    Content-Type and form body into `request.args` (read by nothing) is skipped."""
    channel = http_limits.LimitAnsweringChannel()
    built = []
    channel.requestFactory = lambda *args, **kwargs: built.append((args, kwargs)) or "request"
    assert channel.requestFactory(channel, 0) == "request"
    assert built == [((channel, 0), {"parsePOSTFormSubmission": False})]


@pytest.mark.e2e
def test_a_form_body_still_reaches_the_application(limits_server):
    # The OAuth token endpoint reads its form body: a grant type it offers, from an unknown
    # client, is refused for the client; without the body the grant type is missing.
    with httpx.Client(base_url=limits_server, timeout=60) as http:
        known = http.post("/api/auth/oauth2/token", data={"grant_type": "refresh_token", "refresh_token": "x",
                                                          "client_id": "nobody"})
        empty = http.post("/api/auth/oauth2/token", content=b"", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert known.json()["error"] == "invalid_client", known.text
    assert empty.json()["error"] == "invalid_request", empty.text
