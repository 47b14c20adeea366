"""The door every HTTP request passes first (connect/asgi.py wraps the whole application in
`Door`): its request id, its log context, its access line and its request metrics.

- `X-Request-Id` on every response: a well-formed inbound id (at most 128 of `[A-Za-z0-9._-]`)
  is kept, anything else replaced; error bodies carry it as `requestId` (apps/core/errors.py).
- An inbound W3C `traceparent` is kept in the log context.
- One access line per request on logger `connect.access` when its response ends (a stream's
  when it closes): method, route template (never the raw path), status, duration, bytes,
  workspace and credential ids, request id; on `/mcp` also the call's method, tool and error.
- `connect_http_requests` and `connect_http_request_duration_seconds` by route template; a
  request no route matched is `unmatched`, so a scan of random paths adds no label values.

Not seen here: the answers daphne gives before any application runs (engine/http_limits.py)."""

from __future__ import annotations

import logging
import time
from typing import Any

from apps.core import context, metrics

access_log = logging.getLogger("connect.access")

UNMATCHED = "unmatched"


class Door:
    def __init__(self, app, *, static_prefix: str | None = None) -> None:
        self.app = app
        self.static_prefix = static_prefix

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        inbound = traceparent = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                inbound = value.decode("latin-1")
            elif name == b"traceparent":
                traceparent = value.decode("latin-1")
        request = context.RequestContext(context.request_id_from(inbound), context.valid_traceparent(traceparent))
        if self.static_prefix is not None and scope["path"].startswith(self.static_prefix):
            request.route = "static"
        header = (b"x-request-id", request.request_id.encode("ascii"))
        status = 0
        sent = 0

        async def door_send(message: dict[str, Any]) -> None:
            nonlocal status, sent
            kind = message["type"]
            if kind == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            elif kind == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        door_send.inner = send  # engine/daphne_stream.py finds daphne's request through it
        token = context.current.set(request)
        started = time.perf_counter()
        try:
            await self.app(scope, receive, door_send)
        except Exception:
            status = status or 500  # daphne answers its own 500 (without our header)
            raise
        finally:
            context.current.reset(token)
            # No response started: the client left first (499, as nginx logs it).
            finish(scope["method"], request, status or 499, sent, time.perf_counter() - started)


def finish(method: str, request: context.RequestContext, status: int, sent: int, seconds: float) -> None:
    route = request.route or UNMATCHED
    metrics.record_request(route, method, status, seconds)
    if not access_log.isEnabledFor(logging.INFO):
        return
    fields = {
        "method": method, "route": route, "status": status, "duration_ms": round(seconds * 1000, 2),
        "bytes": sent, "request_id": request.request_id, "traceparent": request.traceparent,
        "workspace_id": request.workspace_id, "credential_id": request.credential_id,
    }  # fmt: skip
    if request.mcp_call is not None:
        fields["mcp_method"], fields["tool"], fields["is_error"] = request.mcp_call
    access_log.info("%s %s %s", method, route, status, extra=fields)


def named_route(app, template: str):
    """A Channels route's ASGI app that notes its route template for the access line."""

    async def routed(scope, receive, send):
        context.note_route(template)
        return await app(scope, receive, send)

    return routed


class RouteMiddleware:
    """Django's side: the route template of the view that answered (`resolver_match.route`)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = request.resolver_match
        if match is not None:
            context.note_route(match.route)
        return response


# --- The event stream's own lines (apps/stream/consumer.py calls these) ----------------------

stream_log = logging.getLogger("connect.events")


def stream_opened() -> float:
    """Counts an open stream and writes its open line; returns the time to pass to `stream_closed`."""
    metrics.OPEN_STREAMS.inc()
    stream_log.info("event stream opened")
    return time.monotonic()


def stream_closed(opened_at: float, reason: str, events_sent: int) -> None:
    metrics.OPEN_STREAMS.dec()
    metrics.STREAM_CLOSES.labels(reason).inc()
    seconds = time.monotonic() - opened_at
    stream_log.info(
        "event stream closed: %s",
        reason,
        extra={"close_reason": reason, "duration_ms": round(seconds * 1000), "events_sent": events_sent},
    )
