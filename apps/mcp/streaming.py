"""The /mcp requests answered with a stream: `subscriptions/listen` (2026-07-28) and the events
extension's `events/stream` (both generations). /mcp (apps/mcp/consumer.py) reads the body,
sees one of these methods and hands the parsed request here.

The stream is the event stream's (apps/stream/consumer.py): admitted as /mcp admits (its token
audiences, REST's rate buckets), then the same carrier, the same per-workspace slot limit
(`CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE`, counted with the event streams), the same resume
from the log, heartbeats, flow control and ends (a revoked credential or a deactivated member
ends it, a client that leaves frees its slot and its socket at once), counted in the stream's
metrics. Only the protocol differs: a refusal before the stream opens is a JSON-RPC error (or,
for the credential and rate checks that come before any JSON-RPC, REST's error body, as /mcp
answers them), and the frames are MCP notifications (apps/mcp/listen.py, events_stream.py)."""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings

from apps.access.admission import wrong_door
from apps.access.principal import Principal
from apps.core import context
from apps.core.errors import ApiError, InsufficientScope
from apps.events.positions import Position
from apps.mcp import events_extension, events_stream, listen
from apps.mcp.wire import accepts_json, media_type
from apps.mcp.protocol import (
    HEADERLESS_VERSION,
    INSUFFICIENT_SCOPE,
    INVALID_REQUEST,
    LEGACY_VERSIONS,
    METHOD_NOT_FOUND,
    MODERN_ERROR_STATUS,
    MODERN_VERSION,
    STREAMING_METHODS,
    ProtocolError,
    _valid_id,
    check_envelope,
    declares_modern,
    error_object,
    observe_call,
)
from apps.oauth.audience import accepted_audiences
from apps.stream.consumer import EventStreamConsumer


def streaming_request(body: bytes) -> dict[str, Any] | None:
    """The parsed request when the body is one request /mcp answers with a stream, else None
    (most bodies are told apart without parsing them here). Parsed once: the stream's consumer
    is given this message, not the body to parse again."""
    if b"subscriptions/listen" not in body and b"events/stream" not in body:
        return None
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return message if isinstance(message, dict) and message.get("method") in STREAMING_METHODS else None


