"""Refusals that say what to do (docs/decisions/error-details.md): a 403 `insufficient_scope`
names every scope the request needs in `requiredScopes` and in the RFC 6750 challenge's
`scope` (the MCP authorization spec's step-up), at REST, at the ingest API, on the event stream
and at `/mcp`; a tool's missing scope at `/mcp` is a tool result naming it; the event log's
`410 resync_required` says how to read the log again. Codes and statuses are the contract's."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.test import Client, override_settings

from apps.core.errors import READ_CREDENTIAL_AT_INGEST, RESYNC_DETAIL, ingest_key_reads_nothing, scope_detail
from apps.mcp.consumer import answer
from apps.stream.consumer import EventStreamConsumer
from apps.tenancy import services as tenancy
from tests import factories
from tests.events.live import STREAM
from tests.hub import own_hub  # noqa: F401

METADATA = f'resource_metadata="{settings.CONNECT_BASE_URL}/.well-known/oauth-protected-resource"'
READ_SCOPES = settings.CONNECT_READ_SCOPES


def step_up(*scopes: str) -> str:
    return (f'Bearer {METADATA}, error="insufficient_scope", scope="{" ".join(scopes)}", '
            'error_description="The credential lacks a scope this request needs"')


def assert_step_up(status: int, headers: dict[str, str], body: dict, scopes: list[str], detail: str) -> None:
    assert (status, body["error"], body["requiredScopes"], body["detail"]) == (403, "insufficient_scope", scopes, detail)
    assert headers["www-authenticate"] == step_up(*scopes)


def rest(response) -> tuple[int, dict[str, str], dict]:
    return response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.json()


@pytest.fixture
def ingest_key(alice) -> str:
    return tenancy.issue_ingest_key(membership=alice, name="recorder").key


# --- REST ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path, scope", [
    ("/api/v1/sessions", "svc:sessions:read"),
    ("/api/v1/sessions/{id}/transcript", "svc:transcripts:read"),
    ("/api/v1/transcripts/search?query=budget", "svc:transcripts:read"),
    ("/api/v1/sessions/{id}/boards", "svc:boards:read"),
    ("/api/v1/webhooks", "svc:webhooks:read"),
    ("/api/v1/webhook-deliveries", "svc:webhooks:read"),
])
def test_an_ingest_key_on_a_read_path_is_told_the_read_scope_that_path_needs(api, acme, ingest_key, path, scope):
    session = factories.session(acme, committed=["budget"])
    status, headers, body = rest(api.get(path.format(id=session.id), ingest_key))
    assert_step_up(status, headers, body, [scope], ingest_key_reads_nothing([scope]))


def test_a_read_key_on_the_ingest_api_is_told_it_needs_an_ingest_key(alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    response = Client().put("/api/v1/ingest/sessions/rec-1", data="{}", content_type="application/json",
                            headers={"Authorization": f"Bearer {key}"})
    assert_step_up(*rest(response), ["svc:ingest:write"], READ_CREDENTIAL_AT_INGEST)


def test_a_webhook_operation_names_each_scope_it_checks(api, alice):
    key = factories.api_key(alice, ["svc:sessions:read"])
    status, headers, body = rest(api.get("/api/v1/webhooks", key))
    assert_step_up(status, headers, body, ["svc:webhooks:read"], scope_detail(("svc:webhooks:read",)))


def test_creating_a_webhook_names_both_scopes_it_needs_at_once(api, alice):
    key = factories.api_key(alice, ["svc:boards:read"])
    response = Client().post("/api/v1/webhooks", data="{}", content_type="application/json",
                             headers={"Authorization": f"Bearer {key}"})
    required = ("svc:webhooks:write", "svc:sessions:read")
    assert_step_up(*rest(response), list(required), scope_detail(required))


def test_the_event_log_names_the_scope_of_the_types_asked_for(api, alice):
    key = factories.api_key(alice, ["svc:sessions:read"])
    status, headers, body = rest(api.get("/api/v1/events", key, type="transcript.segment.created"))
    assert_step_up(status, headers, body, ["svc:transcripts:read"], scope_detail(("svc:transcripts:read",)))
    boards_only = factories.api_key(alice, ["svc:boards:read"])
    assert rest(api.get("/api/v1/events", boards_only))[2]["requiredScopes"] == ["svc:sessions:read"]


@override_settings(CONNECT_EVENT_RETENTION_DAYS=30)
def test_resync_required_says_to_read_the_log_again_without_after(api, acme, alice_key):
    old = factories.aged_event(acme, "session.created", timedelta(days=31))
    response = api.get("/api/v1/events", alice_key, after=old.id, type="session.created")
    assert response.status_code == 410
    assert response.json() == {"error": "resync_required", "detail": RESYNC_DETAIL}
    assert "without `after`" in RESYNC_DETAIL and "nextCursor" in RESYNC_DETAIL


# --- /mcp ------------------------------------------------------------------------------------


def mcp(key: str, message: dict) -> tuple[int, dict[str, str], dict]:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json", "accept": "application/json"}
    reply, extra = answer(headers, json.dumps(message).encode(), set())
    return reply.status, {k.lower(): v for k, v in extra.items()}, reply.body


def test_an_ingest_key_at_mcp_is_an_http_403_naming_the_read_scopes(ingest_key):
    status, headers, body = mcp(ingest_key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert_step_up(status, headers, body, READ_SCOPES, ingest_key_reads_nothing(READ_SCOPES))


def test_a_tool_without_its_scope_is_a_result_naming_the_scope(alice):
    key = factories.api_key(alice, ["svc:sessions:read"])
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search_transcripts", "arguments": {"query": "budget"}}}
    status, _, body = mcp(key, call)
    result = body["result"]
    assert (status, result["isError"]) == (200, True)
    assert json.loads(result["content"][0]["text"]) == {
        "error": "insufficient_scope", "detail": scope_detail(("svc:transcripts:read",)),
        "requiredScopes": ["svc:transcripts:read"]}


# --- The event stream ------------------------------------------------------------------------


@pytest.fixture
def keys(transactional_db, alice) -> dict[str, str]:
    return {"sessions": factories.api_key(alice, ["svc:sessions:read"]),
            "ingest": tenancy.issue_ingest_key(membership=alice, name="recorder").key}


async def stream_refusal(key: str, query: str = "") -> tuple[int, dict[str, str], dict]:
    app = ApplicationCommunicator(EventStreamConsumer.as_asgi(), {
        "type": "http", "method": "GET", "path": STREAM, "query_string": query.encode(),
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())],
    })
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(timeout=20)
    body = await app.receive_output(timeout=20)
    await app.wait(timeout=20)
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, json.loads(body["body"])


def filters(*entries: dict) -> str:
    from urllib.parse import quote

    return "filters=" + quote(json.dumps(list(entries)))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_stream_names_every_scope_its_filters_need(own_hub, keys):
    key = keys["sessions"]
    wanted = filters({"type": "session.created"}, {"type": "transcript.segment.created", "sessionId": "s"})
    both = ["svc:sessions:read", "svc:transcripts:read"]
    assert_step_up(*await stream_refusal(key, wanted), both, scope_detail(tuple(both)))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_ingest_key_on_the_stream_is_told_what_its_subscription_needs(own_hub, keys):
    ingest_key = keys["ingest"]
    sessions = ["svc:sessions:read"]
    assert_step_up(*await stream_refusal(ingest_key), sessions, ingest_key_reads_nothing(sessions))
    segments = filters({"type": "transcript.segment.created", "sessionId": "s"})
    transcripts = ["svc:transcripts:read"]
    assert_step_up(*await stream_refusal(ingest_key, segments), transcripts, ingest_key_reads_nothing(transcripts))
    # Filters that do not parse: the door answers first, naming the default subscription's scope.
    assert_step_up(*await stream_refusal(ingest_key, "filters=%5B"), sessions, ingest_key_reads_nothing(sessions))
