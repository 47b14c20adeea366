"""The MCP Events extension (`io.modelcontextprotocol/events`) on the workspace's event log.

`events/list` describes the log's event types as far as the credential's scopes allow: each
with its filter arguments (`sessionId`, declared as REST's `GET /api/v1/events` declares it) and
the `data` shape its recorder registered (apps/events/shapes.py). `events/poll` pages through the
log with the one reader REST uses (apps/events/selectors.read_log_rows): the same events, in the
same order, behind the same scopes and tenancy; its `cursor` is REST's `nextCursor`. Push
(`events/stream`) is a stream of the stream app's hub (apps/mcp/events_stream.py, opened by
apps/mcp/streaming.py); the session types are also delivered by webhook (`events/subscribe`,
apps/mcp/events_webhooks.py) (docs/decisions/mcp-events-extension.md, docs/decisions/mcp-listen.md,
docs/decisions/mcp-events-subscribe.md).

No Django request here and no import of the protocol module (it imports this one): errors are
`EventsError`s, which apps/mcp/protocol.py answers as JSON-RPC errors."""

from __future__ import annotations

from typing import Any, Callable

from rest_framework import serializers

from apps.access.principal import Principal
from apps.core.params import MAX_PAGE_SIZE
from apps.events import filters, positions, retention, selectors
from apps.events.api import MAX_SESSION_ID_LENGTH, allowed_types
from apps.events.representations import event_row_item
from apps.events.shapes import DATA_SHAPES
from apps.mcp.arguments import ToolArgumentError, input_schema, validate_arguments
from apps.webhooks.filters import SUBSCRIBABLE_TYPES as WEBHOOK_TYPES

DELIVERY = ("poll", "push")

# The extension's error codes (design sketch "Error codes"), and JSON-RPC's invalid params.
INVALID_PARAMS = -32602
NOT_FOUND = -32011
FORBIDDEN = -32012
UNSUPPORTED = -32014

# A caught-up poller comes back after this long; one with more waiting comes back at once, and
# one whose next events are committed but wait for an older transaction (REST's
# `Events-Unsettled: true`) shortly.
NEXT_POLL_MS = 2_000
UNSETTLED_POLL_MS = 250
# A `maxAgeMs` floor skips older events: at most this many pages are read past them per poll.
MAX_SKIPPED_PAGES = 10

DESCRIPTIONS = {
    filters.SESSION_CREATED: "A session was created in the workspace (a recording started or was uploaded).",
    filters.SESSION_STATUS_CHANGED: "A session's status changed (e.g. live → processing → ready).",
    filters.TRANSCRIPT_SEGMENT_CREATED: "A transcript segment of one session was committed (live transcription).",
}


# Methods another module answers, registered when the app is ready (apps/mcp/apps.py):
# `events/subscribe` and `events/unsubscribe` by apps/mcp/events_webhooks.py, which imports this one.
HANDLERS: dict[str, Callable[[str, dict[str, Any], Principal], dict[str, Any]]] = {}


