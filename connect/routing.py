"""Channels HTTP consumers (event stream, MCP), matched before the Django app."""

from django.urls import path, re_path

from apps.mcp.consumer import McpEndpoint
from apps.stream.consumer import EventStreamConsumer

http_routes: list = [
    path("api/v1/events/stream", EventStreamConsumer.as_asgi()),
    re_path(r"^mcp/?$", McpEndpoint()),
]
