"""`events/stream` of the MCP Events extension (`io.modelcontextprotocol/events`, push delivery):
one event type's occurrences as `notifications/events/event`, on the stream's hub.

The request is validated as `events/poll` validates it (apps/mcp/events_extension.py: name,
scope, `arguments` against the type's input schema, `cursor`); the stream opens with
`notifications/events/active` carrying the cursor it starts from (the request's, or the log's
settled end for `cursor: null`, as poll's "start from now") and `truncated: true` when the
cursor could not be resumed from (older than the resume window or retention, or too far behind:
delivery starts from now). Each occurrence is REST's item renamed as poll renames it, plus its
`cursor`: the log place after it, a `pos_` cursor that poll and REST take too. A quiet stream
gets `notifications/events/heartbeat`; a stream the server ends gets
`notifications/events/terminated` (a revoked credential) and the empty `StreamEventsResult`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from apps.access.principal import Principal
from apps.events import positions, selectors
from apps.events.filters import FilterEntry
from apps.mcp import events_extension
from apps.mcp.listen import SUBSCRIPTION_ID, sse
from apps.stream.streams import RenderedSubscription, Row

TERMINATED_CODES = {"credential_revoked": events_extension.FORBIDDEN}


@dataclass(frozen=True)
class EventsSubscription(RenderedSubscription):
    """One `events/stream` request: its type (and session), the request's id, its era."""

    request_id: Any = None
    modern: bool = True

    def _meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID: self.request_id}

    def render(self, rows: list[Row]) -> list[tuple[tuple[int, str], bytes]]:
        items = []
        for key, _type, _session_id, frame in rows:
            # The event stream's frame holds REST's envelope on its `data:` line (one line: orjson).
            envelope = orjson.loads(frame[frame.index(b"\ndata: ") + 7:].rstrip(b"\n"))
            place = positions.Position(key[0], key[1], positions.event_id_ms(key[1]) or 0)
            params = {"eventId": key[1], "name": envelope["type"], "timestamp": envelope["occurredAt"],
                      "data": envelope["data"], "cursor": positions.encode_position(place), "_meta": self._meta()}
            items.append((key, sse(key[1], {"jsonrpc": "2.0", "method": "notifications/events/event",
                                            "params": params})))
        return items

    def active(self, cursor: str, truncated: bool) -> bytes:
        return sse(None, {"jsonrpc": "2.0", "method": "notifications/events/active",
                          "params": {"cursor": cursor, "truncated": truncated, "_meta": self._meta()}})

    def heartbeat(self) -> bytes:
        # The extension's liveness signal is a message, not an SSE comment. It carries no cursor:
        # the stream keeps no place of its own, and the last event's cursor stays the one to keep.
        return sse(None, {"jsonrpc": "2.0", "method": "notifications/events/heartbeat",
                          "params": {"_meta": self._meta()}})

    def closing(self, reason: str) -> bytes:
        frames = b""
        code = TERMINATED_CODES.get(reason)
        if code is not None:
            error = {"code": code, "message": "The credential was revoked or its member deactivated",
                     "data": {"reason": reason}}
            frames = sse(None, {"jsonrpc": "2.0", "method": "notifications/events/terminated",
                                "params": {"error": error, "_meta": self._meta()}})
        result: dict[str, Any] = {"_meta": {**self._meta(), "svc/reason": reason}}
        if self.modern:
            result = {"resultType": "complete", **result}
        return frames + sse(None, {"jsonrpc": "2.0", "id": self.request_id, "result": result})


def subscription_for(params: dict[str, Any], principal: Principal, request_id: Any,
                     modern: bool) -> tuple[EventsSubscription, positions.Position | None]:
    """The stream's subscription and the place to resume after (None: from now), or EventsError."""
    event_type = events_extension.event_type_of(params, principal)
    session_id = events_extension.session_argument(params, event_type)
    cursor = params.get("cursor")
    after = None
    if cursor is not None:
        if not isinstance(cursor, str) or not cursor.startswith(positions.POSITION_PREFIX):
            raise events_extension.EventsError(events_extension.INVALID_PARAMS,
                                               "params.cursor must be a cursor from events/poll or a notification")
        try:
            after = positions.decode_position(cursor)
        except positions.BadAfter as bad:
            raise events_extension.EventsError(events_extension.INVALID_PARAMS, f"params.cursor: {bad.why}") from None
    subscription = EventsSubscription(entries=(FilterEntry(event_type, session_id),), request_id=request_id,
                                      modern=modern)
    return subscription, after


def now_cursor(subscription: EventsSubscription, workspace_id: int) -> str:
    """The log's settled end for the subscription's type: poll's "start from now"."""
    entry = subscription.entries[0]
    _, place = selectors.read_log_rows(after=None, limit=0, workspace_id=workspace_id, types=frozenset({entry.type}),
                                       session_id=entry.session_id)
    return positions.encode_position(place)
