"""Issue 22 (1, 2): every response carries `X-Request-Id`, error bodies carry it as `requestId`,
and the JSON log lines of a request, a stream and a tool call carry its ids — never a secret."""

from __future__ import annotations

import re

import httpx
import pytest

from tests import factories
from tests.obs.conftest import json_lines
from tests.oauth.test_grants_and_credentials import issue
from apps.oauth.models import AccessToken
from apps.oauth.services import create_client
from apps.tenancy.models import ApiKey, hash_api_key

pytestmark = pytest.mark.django_db(transaction=True)

FRESH = re.compile(r"req_[0-9a-f]{24}")
MCP_HEADERS = {"Accept": "application/json", "Content-Type": "application/json"}


@pytest.fixture
def session(alice):
    return factories.session(alice.workspace)


def test_rest_answers_carry_a_fresh_request_id(obs_server, alice_key, session):
    with obs_server.client(headers={"Authorization": f"Bearer {alice_key}"}) as client:
        listed = client.get("/api/v1/sessions")
        one = client.get(f"/api/v1/sessions/{session.id}")
    assert listed.status_code == one.status_code == 200
    assert FRESH.fullmatch(listed.headers["X-Request-Id"]) and FRESH.fullmatch(one.headers["X-Request-Id"])
    assert listed.headers["X-Request-Id"] != one.headers["X-Request-Id"]
    assert "requestId" not in listed.json()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/v1/sessions", 401),  # REST, no credential
        ("GET", "/api/v1/no-such-thing", 404),  # Django's not-found view
        ("GET", "/api/v1/events/stream", 401),  # the stream's consumer
        ("POST", "/mcp", 401),  # the MCP endpoint's consumer
        ("POST", "/api/auth/oauth2/token", 400),  # OAuth endpoint (DOT's own body)
    ],
)
def test_error_answers_carry_the_id_in_header_and_body(obs_server, method, path, status):
    response = httpx.request(method, obs_server.url + path, headers=MCP_HEADERS, content=b"{}", timeout=10)
    assert response.status_code == status
    request_id = response.headers["X-Request-Id"]
    assert FRESH.fullmatch(request_id)
    body = response.json()
    if "error" in body and isinstance(body["error"], str) and path != "/api/auth/oauth2/token":
        assert body["requestId"] == request_id


@pytest.mark.parametrize(
    "path", ["/healthz", "/readyz", "/admin/login/", "/accounts/login", "/.well-known/oauth-authorization-server",
             "/.well-known/oauth-protected-resource", "/openapi.json"],
)  # fmt: skip
def test_pages_health_and_well_known_carry_a_request_id(obs_server, path):
    response = httpx.get(obs_server.url + path, timeout=30)
    assert response.status_code == 200, path
    assert FRESH.fullmatch(response.headers["X-Request-Id"])


def test_static_files_carry_a_request_id(obs_server):
    response = httpx.get(f"{obs_server.url}/static/admin/css/base.css", timeout=30)
    assert response.status_code == 200 and "text/css" in response.headers["Content-Type"]
    assert FRESH.fullmatch(response.headers["X-Request-Id"])


def test_a_well_formed_inbound_id_is_kept(obs_server):
    inbound = "Trace-4._x" + "a" * 118  # 128 characters
    response = httpx.get(f"{obs_server.url}/api/v1/sessions", headers={"X-Request-Id": inbound}, timeout=10)
    assert response.headers["X-Request-Id"] == inbound
    assert response.json()["requestId"] == inbound


@pytest.mark.parametrize("inbound", ["a" * 129, "has space", "semi;colon", "üñí", "<script>", ""])
def test_an_invalid_inbound_id_is_replaced(obs_server, inbound):
    response = httpx.get(
        f"{obs_server.url}/api/v1/sessions", headers={"X-Request-Id": inbound.encode("utf-8")}, timeout=10
    )
    assert FRESH.fullmatch(response.headers["X-Request-Id"])
    assert response.json()["requestId"] == response.headers["X-Request-Id"]


