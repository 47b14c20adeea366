"""The benchmark's reference: the official MCP SDK's own server (`MCPServer`, stateless HTTP,
JSON responses) exposing get_session and search_transcripts over the same database through
Django's ORM, with the same Bearer check, rate-limit count, selectors and representations as Connect's /mcp.

    DJANGO_SETTINGS_MODULE=connect.settings uvicorn bench.mcp_sdk_server:app --workers 2

Tool functions are sync (ORM); the SDK runs them in a worker thread. A credential the tool
cannot use is a tool error, as at Connect's endpoint.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")

import django  # noqa: E402

django.setup()

from asgiref.sync import sync_to_async  # noqa: E402
from django.db import close_old_connections  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402

from apps.access.credentials import authenticate_bearer  # noqa: E402
from apps.access.ratelimit import check_rate_limit_sync  # noqa: E402
from apps.core.errors import ApiError  # noqa: E402
from apps.recordings import search, selectors  # noqa: E402
from apps.recordings.representations import search_hit_repr, session_row_repr  # noqa: E402

server = MCPServer("connect-sdk-reference")


def _get_session(authorization: str | None, session_id: str) -> dict:
    close_old_connections()
    try:
        principal = authenticate_bearer(authorization)
        check_rate_limit_sync(principal)  # Connect counts every call; so does the reference
        row = selectors.session_row(workspace=principal.workspace, session_id=session_id)
        return {"session": session_row_repr(row)}
    except ApiError as error:
        raise ValueError(error.code) from None
    finally:
        close_old_connections()


def _search(authorization: str | None, query: str, limit: int) -> dict:
    close_old_connections()
    try:
        principal = authenticate_bearer(authorization)
        check_rate_limit_sync(principal)
        hits, next_cursor = search.search_transcripts(workspace=principal.workspace, query=query, limit=limit)
        return {"items": [search_hit_repr(h) for h in hits], "nextCursor": next_cursor}
    except ApiError as error:
        raise ValueError(error.code) from None
    finally:
        close_old_connections()


@server.tool()
async def get_session(sessionId: str, ctx: Context) -> dict:  # noqa: N803 - the wire name
    """Read one session's metadata by id."""
    return await sync_to_async(_get_session, thread_sensitive=False)((ctx.headers or {}).get("authorization"),
                                                                      sessionId)


@server.tool()
async def search_transcripts(query: str, ctx: Context, limit: int = 20) -> dict:
    """Full-text search over transcripts."""
    return await sync_to_async(_search, thread_sensitive=False)((ctx.headers or {}).get("authorization"), query,
                                                                limit)


app = server.streamable_http_app(
    json_response=True,
    stateless_http=True,
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)
