"""Channels HTTP consumers (event stream, MCP), matched before the Django app."""

from django.conf import settings
from django.urls import path, re_path

from apps.stream.consumer import EventStreamConsumer, stream_stats

from apps.mcp.consumer import McpEndpoint

http_routes: list = [
    path("api/v1/events/stream", EventStreamConsumer.as_asgi()),
    re_path(r"^mcp/?$", McpEndpoint()),
]
if settings.CONNECT_SSE_STATS:
    http_routes.append(path("api/v1/events/_stats", stream_stats))
