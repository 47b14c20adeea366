"""Channels HTTP consumers (event stream, MCP), matched before the Django app."""

http_routes: list = []
