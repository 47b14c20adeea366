"""A metadata-document client through the whole authorization server: the consent page names
the document's host; a refused document leaves no client behind; and the official MCP SDK's
OAuth provider, given only a `client_metadata_url`, discovers, authorizes and calls tools on a
live server that fetches the document from a loopback HTTPS server the test runs."""

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

from apps.oauth.models import Application
from tests.oauth.cimd_server import Route, document
from tests.oauth.flow import (
    AUTHORIZE, REDIRECT_URI, REGISTER, Browser, MemoryStorage, authorize_params, pkce_pair, query_of,
)
from tests.servers import serve

DOCUMENT = "/agent/client.json"


def authorize(client, settings, client_id: str):
    params = authorize_params(client_id, pkce_pair()[1], resource=settings.CONNECT_BASE_URL)
    return client.get(AUTHORIZE, params)


def test_the_consent_page_names_the_documents_host(client, alice, settings, testing):
    client_id = testing.serve_document(DOCUMENT, host="localhost")
    client.force_login(alice.user)
    page = authorize(client, settings, client_id)
    html = page.content.decode()
    assert page.status_code == 200, html[:500]
    host = f"localhost:{testing.server_address[1]}"
    assert f'id="document-host">{host}<' in html
    assert 'id="unverified"' in html and f"it is published at {host}," in html
    stored = Application.objects.get(client_id=client_id)
    assert (stored.registration_source, stored.name) == (Application.RegistrationSource.CIMD, "CIMD Agent")


def test_a_registered_client_has_no_document_host(client, alice, settings):
    registered = client.post(REGISTER, json.dumps({
        "client_name": "DCR Agent", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none",
    }), content_type="application/json")
    assert registered.status_code == 201, registered.content
    client.force_login(alice.user)
    html = authorize(client, settings, registered.json()["client_id"]).content.decode()
    assert "DCR Agent" in html and 'id="document-host"' not in html


@pytest.mark.parametrize("case", ["loopback outside tests", "oversized", "mismatched client_id", "redirect"])
def test_a_refused_document_is_an_unknown_client_and_leaves_no_row(client, alice, settings, server, case):
    client_id = server.url(DOCUMENT)
    if case != "loopback outside tests":
        settings.CONNECT_CIMD_TESTING_CA_FILE = str(server.ca_file)
    server.routes[DOCUMENT] = {
        "loopback outside tests": Route(body=document(client_id)),
        "oversized": Route(body=document(client_id, padding="x" * 6000)),
        "mismatched client_id": Route(body=document(server.url("/someone/else.json"))),
        "redirect": Route(status=302, headers={"Location": server.url("/elsewhere.json")}),
    }[case]
    client.force_login(alice.user)
    page = authorize(client, settings, client_id)
    assert page.status_code == 400 and "location" not in page.headers
    assert "cannot be completed" in page.content.decode()
    assert not Application.objects.filter(client_id=client_id).exists()
    assert server.hits == ([] if case == "loopback outside tests" else [DOCUMENT])


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def live(django_db_setup, transactional_db, server, tmp_path):
    """A live server whose settings trust the document server's CA (tests/oauth/cimd_settings.py)."""
    env = {"DJANGO_SETTINGS_MODULE": "tests.oauth.cimd_settings", "CONNECT_TEST_CIMD_CA_FILE": str(server.ca_file)}
    with serve(tmp_path / "live", env=env) as running:
        yield running


@pytest.mark.e2e
@pytest.mark.anyio
async def test_the_mcp_sdk_authorizes_with_a_metadata_document(live, server, alice):
    client_id = server.serve_document(DOCUMENT, host="localhost", client_name="SDK metadata agent")
    browser = Browser(httpx.Client(base_url=live.url, timeout=20))
    browser.login("alice@acme.test", "alice-password-1", next_url=AUTHORIZE)
    seen: dict[str, str] = {}

    def consent(authorization_url: str) -> None:
        page = browser.http.get(authorization_url)
        assert page.status_code == 200, page.text[:500]
        seen["page"] = page.text
        done = browser.consent(page, workspace_id=str(alice.workspace_id))
        assert done.status_code == 302, done.text[:300]
        seen.update(query_of(done.headers["location"]))

    async def redirect_handler(authorization_url: str) -> None:
        await anyio.to_thread.run_sync(consent, authorization_url)

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=seen["code"], state=seen.get("state"), iss=seen.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=f"{live.url}/mcp",
        client_metadata=OAuthClientMetadata(client_name="SDK metadata agent", redirect_uris=[REDIRECT_URI],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=client_id,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    try:
        async with Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as mcp:
            tools = await mcp.list_tools()
            result = await mcp.call_tool("list_sessions", {})
    finally:
        browser.http.close()
    assert "list_sessions" in {tool.name for tool in tools.tools} and not result.is_error

    # The SDK used the URL as its client_id and never registered; the server fetched the
    # document (from loopback, only because the test's settings trust its CA) and stored it.
    assert storage.client_info.client_id == client_id
    assert server.hits[0] == DOCUMENT
    stored = await anyio.to_thread.run_sync(lambda: Application.objects.get(client_id=client_id))
    assert stored.registration_source == Application.RegistrationSource.CIMD and stored.name == "SDK metadata agent"
    assert not await anyio.to_thread.run_sync(
        lambda: Application.objects.filter(registration_source=Application.RegistrationSource.DCR).exists())
    assert f'id="document-host">localhost:{server.server_address[1]}<' in seen["page"]
    token = storage.tokens.access_token
    assert httpx.get(f"{live.url}/api/v1/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 200
