"""The official MCP Python SDK (`mcp` 2.x) against a live `manage.py serve`: in its default
`auto` mode (it probes `server/discover` and stays on 2026-07-28) and in `legacy` mode
(initialize handshake), every tool compared with REST, paging, scope and not-found results,
401 discovery, and the SDK's own OAuth provider doing discovery → registration →
authorization (login and consent driven here) → a /mcp call."""

from __future__ import annotations

import json

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp.shared.exceptions import MCPError

from apps.recordings import services
from tests import factories
from tests.oauth.flow import AUTHORIZE, REDIRECT_URI, Browser, MemoryStorage, query_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def data(live_server_daphne, transactional_db, alice, bob):
    acme = alice.workspace
    meeting = factories.session(acme, label="Budget review", committed=["we discuss the budget"],
                                final=["We discuss the budget.", "Then hiring."])
    services.publish_board(session=meeting, board_id="summary", payload={"v": 1}, source_revision_kind="final")
    factories.sessions_at_distinct_times(acme, 3)
    secret = factories.session(bob.workspace, label="Secret", final=["budget secrets"])
    return {
        "url": live_server_daphne.url,
        "key": factories.api_key(alice, factories.READ_SCOPES),
        "meeting": meeting,
        "secret": secret,
        "alice": alice,
        "sessions_only_key": factories.api_key(alice, ["svc:sessions:read"]),
    }


def client_for(url: str, key: str | None, mode: str = "auto", auth=None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, auth=auth, timeout=20)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode)


