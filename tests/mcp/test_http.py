"""The HTTP layer of /mcp (the ASGI app itself, through Channels' test communicator): Origin
and Host checks before anything else, 405 for GET and DELETE, 413 for big bodies, 401 with the
/mcp resource metadata, and a client that leaves mid-body."""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.testing import HttpCommunicator
from django.conf import settings
from django.test import override_settings

from apps.core import origins
from apps.mcp.consumer import McpEndpoint

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


async def send(method="POST", body=BODY, headers=None):
    base = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]
    raw = base + [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    communicator = HttpCommunicator(McpEndpoint(), method, "/mcp", body=body, headers=raw)
    response = await communicator.get_response(timeout=5)
    headers = {k.decode().lower(): v.decode() for k, v in response["headers"]}
    return response["status"], headers, (json.loads(response["body"]) if response["body"] else None)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def fresh_origin_policy():
    origins._policy.cache_clear()
    yield
    origins._policy.cache_clear()


@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["https://evil.example", "http://evil.example:8000", "null"])
async def test_unlisted_origin_is_403_before_anything_else(origin):
    status, headers, body = await send("GET", headers={"origin": origin})
    assert status == 403
    assert headers["content-type"] == "application/json"
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600


@pytest.mark.anyio
@pytest.mark.parametrize("origin", ["http://localhost:6274", "http://127.0.0.1:3000", settings.CONNECT_BASE_URL])
async def test_listed_origins_reach_the_credential_check(origin):
    status, headers, body = await send(headers={"origin": origin})
    assert (status, body["error"]) == (401, "unauthorized")


@pytest.mark.anyio
async def test_configured_origins_replace_the_default():
    with override_settings(CONNECT_ALLOWED_ORIGINS="https://app.example"):
        origins._policy.cache_clear()
        assert (await send(headers={"origin": "https://app.example"}))[0] == 401
        assert (await send(headers={"origin": "http://localhost:6274"}))[0] == 403


@pytest.mark.anyio
async def test_star_allows_any_origin():
    with override_settings(CONNECT_ALLOWED_ORIGINS="*"):
        origins._policy.cache_clear()
        assert (await send(headers={"origin": "https://anything.example"}))[0] == 401


@pytest.mark.anyio
async def test_request_without_origin_is_not_a_browser_and_passes():
    assert (await send())[0] == 401


@pytest.mark.anyio
async def test_host_this_service_is_not_served_as_is_refused():
    communicator = HttpCommunicator(McpEndpoint(), "POST", "/mcp", body=BODY,
                                    headers=[(b"host", b"evil.example.com"), (b"content-type", b"application/json")])
    response = await communicator.get_response(timeout=5)
    assert response["status"] == 403


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_methods_other_than_post_are_405(method):
    status, headers, body = await send(method, body=b"", headers={"mcp-session-id": "abc"})
    assert (status, body) == (405, {"error": "method_not_allowed"})
    assert headers["allow"] == "POST"
    assert "mcp-session-id" not in headers


@pytest.mark.anyio
async def test_missing_credential_is_401_naming_the_protected_resource_metadata():
    # docs/api/errors.md: every MCP request's 401 names {base_url}/.well-known/oauth-protected-resource.
    status, headers, body = await send()
    assert (status, body["error"]) == (401, "unauthorized")
    assert headers["www-authenticate"] == (
        f'Bearer resource_metadata="{settings.CONNECT_BASE_URL}/.well-known/oauth-protected-resource"'
    )
    assert "mcp-session-id" not in headers


@pytest.mark.anyio
async def test_declared_body_over_the_limit_is_413_without_reading_it():
    with override_settings(CONNECT_MCP_MAX_BODY_BYTES=100):
        status, _, body = await send(body=b"x" * 10, headers={"content-length": "101"})
    assert status == 413 and body["error"]["code"] == -32600


@pytest.mark.anyio
async def test_streamed_body_over_the_limit_is_413():
    with override_settings(CONNECT_MCP_MAX_BODY_BYTES=100):
        app = ApplicationCommunicator(McpEndpoint(), {
            "type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        })
        await app.send_input({"type": "http.request", "body": b"[" * 60, "more_body": True})
        await app.send_input({"type": "http.request", "body": b"[" * 60, "more_body": True})
        start = await app.receive_output(timeout=5)
        assert start["status"] == 413
        await app.receive_output(timeout=5)
        await app.wait(timeout=5)


@pytest.mark.anyio
async def test_client_leaving_mid_body_ends_the_request_quietly():
    app = ApplicationCommunicator(McpEndpoint(), {
        "type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
    })
    await app.send_input({"type": "http.request", "body": b'{"jsonrpc":', "more_body": True})
    await app.send_input({"type": "http.disconnect"})
    await app.wait(timeout=5)  # returns without sending anything and without an error
    assert await app.receive_nothing(timeout=0.1)