def test_the_stream_headers_carry_a_request_id_and_its_lines_are_logged(obs_server, alice, alice_key):
    inbound = "stream-test-id-1"
    with httpx.stream(
        "GET", f"{obs_server.url}/api/v1/events/stream", timeout=30,
        headers={"Authorization": f"Bearer {alice_key}", "X-Request-Id": inbound},
    ) as response:  # fmt: skip
        assert response.status_code == 200
        assert response.headers["X-Request-Id"] == inbound
        chunks = response.iter_raw()
        assert next(chunks).startswith(b": connected")
        factories.session(alice.workspace)
        received = b""
        while b"event: session.created" not in received:
            received += next(chunks)

    def closed():
        lines = [line for line in json_lines(obs_server) if line.get("request_id") == inbound]
        return lines if any(line.get("close_reason") for line in lines) else None

    from tests.servers import wait_until

    lines = wait_until(closed, what="the stream's close and access lines", timeout=30)
    messages = {line["message"] for line in lines}
    assert "event stream opened" in messages
    close = next(line for line in lines if line.get("close_reason"))
    assert close["close_reason"] == "client_gone" and close["duration_ms"] >= 0
    assert close["events_sent"] == 1
    assert close["workspace_id"] == str(alice.workspace.id)
    access = wait_until(
        lambda: next((line for line in json_lines(obs_server)
                      if line["logger"] == "connect.access" and line.get("request_id") == inbound), None),
        what="the stream's access line", timeout=30,
    )  # fmt: skip
    assert (access["route"], access["status"], access["workspace_id"]) == (
        "api/v1/events/stream", 200, str(alice.workspace.id))


def test_json_log_lines_carry_ids_and_no_secret(obs_server, alice, session):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    application = create_client(name="Agent", redirect_uri="https://agent.example/cb").application
    token = issue(alice, application, raw="tok-secret-" + "z" * 40, resource=[obs_server.url])
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    ids = {}
    with obs_server.client() as client:
        for name, credential in (("key", key), ("token", token)):
            response = client.get(
                f"/api/v1/sessions/{session.id}",
                headers={"Authorization": f"Bearer {credential}", "traceparent": traceparent},
            )
            assert response.status_code == 200, response.text
            ids[name] = response.headers["X-Request-Id"]
        call = client.post("/mcp", headers={**MCP_HEADERS, "Authorization": f"Bearer {key}"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_session", "arguments": {"sessionId": session.id}}})  # fmt: skip
        assert call.status_code == 200 and not call.json()["result"].get("isError")
        ids["mcp"] = call.headers["X-Request-Id"]
        refused = client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}x"})
        assert refused.status_code == 401

    from tests.servers import wait_until

    def access_lines():
        lines = {line.get("request_id"): line for line in json_lines(obs_server) if line["logger"] == "connect.access"}
        return lines if all(i in lines for i in ids.values()) else None

    access = wait_until(access_lines, what="the access lines", timeout=30)
    by_key, by_token = access[ids["key"]], access[ids["token"]]
    assert by_key["route"] == by_token["route"] == "api/v1/sessions/<str:id>"
    assert (by_key["method"], by_key["status"]) == ("GET", 200)
    assert by_key["bytes"] > 0 and by_key["duration_ms"] > 0
    assert by_key["workspace_id"] == by_token["workspace_id"] == str(alice.workspace.id)
    assert by_key["credential_id"] == ApiKey.objects.get(key_hash=hash_api_key(key)).id
    assert by_token["credential_id"] == str(AccessToken.objects.get(application=application).pk)
    assert by_key["traceparent"] == traceparent
    tool_line = access[ids["mcp"]]  # the call's fields ride on its request's access line
    assert (tool_line["mcp_method"], tool_line["tool"], tool_line["is_error"]) == ("tools/call", "get_session", False)
    assert tool_line["workspace_id"] == str(alice.workspace.id)
    assert tool_line["route"] == "^mcp/?$"

    log = obs_server.log.read_text()
    assert key not in log and token not in log
    assert key[-12:] not in log and token[-12:] not in log