def rest(url: str, key: str, path: str, **params) -> dict:
    response = httpx.get(f"{url}{path}", params=params, headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def same(body: dict) -> dict:
    """A result with its cursor's signing timestamp dropped: two cursors for the same position
    signed in different seconds differ only there."""
    cursor = body.get("nextCursor")
    return {**body, "nextCursor": cursor.split(":")[0] if cursor else cursor}


async def call(client: Client, name: str, arguments: dict) -> dict:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result
    body = json.loads(result.content[0].text)
    assert result.structured_content == body
    return body


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_sdk_client_calls_every_tool_and_gets_what_rest_gives(data, mode, version):
    url, key, meeting = data["url"], data["key"], data["meeting"]
    async with client_for(url, key, mode) as client:
        assert client.protocol_version == version
        assert client.server_info.name == "connect"
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["list_sessions", "get_session", "search_transcripts", "get_transcript", "list_boards",
                         "get_board"]

        page = await call(client, "list_sessions", {"limit": 2})
        assert same(page) == same(rest(url, key, "/api/v1/sessions", limit=2))
        assert same(await call(client, "list_sessions", {"limit": 2, "cursor": page["nextCursor"]})) == same(rest(
            url, key, "/api/v1/sessions", limit=2, cursor=page["nextCursor"]))
        assert await call(client, "get_session", {"sessionId": meeting.id}) == rest(
            url, key, f"/api/v1/sessions/{meeting.id}")
        assert same(await call(client, "search_transcripts", {"query": "budget"})) == same(rest(
            url, key, "/api/v1/transcripts/search", query="budget"))
        transcript = await call(client, "get_transcript", {"sessionId": meeting.id})
        assert transcript == {**rest(url, key, f"/api/v1/sessions/{meeting.id}/transcript"), "totalSegments": 2,
                              "nextCursor": None}
        boards = await call(client, "list_boards", {"sessionId": meeting.id})
        assert [b["id"] for b in boards["items"]] == [
            b["id"] for b in rest(url, key, f"/api/v1/sessions/{meeting.id}/boards")["items"]]
        assert await call(client, "get_board", {"sessionId": meeting.id, "boardSpecId": "summary"}) == rest(
            url, key, f"/api/v1/sessions/{meeting.id}/boards/summary")

        missing = await client.call_tool("get_session", {"sessionId": data["secret"].id})
        assert missing.is_error and json.loads(missing.content[0].text) == {"error": "not_found"}
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("drop_tables", {})
        assert unknown.value.error.code == -32602


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_sees_scope_errors_as_tool_results(data, mode):
    async with client_for(data["url"], data["sessions_only_key"], mode) as client:
        result = await client.call_tool("search_transcripts", {"query": "budget"})
        assert result.is_error and json.loads(result.content[0].text)["requiredScopes"] == ["svc:transcripts:read"]
        assert (await call(client, "get_session", {"sessionId": data["meeting"].id}))["session"]["label"]


@pytest.mark.filterwarnings("ignore:ping is removed")  # the SDK warns that 2026-07-28 has no ping
async def test_legacy_ping_works_and_no_session_id_is_minted(data):
    async with client_for(data["url"], data["key"], "legacy") as client:
        await client.send_ping()
    response = httpx.post(f"{data['url']}/mcp", headers={"Authorization": f"Bearer {data['key']}"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert response.status_code == 200 and "mcp-session-id" not in response.headers
    assert response.headers["content-type"] == "application/json"


async def test_unauthenticated_client_is_told_where_to_start_oauth(data):
    response = httpx.post(f"{data['url']}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"
    metadata_url = response.headers["www-authenticate"].split('resource_metadata="')[1].rstrip('"')
    assert metadata_url == f"{data['url']}/.well-known/oauth-protected-resource"  # docs/api/errors.md
    document = httpx.get(metadata_url).json()
    assert document["resource"] == data["url"]
    # Clients that probe the path-based location first still find /mcp's own document.
    probed = httpx.get(f"{data['url']}/.well-known/oauth-protected-resource/mcp").json()
    assert probed["resource"] == f"{data['url']}/mcp"
    assert httpx.get(f"{data['url']}/mcp").status_code == 405
    assert httpx.delete(f"{data['url']}/mcp").status_code == 405


async def test_live_origin_check_refuses_a_foreign_page(data):
    response = httpx.post(f"{data['url']}/mcp", headers={"Origin": "https://evil.example",
                                                         "Authorization": f"Bearer {data['key']}"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 403 and response.json()["error"]["code"] == -32600


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_oauth_provider_discovers_registers_authorizes_and_calls(data, mode):
    url, meeting = data["url"], data["meeting"]
    browser = Browser(httpx.Client(base_url=url, timeout=10))
    browser.login("alice@acme.test", "alice-password-1", next_url=AUTHORIZE)
    redirected: dict[str, str] = {}

    def consent(authorization_url: str) -> None:
        page = browser.http.get(authorization_url)
        assert page.status_code == 200, page.text[:300]
        done = browser.consent(page, workspace_id=str(data["alice"].workspace_id))
        assert done.status_code == 302
        redirected.update(query_of(done.headers["location"]))

    async def redirect_handler(authorization_url: str) -> None:
        await anyio.to_thread.run_sync(consent, authorization_url)

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected["code"], state=redirected.get("state"),
                                       iss=redirected.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=f"{url}/mcp",
        client_metadata=OAuthClientMetadata(client_name="SDK test agent", redirect_uris=[REDIRECT_URI],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    try:
        async with client_for(url, None, mode, auth=provider) as client:
            body = await call(client, "get_session", {"sessionId": meeting.id})
            assert body["session"]["id"] == meeting.id
    finally:
        browser.http.close()
    assert redirected["iss"].endswith("/api/auth")  # RFC 9207
    assert storage.client_info is not None and storage.tokens is not None
    # The 401 named the root protected-resource document, whose `resource` is `{base_url}`: the
    # SDK accepts that parent of {base_url}/mcp (mcp/shared/auth_utils.py check_resource_allowed)
    # and asks for a token for it, which is REST's audience too (docs/api/mcp.md).
    assert storage.client_info is not None and provider.context.get_resource_url().rstrip("/") == url
    token = storage.tokens.access_token
    assert httpx.get(f"{url}/api/v1/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 200


INSPECTOR_ORIGIN = "http://localhost:6274"  # the MCP Inspector's web UI


async def test_browser_client_preflight_and_call_from_an_allowed_origin(data):
    """What the Inspector's page does: a CORS preflight, then the POST with its Bearer token;
    a 401 must be readable too (WWW-Authenticate exposed) so the page can start OAuth."""
    url = f"{data['url']}/mcp"
    preflight = httpx.options(url, headers={
        "Origin": INSPECTOR_ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name"})
    assert preflight.status_code in (200, 204)
    assert preflight.headers["access-control-allow-origin"] == INSPECTOR_ORIGIN
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version", "mcp-method", "mcp-name"} <= allowed
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in preflight.headers

    call = httpx.post(url, headers={"Origin": INSPECTOR_ORIGIN, "Authorization": f"Bearer {data['key']}",
                                    "MCP-Protocol-Version": "2025-11-25"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert call.status_code == 200 and call.headers["access-control-allow-origin"] == INSPECTOR_ORIGIN

    unauthenticated = httpx.post(url, headers={"Origin": INSPECTOR_ORIGIN},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["access-control-allow-origin"] == INSPECTOR_ORIGIN
    assert "www-authenticate" in unauthenticated.headers["access-control-expose-headers"].lower()


async def test_preflight_from_a_foreign_origin_gets_no_cors_headers(data):
    preflight = httpx.options(f"{data['url']}/mcp", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization"})
    assert "access-control-allow-origin" not in preflight.headers


async def test_a_logged_in_cookie_never_authenticates_mcp(data):
    browser = Browser(httpx.Client(base_url=data["url"], timeout=10))
    try:
        await anyio.to_thread.run_sync(browser.login, "alice@acme.test", "alice-password-1")
        assert browser.http.cookies.get("sessionid")
        response = browser.http.post("/mcp", headers={"Origin": INSPECTOR_ORIGIN},
                                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    finally:
        browser.http.close()
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"
