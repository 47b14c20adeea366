"""What Connect says about itself as an MCP server, before any tool runs: its identity with an
icon, its capabilities (apps/mcp/protocol.py), and the `server.json` the MCP registry reads
(schema 2025-12-11: a `streamable-http` remote whose URL is a template over the host, and an
`Authorization` header marked secret). `/.well-known/mcp/server.json` serves that document
(connect/wellknown.py); it is built from the same values `server/discover` and `initialize`
answer with, so the two cannot drift (tests/mcp/test_discovery.py compares them live).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from apps.mcp import protocol

SERVER_JSON_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
# Icons (Implementation.icons, Tool.icons, Resource(Template).icons) arrived in 2025-11-25.
ICON_VERSIONS = frozenset({"2025-11-25", protocol.MODERN_VERSION})
ICON_PATH = "mcp/connect.svg"
# The registry's description is at most 100 characters.
REGISTRY_DESCRIPTION = "Read-only access to a workspace's recorded sessions, transcripts and AI boards."


def icons() -> list[dict[str, Any]]:
    """The server's icon, an absolute URL on this deployment (a scalable SVG, so any size).
    The plain static name, not the hashed one: the URL stays the same across deployments (a
    registry entry keeps it), and the static server answers both."""
    return [{"src": f"{settings.CONNECT_BASE_URL}{settings.STATIC_URL}{ICON_PATH}", "mimeType": "image/svg+xml",
             "sizes": ["any"]}]  # fmt: skip


def server_info(version: str) -> dict[str, Any]:
    info = dict(protocol.SERVER_INFO)
    if version in ICON_VERSIONS:
        info["icons"] = icons()
        info["websiteUrl"] = f"{settings.CONNECT_BASE_URL}/docs"
    return info


def registry_name(base_url: str) -> str:
    """A reverse-DNS name from the deployment's host (`connect.example.com` → `com.example.connect`)."""
    host = urlsplit(base_url).hostname or "localhost"
    return ".".join(reversed(host.split("."))) + "/connect"


def server_json() -> dict[str, Any]:
    base = urlsplit(settings.CONNECT_BASE_URL)
    info = server_info(protocol.MODERN_VERSION)
    return {
        "$schema": SERVER_JSON_SCHEMA,
        "name": registry_name(settings.CONNECT_BASE_URL),
        "title": info["title"],
        "description": REGISTRY_DESCRIPTION,
        "version": info["version"],
        "websiteUrl": info["websiteUrl"],
        "icons": info["icons"],
        "remotes": [
            {
                "type": "streamable-http",
                "url": f"{base.scheme}://{{host}}{base.path}/mcp",
                "variables": {
                    "host": {
                        "description": "the host (and port) Connect is served at",
                        "isRequired": True,
                        "default": base.netloc,
                    }
                },
                "headers": [
                    {
                        "name": "Authorization",
                        "description": "An API key (svc_…) as a Bearer token; without it, clients use OAuth "
                        "(the 401 names the protected-resource metadata).",
                        "isRequired": False,
                        "isSecret": True,
                        "value": "Bearer {api_key}",
                        "variables": {
                            "api_key": {"description": "a Connect API key", "isRequired": True, "isSecret": True}
                        },
                    }
                ],
            }
        ],
        "_meta": {
            "io.modelcontextprotocol.registry/publisher-provided": {
                "serverInfo": info,
                "supportedVersions": list(protocol.SUPPORTED_VERSIONS),
                "capabilities": {**protocol.MODERN_CAPABILITIES,
                                 "extensions": {protocol.EVENTS_EXTENSION: protocol.EVENTS_SETTINGS}},
            }
        },
    }
