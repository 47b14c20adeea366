"""The event envelope on the wire (docs/api/events-and-stream.md): exactly type, sessionId, occurredAt,
data, generated from its declaration in apps/events/shapes.py; and its SSE frame, built once per
event and written as is to every stream it matches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from rest_framework.renderers import JSONRenderer

from apps.events.models import Event
from apps.events.shapes import EVENT, EVENT_ENVELOPE, EVENT_ENVELOPE_ROW, EVENT_ROW

if TYPE_CHECKING:
    from apps.events.selectors import FollowedRow

event_envelope = EVENT_ENVELOPE.encode
event_envelope_row = EVENT_ENVELOPE_ROW.encode

PING = b": ping\n\n"


def sse_frame(event_id: str, type: str, envelope: dict[str, Any]) -> bytes:
    # orjson never emits a newline, so the envelope is always exactly one `data:` line.
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id.encode(), type.encode(), orjson.dumps(envelope))


def frame_for(event: Event) -> bytes:
    return sse_frame(event.id, event.type, event_envelope(event))


def frame_for_row(row: FollowedRow) -> bytes:
    """`frame_for` of the event a follower's row holds (apps/events/selectors.follow_log): the
    same bytes."""
    return sse_frame(row.id, row.type, event_envelope_row(row))


# `GET /api/v1/events`: the envelope above plus the event's id.
event_item = EVENT.encode
# The same item from a page's `LogRow` (apps/events/selectors.read_log_rows).
event_row_item = EVENT_ROW.encode


class StoredJsonRenderer(JSONRenderer):
    """DRF's JSON renderer, through orjson, which writes an `orjson.Fragment` (a stored JSON
    document, apps/events/selectors.LogRow) into the body as is. The same JSON as
    `JSONRenderer` (compact, UTF-8), except that U+2028/U+2029 stay unescaped, as JSON allows."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return b"" if data is None else orjson.dumps(data)