class EventsError(Exception):
    """A JSON-RPC error of this extension: `code`, a message saying what was wrong, `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _session_filter(name: str, *, required: bool) -> type[serializers.Serializer]:
    # The same field as `GET /api/v1/events?sessionId=`; required where the stream requires it.
    field = serializers.CharField(required=required, min_length=1, max_length=MAX_SESSION_ID_LENGTH,
                                  help_text="only this session's events (a session id of this workspace)")
    return type(name, (serializers.Serializer,), {"sessionId": field})


SESSION_EVENTS_IN = _session_filter("SessionEventsIn", required=False)
SEGMENT_EVENTS_IN = _session_filter("SegmentEventsIn", required=True)
ARGUMENTS = {t: SEGMENT_EVENTS_IN if t in filters.SESSION_BOUND_TYPES else SESSION_EVENTS_IN
             for t in filters.TYPE_SCOPES}


def descriptor(event_type: str) -> dict[str, Any]:
    scope = filters.TYPE_SCOPES[event_type]
    return {
        "name": event_type,
        "description": f"{DESCRIPTIONS[event_type]} Needs `{scope}`.",
        "delivery": list(DELIVERY) + (["webhook"] if event_type in WEBHOOK_TYPES else []),
        "inputSchema": input_schema(ARGUMENTS[event_type]),
        "payloadSchema": DATA_SHAPES[event_type].json_schema(portable=True),
    }


def answer(method: str, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """The result of one `events/*` request (apps/mcp/protocol.EVENTS_METHODS), or `EventsError`."""
    if method == "events/list":
        if params.get("cursor") is not None:
            raise EventsError(INVALID_PARAMS, "Invalid cursor: events/list has a single page")
        allowed = allowed_types(principal)
        return {"events": [descriptor(t) for t in filters.TYPE_SCOPES if t in allowed]}
    if method in HANDLERS:  # events/subscribe and events/unsubscribe
        return HANDLERS[method](method, params, principal)
    event_type = event_type_of(params, principal)
    if method == "events/stream":  # /mcp answers it with a stream before the protocol sees it
        raise EventsError(UNSUPPORTED, "events/stream answers with an SSE stream: POST it to /mcp",
                          {"feature": "deliveryMode", "value": "push"})
    if method != "events/poll":
        raise EventsError(UNSUPPORTED, f"{event_type} offers {', '.join(descriptor(event_type)['delivery'])} "
                          f"delivery, not {method}", {"name": event_type, "delivery": descriptor(event_type)["delivery"]})
    return poll(params, event_type, principal)


def event_type_of(params: dict[str, Any], principal: Principal) -> str:
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise EventsError(INVALID_PARAMS, "params.name is required: an event type from events/list")
    if name not in filters.TYPE_SCOPES:
        raise EventsError(NOT_FOUND, "Unknown event type; events/list names those offered", {"name": name})
    scope = filters.TYPE_SCOPES[name]
    if not principal.has_scope(scope):
        raise EventsError(FORBIDDEN, f"The credential lacks {scope}, needed for {name}",
                          {"error": "insufficient_scope", "scope": scope})
    return name


def _integer(params: dict[str, Any], key: str, low: int) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise EventsError(INVALID_PARAMS, f"params.{key} must be an integer of at least {low}")
    return value


def poll(params: dict[str, Any], event_type: str, principal: Principal) -> dict[str, Any]:
    """One page of the log for one event type after `cursor` (null: from now on)."""
    session_id = session_argument(params, event_type)
    limit = min(_integer(params, "maxEvents", 1) or MAX_PAGE_SIZE, MAX_PAGE_SIZE)
    max_age_ms = _integer(params, "maxAgeMs", 0)
    cursor = params.get("cursor")
    if cursor is not None and (not isinstance(cursor, str) or not cursor):
        raise EventsError(INVALID_PARAMS, "params.cursor must be a cursor from a previous events/poll, or null")
    read = {"workspace_id": principal.workspace.id, "types": frozenset({event_type}), "session_id": session_id}

    if cursor is None:
        # "Start from now" (maxAgeMs is ignored): where the log's settled end is, nothing read.
        _, place = selectors.read_log_rows(after=None, limit=0, **read)
        return _result([], place, full=False, truncated=False, read=read)
    try:
        after: positions.Position | None = positions.decode_position(cursor) if cursor.startswith(
            positions.POSITION_PREFIX) else None
    except positions.BadAfter as bad:
        raise EventsError(INVALID_PARAMS, f"params.cursor: {bad.why}") from None
    if after is None:
        raise EventsError(INVALID_PARAMS, "params.cursor: not a cursor this server wrote")
    truncated = after.ms < retention.oldest_complete_ms(read["types"])
    if truncated:
        after = None  # events after the cursor may be past retention: from the oldest event kept

    floor = None if max_age_ms is None else retention.now_ms() - max_age_ms
    rows, place = selectors.read_log_rows(after=after, limit=limit, **read)
    full = len(rows) == limit
    for skipped in range(MAX_SKIPPED_PAGES + 1):
        if floor is None:
            break
        young = [r for r in rows if (positions.event_id_ms(r.id) or 0) >= floor]
        truncated = truncated or len(young) < len(rows)
        if young or not full or skipped == MAX_SKIPPED_PAGES:
            rows = young
            break
        rows, place = selectors.read_log_rows(after=place, limit=limit, **read)
        full = len(rows) == limit
    return _result(rows, place, full=full, truncated=truncated, read=read)


def session_argument(params: dict[str, Any], event_type: str) -> str | None:
    """`arguments.sessionId`, validated against the type's input schema."""
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise EventsError(INVALID_PARAMS, "params.arguments must be an object")
    try:
        return validate_arguments(ARGUMENTS[event_type], arguments or {}).get("sessionId")
    except ToolArgumentError as error:
        why = f"params.arguments.{error.extra['argument']} {error.extra['detail']}"
        raise EventsError(INVALID_PARAMS, why) from None


def _result(rows: list[selectors.LogRow], place: positions.Position, *, full: bool, truncated: bool,
            read: dict[str, Any]) -> dict[str, Any]:
    if full:
        next_poll_ms = 0
    else:
        next_poll_ms = UNSETTLED_POLL_MS if selectors.unsettled_after(place=place, **read) else NEXT_POLL_MS
    return {
        "events": [occurrence(row) for row in rows],
        "cursor": positions.encode_position(place),
        "hasMore": full,
        "truncated": truncated,
        "nextPollMs": next_poll_ms,
    }


def occurrence(row: selectors.LogRow) -> dict[str, Any]:
    """An `EventOccurrence` from the REST log's item for the same row: `eventId` the `evt_` id
    (the stream's `id:`, the webhooks' `Svc-Event-Id`), `data` exactly REST's `data`."""
    item = event_row_item(row)
    return {"eventId": item["id"], "name": item["type"], "timestamp": item["occurredAt"], "data": item["data"]}
