"""`GET /api/v1/events/stream` in /openapi.json (docs/api/events-and-stream.md). It is a
Channels consumer, not a DRF view, so it is described here: the `text/event-stream` response
and the envelope of each event type, the `filters` parameter, `Last-Event-ID` (our resume
extension), and every error, each a JSON body sent before any stream byte.

Each envelope is derived from the declarations REST, MCP and webhooks use: the envelope's in
apps/events/shapes.py, each type's data as its recorder registered it there (a session in an
event is the `SessionOut` component)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import orjson
from django.conf import settings

from apps.events import filters
from apps.events.models import Event
from apps.events.representations import event_envelope
from apps.events.shapes import ENVELOPE_NAMES, EXAMPLES, typed_envelope

PATH = "/api/v1/events/stream"
ERROR_REF = "#/components/schemas/Error"
EXAMPLE_EVENT_ID = "evt_01jd8x5k3m6q2w9r7t4v0y1z3a"

FRAMES = """Each event is one frame:

```
id: evt_01jd8x5k3m6q2w9r7t4v0y1z3a
event: session.status_changed
data: {"type":"session.status_changed","sessionId":"…","occurredAt":"…","data":{…}}

```

`event:` equals the envelope's `type`; `data:` is one line of JSON, exactly
`{type, sessionId, occurredAt, data}` (schemas below, one per type); `id:` is the event's `evt_`
id (for `Last-Event-ID`). The stream opens with a `: connected` comment (or
`: resume-unavailable`, see `Last-Event-ID`) and sends a `: ping` comment every
{heartbeat} seconds. Without `filters` it carries `session.created` and
`session.status_changed` as far as the credential's scopes allow (possibly nothing but pings,
never a 403). Delivery is best effort: events committed while a client is not connected are
not delivered unless it resumes; reconcile through the REST API after a reconnect.
The server ends the stream when the credential is revoked or its member deactivated (within
one heartbeat), and cuts off a client that does not read fast enough. See docs/events.md."""


def _envelope(event_type: str) -> dict[str, Any]:
    description = f"`{event_type}` (needs `{filters.TYPE_SCOPES[event_type]}`)"
    return typed_envelope(event_type, description).json_schema()


def _example_stream() -> str:
    """A stream's first bytes, its event written by the functions the stream uses."""
    at = datetime(2026, 1, 5, 9, 30, 0, 123000, tzinfo=timezone.utc)
    session_id, data = EXAMPLES[filters.SESSION_CREATED](at)
    event = Event(type=filters.SESSION_CREATED, session_id=session_id, occurred_at=at, data=data)
    data = orjson.dumps(event_envelope(event)).decode()
    return f": connected\n\nid: {EXAMPLE_EVENT_ID}\nevent: {event.type}\ndata: {data}\n\n: ping\n\n"


def _filter_entry() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["type"],
        "properties": {
            "type": {"type": "string", "enum": list(filters.TYPE_SCOPES)},
            "sessionId": {"type": "string", "minLength": 1, "description": "required for `transcript.segment.created`"},
        },
        "if": {"properties": {"type": {"const": filters.TRANSCRIPT_SEGMENT_CREATED}}},
        "then": {"required": ["type", "sessionId"]},
    }