class Refusal(ApiError):
    """A JSON-RPC error answering the streaming request, with its HTTP status."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__("mcp_refusal", status=status)
        self.reply = body


def accepts_event_stream(accept: str | None) -> bool:
    if not accept:
        return True
    types = {media_type(part) for part in accept.split(",")}
    return bool(types & {"text/event-stream", "text/*", "*/*"})


class McpStreamConsumer(EventStreamConsumer):
    """One streaming /mcp request: `message` is the request, already read and parsed by /mcp,
    `headers` its headers as /mcp read them (wire.routing_headers: the headers by lower-cased
    name, and the routing headers that appeared twice)."""

    message: dict[str, Any]
    headers: tuple[dict[str, str], set[str]]
    modern = True
    resume_at: Position | str | None = None

    def __init__(self, message: dict[str, Any], headers: tuple[dict[str, str], set[str]]) -> None:
        super().__init__()
        self.message, self.headers = message, headers

    @property
    def method(self) -> str:
        return self.message["method"]

    def refuse(self, code: int, message: str, data: Any = None, *, status: int | None = None) -> Refusal:
        request_id = self.message.get("id")
        observe_call(self.method, self.message.get("params"), None, None)  # type: ignore[arg-type]
        if status is None and self.modern:
            status = MODERN_ERROR_STATUS.get(code, 200)
        elif status is None:
            # As protocol.respond answers the 2025 generations.
            scope_error = isinstance(data, dict) and data.get("error") == INSUFFICIENT_SCOPE
            status = 400 if code == INVALID_REQUEST else 403 if scope_error else 200
        return Refusal(status, error_object(code, message, data, request_id if _valid_id(request_id) else None))

    async def send_error(self, error: ApiError) -> None:
        if not isinstance(error, Refusal):
            return await super().send_error(error)  # credentials, rates, slots: REST's body, as /mcp answers them
        raw = [(b"content-type", b"application/json"), *self._rate_headers()]
        await self.send_response(error.status, orjson.dumps(error.reply), headers=raw)

    async def admitted(self, hub) -> Principal:
        headers, duplicated = self.headers
        admission = await hub.admit(headers.get("authorization"), audiences=accepted_audiences(settings.CONNECT_BASE_URL))
        self.rate = admission.rate
        if isinstance(admission.error, InsufficientScope):  # an ingest key at a read door
            raise wrong_door(ingest=False, needs=settings.CONNECT_READ_SCOPES)
        if admission.error is not None:
            raise admission.error
        principal: Principal = admission.principal
        context.note_principal(principal.workspace.id, principal.credential_id)
        if media_type(headers.get("content-type", "")) != "application/json":
            raise self.refuse(INVALID_REQUEST, "Content-Type must be application/json", status=415)
        if not accepts_event_stream(headers.get("accept")) or not accepts_json(headers.get("accept")):
            raise self.refuse(INVALID_REQUEST, f"{self.method} answers with a stream: Accept must allow "
                              "application/json and text/event-stream", status=406)
        self._check_protocol(headers, duplicated)
        return principal

    def _check_protocol(self, headers: dict[str, str], duplicated: set[str]) -> None:
        """The request's envelope as protocol.respond checks it, for the era it speaks."""
        message = self.message
        header_version = headers.get("mcp-protocol-version")
        self.modern = header_version == MODERN_VERSION or (header_version is None and declares_modern(message))
        if message.get("jsonrpc") != "2.0" or not _valid_id(message.get("id")) or not isinstance(
                message.get("params", {}), dict):
            raise self.refuse(INVALID_REQUEST, "Not a JSON-RPC 2.0 request with an id and params object", status=400)
        if self.modern:
            try:
                check_envelope(headers, message, duplicated)
            except ProtocolError as error:
                raise self.refuse(error.code, error.message, error.data, status=error.status) from None
            return
        version = header_version or HEADERLESS_VERSION
        if version not in LEGACY_VERSIONS:
            raise self.refuse(-32022, "Unsupported protocol version",
                              {"supported": [MODERN_VERSION, *LEGACY_VERSIONS], "requested": version}, status=400)
        if self.method == "subscriptions/listen":
            raise self.refuse(METHOD_NOT_FOUND, "subscriptions/listen is part of MCP 2026-07-28 only")

    async def subscribe(self, hub, principal: Principal):
        params = self.message.get("params", {})
        request_id = self.message["id"]
        try:
            if self.method == "subscriptions/listen":
                self.resume_at = listen.resume_point(params, self._header(b"last-event-id"))
                watched, list_changed = listen.watched_for(params, principal)
                # As an event stream's open: its checks on the loop, its one database read
                # shared with the opens of a burst that ask the same (Hub.read_shared).
                workspace_id, sessions = principal.workspace.id, listen.sessions_of(watched)
                known = await hub.read_shared(("listen-sessions", workspace_id, sessions), listen.known_sessions,
                                              workspace_id=workspace_id, sessions=sessions)
                subscription = listen.subscription_for(watched, list_changed, known, request_id)
            else:
                subscription, self.resume_at = events_stream.subscription_for(params, principal, request_id,
                                                                              self.modern)
        except ProtocolError as error:
            raise self.refuse(error.code, error.message, error.data, status=error.status) from None
        except events_extension.EventsError as error:
            raise self.refuse(error.code, error.message, error.data) from None
        observe_call(self.method, params, None, {})  # type: ignore[arg-type]
        return subscription

    def resume_point(self) -> Position | str | None:
        return self.resume_at

    async def opening(self, hub, resumed: bool | None) -> bytes:
        subscription = self.stream.subscription
        if isinstance(subscription, listen.ListenSubscription):
            ack = listen.sse(None, subscription.acknowledgment())
            return ack + (b": resume-unavailable\n\n" if resumed is False else b"")
        if resumed:
            cursor = self.message["params"]["cursor"]
        else:
            cursor = await hub.run_db(events_stream.now_cursor, subscription, self.stream.workspace_id, retry=True)
        return subscription.active(cursor, truncated=resumed is False)
