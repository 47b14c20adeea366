"""`GET /api/v1/events/stream` in /openapi.json (contract §2.6, §2.7, §4.4, §6.1, §7, §8). It is a
Channels consumer, not a DRF view, so it is described here: the `text/event-stream` response
and the envelope of each event type, the `filters` parameter, `Last-Event-ID` (our resume
extension), and every error, each a JSON body sent before any stream byte.

The event shapes reuse the REST components (`SessionOut`, `FlatSegmentOut`): events carry the
same representations REST returns (apps/recordings/representations.py)."""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings

from apps.events import filters

PATH = "/api/v1/events/stream"
SESSION_REF = "#/components/schemas/SessionOut"
ERROR_REF = "#/components/schemas/Error"
EVENT_SCHEMAS = {
    filters.SESSION_CREATED: "SessionCreatedEvent",
    filters.SESSION_STATUS_CHANGED: "SessionStatusChangedEvent",
    filters.TRANSCRIPT_SEGMENT_CREATED: "TranscriptSegmentCreatedEvent",
}
TIMESTAMP = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601, UTC, with milliseconds and `Z`, e.g. `2026-01-05T09:30:00.123Z`",
}

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


def _session_event_data(*extra: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    properties = {"sessionId": {"type": "string"}, "occurredAt": TIMESTAMP, **dict(extra)}
    properties["session"] = {"$ref": SESSION_REF, "description": "the session as REST shows it, at that moment"}
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def _segment_event_data(schemas: dict[str, Any]) -> dict[str, Any]:
    segment = copy.deepcopy(schemas["FlatSegmentOut"])
    properties = {"sessionId": {"type": "string"}, "occurredAt": TIMESTAMP, **segment["properties"]}
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def _envelope(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"`{event_type}` (needs `{filters.TYPE_SCOPES[event_type]}`)",
        "additionalProperties": False,
        "required": ["type", "sessionId", "occurredAt", "data"],
        "properties": {
            "type": {"type": "string", "const": event_type},
            "sessionId": {"type": "string"},
            "occurredAt": TIMESTAMP,
            "data": data,
        },
    }


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


def _error(description: str, schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema or {"$ref": ERROR_REF}}},
            **extra}


def _operation(heartbeat: int, resume: int, max_streams: int) -> dict[str, Any]:
    events = [{"$ref": f"#/components/schemas/{name}"} for name in EVENT_SCHEMAS.values()]
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
                    "filters and scopes, then goes live. An unknown, foreign or older id starts a live stream "
                    "whose first comment is `: resume-unavailable`: reconcile through the REST API. Longer than "
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
                                "mapping": {t: f"#/components/schemas/{n}" for t, n in EVENT_SCHEMAS.items()},
                            },
                        },
                        "example": (
                            ": connected\n\n"
                            "id: evt_01jd8x5k3m6q2w9r7t4v0y1z3a\nevent: session.created\n"
                            'data: {"type":"session.created","sessionId":"01jd8x5k2p0000000000000000",'
                            '"occurredAt":"2026-01-05T09:30:00.123Z","data":{"sessionId":"01jd8x5k2p0000000000000000",'
                            '"occurredAt":"2026-01-05T09:30:00.123Z","session":{"id":"01jd8x5k2p0000000000000000",'
                            '"label":"Kickoff","memo":null,"status":"recording","startedAt":"2026-01-05T09:30:00.123Z",'
                            '"endedAt":null,"createdAt":"2026-01-05T09:30:00.123Z",'
                            '"updatedAt":"2026-01-05T09:30:00.123Z"}}}\n\n'
                            ": ping\n\n"
                        ),
                    }
                },
            },
            "400": _error(
                "`invalid_filters`: `filters` is not JSON, not an array of 1 to 20 entries, or an entry breaks the "
                "entry schema (repeating the parameter is invalid too); `filter_cost_exceeded`: valid but above "
                "the budget, with `cost`, `budget` and each entry's cost; `invalid_request`: `Last-Event-ID` too "
                "long. Checked after authentication and the rate limit, in that order, before scopes.",
                {"anyOf": [{"$ref": ERROR_REF}, {"$ref": "#/components/schemas/FilterCostExceeded"}]},
            ),
            "401": _error(
                "`unauthorized`: Bearer credential missing, invalid, expired, of another audience or without a "
                "workspace",
                headers={"WWW-Authenticate": {
                    "description": 'Bearer resource_metadata="{base_url}/.well-known/oauth-protected-resource"',
                    "schema": {"type": "string"},
                }},
            ),
            "403": _error(
                "`forbidden`: the credential's issuer is no longer an active member (checked before `filters`); "
                "`insufficient_scope`: a filter entry subscribes to a type whose scope the credential lacks "
                "(`svc:sessions:read` for session.*, `svc:transcripts:read` for transcript.*). Without `filters` "
                "there is no 403."
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
    schemas["SessionCreatedEvent"] = _envelope(filters.SESSION_CREATED, _session_event_data())
    schemas["SessionStatusChangedEvent"] = _envelope(
        filters.SESSION_STATUS_CHANGED,
        _session_event_data(
            ("status", {"$ref": f"{SESSION_REF}/properties/status"}),
            ("previousStatus", {"$ref": f"{SESSION_REF}/properties/status"}),
        ),
    )
    schemas["TranscriptSegmentCreatedEvent"] = _envelope(
        filters.TRANSCRIPT_SEGMENT_CREATED, _segment_event_data(schemas)
    )
    schema.setdefault("paths", {})[PATH] = {
        "get": _operation(
            settings.CONNECT_SSE_HEARTBEAT_SECONDS,
            settings.CONNECT_SSE_RESUME_SECONDS,
            settings.CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE,
        )
    }
