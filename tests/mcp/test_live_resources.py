"""The official MCP Python SDK (`mcp` 2.x) against a live `manage.py serve`, on both protocol
generations (`auto`: 2026-07-28 after `server/discover`; `legacy`: the 2025-11-25 handshake):
templates, the resource list, reads that equal REST's answers, completion, not-found errors
with each generation's code; and `/.well-known/mcp/server.json` against what `server/discover`
and `initialize` say."""

from __future__ import annotations

import json

from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceTemplateReference

from apps.mcp import discovery
from apps.mcp.resources import TEMPLATES
from tests.mcp.test_live import anyio_backend, client_for, data, rest  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

MODES = [("auto", "2026-07-28", -32602), ("legacy", "2025-11-25", -32002)]


@pytest.mark.parametrize(("mode", "version", "missing"), MODES)
async def test_sdk_lists_templates_and_resources_reads_and_completes(data, mode, version, missing):
    url, key, meeting = data["url"], data["key"], data["meeting"]
    async with client_for(url, key, mode) as client:
        assert client.protocol_version == version
        assert client.server_capabilities.resources is not None
        assert client.server_capabilities.completions is not None

        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [t["uriTemplate"] for t in TEMPLATES]
        assert all(t.icons and t.icons[0].mime_type == "image/svg+xml" for t in templates)

        listed = await client.list_resources()
        uris = [str(r.uri) for r in listed.resources]
        assert f"connect://sessions/{meeting.id}" in uris and f"connect://sessions/{data['secret'].id}" not in uris
        newest = rest(url, key, "/api/v1/sessions", limit=50)["items"]
        assert uris == [f"connect://sessions/{s['id']}" for s in newest]

        session = await client.read_resource(f"connect://sessions/{meeting.id}")
        assert json.loads(session.contents[0].text) == rest(url, key, f"/api/v1/sessions/{meeting.id}")
        transcript = await client.read_resource(f"connect://sessions/{meeting.id}/transcript")
        assert transcript.contents[0].mime_type == "application/json"
        assert json.loads(transcript.contents[0].text) == rest(url, key, f"/api/v1/sessions/{meeting.id}/transcript")
        text = await client.read_resource(f"connect://sessions/{meeting.id}/transcripts/final?format=text")
        assert text.contents[0].mime_type == "text/plain"
        assert text.contents[0].text.splitlines() == ["[00:00:00.000] Speaker 1: We discuss the budget.",
                                                      "[00:00:02.000] Speaker 1: Then hiring."]
        board = await client.read_resource(f"connect://sessions/{meeting.id}/boards/summary")
        assert json.loads(board.contents[0].text) == rest(url, key, f"/api/v1/sessions/{meeting.id}/boards/summary")

        reference = ResourceTemplateReference(type="ref/resource", uri=TEMPLATES[1]["uriTemplate"])
        completion = (await client.complete(reference, {"name": "sessionId", "value": "budg"})).completion
        assert completion.values == [meeting.id] and completion.has_more is False

        with pytest.raises(MCPError) as unknown:
            await client.read_resource(f"connect://sessions/{data['secret'].id}/transcript")
        assert unknown.value.error.code == missing


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_server_json_says_what_the_server_says(data, mode, version):
    url = data["url"]
    response = httpx.get(f"{url}/.well-known/mcp/server.json")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    document = response.json()
    async with client_for(url, data["key"], mode) as client:
        info = client.server_info.model_dump(mode="json", by_alias=True, exclude_none=True)
        capabilities = client.server_capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
    published = document["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
    assert published["serverInfo"] == info
    assert (document["title"], document["version"], document["icons"]) == (info["title"], info["version"],
                                                                           info["icons"])
    if mode == "legacy":  # the 2025 generations have no resource subscriptions (no session to hold them)
        assert capabilities["resources"] == {"subscribe": False, "listChanged": False}
        capabilities["resources"] = published["capabilities"]["resources"]
    assert {k: v for k, v in published["capabilities"].items()} == capabilities
    remote = document["remotes"][0]
    host = url.split("://", 1)[1]
    assert remote["type"] == "streamable-http"
    assert remote["url"].replace("{host}", remote["variables"]["host"]["default"]) == f"{url}/mcp"
    assert remote["variables"]["host"]["default"] == host
    header = remote["headers"][0]
    assert (header["name"], header["isSecret"], header["value"]) == ("Authorization", True, "Bearer {api_key}")
    assert header["variables"]["api_key"]["isSecret"] is True
    # The registry schema's own rules (2025-12-11): a reverse-DNS name, a description of at most 100.
    assert document["$schema"].endswith("/2025-12-11/server.schema.json")
    assert len(document["description"]) <= 100 and document["name"].count("/") == 1

    # The icon is a static file (served as every collected one is, apps/core/static.py).
    assert info["icons"][0]["src"] == f"{url}{settings.STATIC_URL}{discovery.ICON_PATH}"
    svg = Path(finders.find(discovery.ICON_PATH)).read_text()
    assert svg.lstrip().startswith("<svg") and "<script" not in svg and len(svg) < 2_000
