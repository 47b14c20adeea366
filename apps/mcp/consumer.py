"""POST /mcp under daphne: an ASGI app Channels routes before the Django app (connect/routing.py).

HTTP-level checks come first, before any JSON-RPC: the Origin allow-list (DNS-rebinding
protection, 403) and the Host, the method (GET and DELETE → 405: no SSE stream, no sessions),
the body size (413); then, on a lane thread, admission (apps/access/admission.py: 401 naming
the protected-resource metadata, 404 workspace_not_found, 403 forbidden, 429 in REST's
buckets) and the media types (415, 406). Authentication, the protocol and the tools run as
one call on one of a few long-lived threads per process (as apps/core/asgi.py runs Django's
views), so a request costs one thread hop and one pooled database connection.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from asgiref.sync import ThreadSensitiveContext
from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from apps.access.admission import admit
from apps.access.audience import accepted_audiences
from apps.access.render import render
from apps.core.origins import allowed_origin
from apps.mcp import protocol
from apps.mcp.tools import WorkspaceTools


def answer(headers: dict[str, str], body: bytes, duplicated: set[str]) -> tuple[protocol.Reply, dict[str, str]]:
    """Admit, check the media types, then speak the protocol. Runs on a lane thread (it reads
    the database); returns the reply and any extra response headers."""
    # /mcp accepts tokens for `{base_url}` (contract §5.3: REST's credentials) and for
    # `{base_url}/mcp`, and counts in REST's buckets (tools.mdx: servers MUST rate limit).
    admission = admit(headers.get("authorization"), audiences=accepted_audiences(settings.CONNECT_BASE_URL))
    if admission.error is not None:
        # Credential and rate errors are HTTP answers with the REST error body, before any JSON-RPC.
        status, error_headers, error_body = render(admission.error, admission.rate)
        return protocol.Reply(status, error_body), dict(error_headers)
    limit_headers = dict(admission.headers())
    if _media_type(headers.get("content-type", "")) != "application/json":
        message = "Content-Type must be application/json"
        return protocol.Reply(415, protocol.error_object(protocol.INVALID_REQUEST, message)), limit_headers
    if not accepts_json(headers.get("accept")):
        message = "Accept must allow application/json (responses are JSON, never an SSE stream)"
        return protocol.Reply(406, protocol.error_object(protocol.INVALID_REQUEST, message)), limit_headers
    return protocol.respond(headers, body, WorkspaceTools(admission.principal), duplicated=duplicated), limit_headers


class Lanes:
    """A few long-lived single-thread executors; each request runs its sync code on the least
    busy one (the policy of apps/core/asgi.py's LaneASGIHandler)."""

    def __init__(self, count: int) -> None:
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mcp-lane-{i}") for i in range(count)]
        self._busy = [0] * count

    async def run(self, fn, *args):
        lane = min(range(len(self._executors)), key=self._busy.__getitem__)
        self._busy[lane] += 1
        try:
            async with ThreadSensitiveContext(executor=self._executors[lane]):
                return await database_sync_to_async(fn)(*args)
        finally:
            self._busy[lane] -= 1


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def accepts_json(accept: str | None) -> bool:
    if not accept:
        return True
    types = {_media_type(part) for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"})


class McpEndpoint:
    """The ASGI application for /mcp."""

    def __init__(self) -> None:
        self._lanes: Lanes | None = None

    @property
    def lanes(self) -> Lanes:
        if self._lanes is None:
            self._lanes = Lanes(settings.CONNECT_SYNC_THREADS)
        return self._lanes

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        headers, duplicated = protocol.routing_headers(scope.get("headers", []))
        origin = headers.get("origin")
        if origin is not None and not allowed_origin(origin):
            return await self.json(send, 403, protocol.error_object(protocol.INVALID_REQUEST, "Origin not allowed"))
        host, _port = split_domain_port(headers.get("host", ""))
        if not host or not validate_host(host, settings.ALLOWED_HOSTS):
            # The Host half of DNS-rebinding protection: a name this service is not served as.
            return await self.json(send, 403, protocol.error_object(protocol.INVALID_REQUEST, "Host not allowed"))
        if scope["method"] != "POST":
            return await self.json(send, 405, {"error": "method_not_allowed"}, {"Allow": "POST"})

        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > settings.CONNECT_MCP_MAX_BODY_BYTES:
            return await self.too_large(send)
        body = await self.read_body(receive)
        if body is None:
            return  # the client left
        if len(body) > settings.CONNECT_MCP_MAX_BODY_BYTES:
            return await self.too_large(send)

        reply, extra = await self.lanes.run(answer, headers, body, duplicated)
        if reply.body is None:
            return await self.send(send, reply.status, b"", extra)
        return await self.json(send, reply.status, reply.body, extra)

    async def read_body(self, receive) -> bytes | None:
        """The whole body, or None when the client left; stops reading past the size limit
        (then the result is longer than the limit)."""
        chunks, size, limit = [], 0, settings.CONNECT_MCP_MAX_BODY_BYTES
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > limit or not message.get("more_body", False):
                return b"".join(chunks)

    async def too_large(self, send) -> None:
        limit = settings.CONNECT_MCP_MAX_BODY_BYTES
        await self.json(send, 413, protocol.error_object(
            protocol.INVALID_REQUEST, f"Request body larger than {limit} bytes"))

    async def json(self, send, status: int, body: Any, extra: dict[str, str] | None = None) -> None:
        await self.send(send, status, orjson.dumps(body), {"Content-Type": "application/json", **(extra or {})})

    @staticmethod
    async def send(send, status: int, body: bytes, headers: dict[str, str]) -> None:
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        # A length, not chunked encoding: one write for the whole small answer.
        raw += [(b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})

