"""POST /mcp under daphne: an ASGI app Channels routes before the Django app (connect/routing.py).

HTTP-level checks come first, before any JSON-RPC: the Origin allow-list (DNS-rebinding
protection, 403) and the Host, the method (GET and DELETE → 405: no GET stream, no sessions),
the body size (413). `subscriptions/listen` and `events/stream` are answered with a stream
(apps/mcp/streaming.py); every other request with JSON:, on a lane thread, admission (apps/access/admission.py: 401 naming
the protected-resource metadata, 404 workspace_not_found, 403 forbidden, 429 in REST's
buckets) and the media types (415, 406). Authentication, the protocol and the tools run as
one call on one of the process's lanes (engine/lanes.py, shared with Django's views),
so a request costs one thread hop and one pooled database connection.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from apps.access.admission import admit
from apps.access.render import render
from apps.core.errors import ApiError, RequestTimeout, Unavailable, as_api_error
from apps.core.origins import allowed_origin
from apps.mcp import protocol
from apps.mcp.streaming import McpStreamConsumer, streaming_request
from apps.mcp.tools import WorkspaceTools
from apps.mcp.wire import accepts_json, media_type
from apps.oauth.audience import accepted_audiences
from engine.faults import run_read_only
from engine.lanes import SHED_RETRY_AFTER_SECONDS, Lanes, Overloaded, process_lanes

logger = logging.getLogger("connect.mcp")


def answer(headers: dict[str, str], body: bytes, duplicated: set[str]) -> tuple[protocol.Reply, dict[str, str]]:
    """Admit, check the media types, then speak the protocol. Runs on a lane thread (it reads
    the database); returns the reply and any extra response headers."""
    # /mcp accepts tokens for `{base_url}` (REST's credentials: docs/api/mcp.md) and for
    # `{base_url}/mcp`, and counts in REST's buckets (tools.mdx: servers MUST rate limit).
    audiences = accepted_audiences(settings.CONNECT_BASE_URL)
    admission = admit(headers.get("authorization"), audiences=audiences, needs=settings.CONNECT_READ_SCOPES)
    if admission.error is not None:
        # Credential and rate errors are HTTP answers with the REST error body, before any JSON-RPC.
        status, error_headers, error_body = render(admission.error, admission.rate)
        return protocol.Reply(status, error_body), dict(error_headers)
    limit_headers = dict(admission.headers())
    if media_type(headers.get("content-type", "")) != "application/json":
        message = "Content-Type must be application/json"
        return protocol.Reply(415, protocol.error_object(protocol.INVALID_REQUEST, message)), limit_headers
    if not accepts_json(headers.get("accept")):
        message = "Accept must allow application/json (responses are JSON, never an SSE stream)"
        return protocol.Reply(406, protocol.error_object(protocol.INVALID_REQUEST, message)), limit_headers
    tools = WorkspaceTools(admission.principal)
    return protocol.respond(headers, body, tools, duplicated=duplicated), limit_headers


class McpEndpoint:
    """The ASGI application for /mcp."""

    @property
    def lanes(self) -> Lanes:
        return process_lanes()

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
        message = streaming_request(body)
        if message is not None:
            return await self.stream(scope, receive, send, message, (headers, duplicated))

        try:
            # The tools only read, so a request whose connection died runs once more.
            reply, extra = await self.lanes.run(run_read_only, answer, headers, body, duplicated)
        except Overloaded:
            # The process is saturated: shed at once, with the REST body as for 429.
            error = Unavailable(retry_after=SHED_RETRY_AFTER_SECONDS)
            return await self.json(send, error.status, error.body(), error.headers())
        except Exception as exc:  # noqa: BLE001 - a JSON-RPC error, never daphne's HTML 500 page
            return await self.failed(send, exc, body)
        if reply.body is None:
            return await self.send(send, reply.status, b"", extra)
        return await self.json(send, reply.status, reply.body, extra)

    @staticmethod
    async def stream(scope: dict[str, Any], receive, send, message: dict[str, Any],
                     headers: tuple[dict[str, str], set[str]]) -> None:
        """A request answered with a stream (apps/mcp/streaming.py): its consumer is given the
        request this endpoint has read and parsed, and its headers as read here (its
        `http.request` carries no body: the consumer needs only the message), then the
        connection's own messages (its disconnect)."""
        given = False

        async def receive_request() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return await receive()

        await McpStreamConsumer(message, headers)(scope, receive_request, send)

    async def failed(self, send, exc: Exception, body: bytes) -> None:
        """A failure of the work on the lane, as a JSON-RPC error answering the request's id:
        503 (with `Retry-After` when a dependency is down) for an outage or the deadline, else
        500. The REST code is in `error.data.error`."""
        error = as_api_error(exc)
        if isinstance(error, (Unavailable, RequestTimeout)):
            status, message = 503, "Service unavailable; retry later"
        else:
            logger.error("unhandled error in /mcp", exc_info=exc)
            error, status, message = ApiError(), 500, "Internal error"
        try:
            message_id = orjson.loads(body).get("id")
        except (orjson.JSONDecodeError, AttributeError):
            message_id = None
        request_id = message_id if isinstance(message_id, (str, int)) and not isinstance(message_id, bool) else None
        reply = protocol.error_object(protocol.INTERNAL_ERROR, message, {"error": error.code}, request_id)
        await self.json(send, status, reply, error.headers())

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