def _cost_exceeded() -> dict[str, Any]:
    entry = {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "cost"],
        "properties": {
            "type": {"type": "string"},
            "sessionId": {"type": "string", "description": "present when the entry has one"},
            "cost": {"type": "integer"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["error", "cost", "budget", "entries"],
        "properties": {
            "error": {"type": "string", "const": "filter_cost_exceeded"},
            "cost": {"type": "integer", "description": f"{filters.ENTRY_COST} per entry"},
            "budget": {"type": "integer", "description": "the current budget; it can change: read it from here"},
            "entries": {"type": "array", "items": entry},
        },
    }


def _error(description: str, schema: dict[str, Any] | None = None, examples: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": schema or {"$ref": ERROR_REF}}
    if examples:
        media["examples"] = examples
    return {"description": description, "content": {"application/json": media}, **extra}


def _bad_request_examples() -> dict[str, Any]:
    """The 400s as the stream answers them, made by the filter checks themselves."""
    try:
        filters.subscription_for("[", set())
    except filters.InvalidFilters as invalid:
        not_json = {"error": "invalid_filters", "detail": invalid.detail}
    entries = [{"type": "session.created", "sessionId": f"s{i}"} for i in range(filters.COST_BUDGET // 10 + 1)]
    try:
        filters.check_cost(filters.parse_entries(entries))
    except filters.FilterCostExceeded as exceeded:
        over = {"error": "filter_cost_exceeded", **exceeded.body_fields()}
    too_long = {"error": "invalid_request", "detail": "Last-Event-ID: at most 64 characters"}
    return {name: {"summary": name, "value": value} for name, value in
            (("invalid_filters", not_json), ("filter_cost_exceeded", over), ("invalid_request", too_long))}


def _event_schemas() -> dict[str, str]:
    # Read when the schema is generated: the recorders register their types at start.
    return {str(event_type): name for event_type, name in ENVELOPE_NAMES.items()}


def _operation(heartbeat: int, resume: int, max_streams: int) -> dict[str, Any]:
    event_schemas = _event_schemas()
    events = [{"$ref": f"#/components/schemas/{name}"} for name in event_schemas.values()]
    filters_description = (
        "URL-encoded JSON array of 1 to 20 entries `{type, sessionId?}`, OR-matched (an event is sent when any "
        "entry matches). `sessionId` is a non-empty string and required for `transcript.segment.created`; no other "
        f"properties. Each entry costs {filters.ENTRY_COST} against a budget of {filters.COST_BUDGET}. The credential "
        "needs the scope of every subscribed type. Example: "
        "`filters=%5B%7B%22type%22%3A%22session.status_changed%22%7D%5D` is `[{\"type\":\"session.status_changed\"}]`."
    )
    return {
        "operationId": "streamEvents",
        "summary": "Stream workspace events (Server-Sent Events)",
        "description": FRAMES.replace("{heartbeat}", str(heartbeat)),
        "tags": ["events"],
        "security": [{"bearerAuth": []}, {"oauth2": ["svc:sessions:read"]}, {"oauth2": ["svc:transcripts:read"]}],
        "parameters": [
            {
                "in": "query",
                "name": "filters",
                "required": False,
                "description": filters_description,
                "content": {"application/json": {"schema": {
                    "type": "array", "minItems": filters.MIN_ENTRIES, "maxItems": filters.MAX_ENTRIES,
                    "items": {"$ref": "#/components/schemas/EventStreamFilterEntry"},
                }}},
            },
            {
                "in": "header",
                "name": "Last-Event-ID",
                "required": False,
                "schema": {"type": "string", "maxLength": 64},
                "description": (
                    "**Extension beyond the contract** (which promises no replay). The `id` of the last event a "
                    "client received. Within `CONNECT_SSE_RESUME_SECONDS` (here "
                    f"{resume} s) the stream first sends, in order, the events committed after it that match the "
                    "filters and scopes (read from the event log, as `GET /api/v1/events` reads it), then goes live. "
                    "An unknown, foreign or older id starts a live stream whose first comment is "
                    "`: resume-unavailable`: catch up with `GET /api/v1/events?after=<that id>` (the log keeps events "
                    "longer), or, on its `410 resync_required`, reconcile through the REST resources. Longer than "
                    "64 characters: `400 invalid_request`."
                ),
            },
        ],
        "responses": {
            "200": {
                "description": "The stream. Headers `Cache-Control: no-cache`, `X-Accel-Buffering: no`.",
                "headers": {
                    "Cache-Control": {"schema": {"type": "string", "const": "no-cache"}},
                    "X-Accel-Buffering": {"schema": {"type": "string", "const": "no"}},
                },
                "content": {
                    "text/event-stream": {
                        "schema": {
                            "description": "The JSON of each frame's `data:` line (see the description above).",
                            "oneOf": events,
                            "discriminator": {
                                "propertyName": "type",
                                "mapping": {t: f"#/components/schemas/{n}" for t, n in event_schemas.items()},
                            },
                        },
                        "example": _example_stream(),
                    }
                },
            },
            "400": _error(
                "`invalid_filters`: `filters` is not JSON, not an array of 1 to 20 entries, or an entry breaks the "
                "entry schema (repeating the parameter is invalid too); `filter_cost_exceeded`: valid but above "
                "the budget, with `cost`, `budget` and each entry's cost; `invalid_request`: `Last-Event-ID` too "
                "long. Checked after authentication and the rate limit, in that order, before scopes.",
                {"anyOf": [{"$ref": ERROR_REF}, {"$ref": "#/components/schemas/FilterCostExceeded"}]},
                examples=_bad_request_examples(),
            ),
            "401": _error(
                "`unauthorized`: Bearer credential missing, invalid, expired, of another audience or without a "
                "workspace; `detail` says which of missing, not Bearer, or not valid",
            ),
            "403": _error(
                "`forbidden`: the credential's issuer is no longer an active member (checked before `filters`); "
                "`insufficient_scope`: a filter entry subscribes to a type whose scope the credential lacks "
                "(`svc:sessions:read` for session.*, `svc:transcripts:read` for transcript.*), with "
                "`requiredScopes` (every scope the filters need) and the challenge's `scope`. Without `filters` "
                "a read credential gets no 403; an ingest key always does."
            ),
            "404": _error("`workspace_not_found`: the credential's workspace cannot be resolved"),
            "405": _error("`method_not_allowed`: only GET"),
            "429": _error(
                "`rate_limited`: opening a stream counts as one request in the credential's and the workspace's "
                "rate-limit buckets, checked right after authentication (see `Retry-After`); "
                f"`connection_limit`: the workspace already has `CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE` (here "
                f"{max_streams}) streams open, counted across every server process and instance. A slot frees "
                "when a stream ends."
            ),
            "500": _error("`internal_server_error`"),
            "503": _error(
                "`unavailable`: a dependency (Redis, the database) cannot be reached; retry after `Retry-After` "
                "seconds (with `Last-Event-ID` to resume)",
                headers={"Retry-After": {
                    "description": "Seconds to wait before opening again",
                    "schema": {"type": "integer"},
                }},
            ),
        },
    }


def extend(schema: dict[str, Any]) -> None:
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas["EventStreamFilterEntry"] = _filter_entry()
    schemas["FilterCostExceeded"] = _cost_exceeded()
    for event_type, name in _event_schemas().items():
        schemas[name] = _envelope(event_type)
    schema.setdefault("paths", {})[PATH] = {
        "get": _operation(
            settings.CONNECT_SSE_HEARTBEAT_SECONDS,
            settings.CONNECT_SSE_RESUME_SECONDS,
            settings.CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE,
        )
    }
