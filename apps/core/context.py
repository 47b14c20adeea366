"""What identifies the work in hand — a request, a stream, a tool call — for its log lines and its
error bodies: one `RequestContext` per request, set by the door (apps/access/door.py) and read
by the log filter (apps/core/logs.py) and `ApiError.body()` (apps/core/errors.py).

One context variable holds one mutable object: the door sets it once per request (each
`ContextVar.set` costs every later hop to a lane thread a little, see connect/asgi.py), and what
is learnt later — the route, the credential — is written into the object, so it reaches the
door's access line even when it was learnt on a lane thread (asgiref copies the context there,
and the copy refers to the same object). Work a thread pool runs without copying the context
(`loop.run_in_executor`) sees no request: its lines carry no request id.
"""

from __future__ import annotations

import re
import secrets
from contextvars import ContextVar
from dataclasses import dataclass

# Inbound `X-Request-Id`: kept when well-formed, else replaced (never echoed: it lands in logs).
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# W3C Trace Context `traceparent`, version 00 (https://www.w3.org/TR/trace-context/#traceparent-header).
TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


@dataclass
class RequestContext:
    request_id: str
    traceparent: str | None = None
    route: str | None = None
    workspace_id: str | None = None
    credential_id: str | None = None
    # The MCP call this request carried (method, tool, isError), written on its access line.
    mcp_call: tuple[str, str | None, bool] | None = None


current: ContextVar[RequestContext | None] = ContextVar("connect_request", default=None)


def new_request_id() -> str:
    return "req_" + secrets.token_hex(12)


def request_id_from(inbound: str | None) -> str:
    """The inbound id when well-formed (at most 128 of `[A-Za-z0-9._-]`), else a fresh one."""
    if inbound and REQUEST_ID.fullmatch(inbound):
        return inbound
    return new_request_id()


def valid_traceparent(value: object) -> str | None:
    if isinstance(value, str) and len(value) == 55 and TRACEPARENT.fullmatch(value):
        return value
    return None


def get() -> RequestContext | None:
    return current.get()


def note_principal(workspace_id: object, credential_id: object) -> None:
    """The credential admitted for this request: its id and its workspace's, never the secret."""
    context = current.get()
    if context is not None:
        context.workspace_id, context.credential_id = str(workspace_id), str(credential_id)


def note_route(route: str) -> None:
    context = current.get()
    if context is not None and context.route is None:
        context.route = route


def note_mcp_call(method: str, tool: str | None, is_error: bool) -> bool:
    """The request's MCP call, for its access line; False when there is no request in hand or it
    already noted one (a legacy batch): the caller then logs the call on a line of its own."""
    context = current.get()
    if context is None or context.mcp_call is not None:
        return False
    context.mcp_call = (method, tool, is_error)
    return True


def note_traceparent(value: object) -> None:
    """A `traceparent` carried in the request's body (MCP's `_meta.traceparent`); malformed ones
    are ignored."""
    context = current.get()
    traceparent = valid_traceparent(value)
    if context is not None and traceparent is not None:
        context.traceparent = traceparent
