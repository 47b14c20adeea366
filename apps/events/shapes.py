"""The event envelope (docs/api/events-and-stream.md), declared once: exactly type, sessionId, occurredAt,
data. The outbox stores and serves any event; what each type's `data` holds is declared by the
app that records it, which registers it here at start (`register_data`, called from
apps/recordings/apps.py): the documented envelopes pin `type` to one value and `data` to that
type's shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from apps.core.shapes import JSON, STRING, TIMESTAMP, Field, Shape
from apps.events.models import Event, EventType

# Each registered type's data shape, the component name of its documented envelope in
# /openapi.json, and (optionally) an example event's `(sessionId, data)` at a given time.
DATA_SHAPES: dict[str, Shape] = {}
ENVELOPE_NAMES: dict[str, str] = {}
EXAMPLES: dict[str, Callable[[datetime], tuple[str, dict[str, Any]]]] = {}


def register_data(
    event_type: str,
    shape: Shape,
    *,
    envelope_name: str,
    example: Callable[[datetime], tuple[str, dict[str, Any]]] | None = None,
) -> None:
    """Declares the `data` of events of `event_type`: in registration order in /openapi.json."""
    DATA_SHAPES[event_type] = shape
    ENVELOPE_NAMES[event_type] = envelope_name
    if example is not None:
        EXAMPLES[event_type] = example


def _data(event: Event) -> Any:
    # Stored as its type's data shape wrote it when the event was recorded; read back from
    # PostgreSQL (a resumed stream, a process without Redis) its keys are in jsonb's order.
    shape = DATA_SHAPES.get(event.type)
    return shape.arrange(event.data) if shape is not None else event.data


EVENT_ENVELOPE = Shape(
    "EventEnvelope",
    (
        Field("type", STRING, choices=EventType),
        Field("sessionId", STRING),
        Field("occurredAt", TIMESTAMP),
        Field("data", JSON, getter=_data),
    ),
    closed=True,
)


def _stored_data(row: Any) -> Any:
    # A row of the follower's read (apps/events/selectors.FollowedRow): `data` is the stored
    # text. The standard library parses what orjson refuses (an integer wider than 64 bits,
    # which jsonb gives back for 1e21), as the model path's JSONField does.
    try:
        value = orjson.loads(row.data)
    except orjson.JSONDecodeError:
        value = json.loads(row.data)
    shape = DATA_SHAPES.get(row.type)
    return shape.arrange(value) if shape is not None else value


# The same envelope from a row the follower read: `occurredAt` already in wire form, `data` the
# stored text parsed and arranged as `_data` arranges it, so its frame is the model path's bytes.
EVENT_ENVELOPE_ROW = EVENT_ENVELOPE.specialise(
    "EventEnvelopeRow",
    component=False,
    occurredAt=Field("occurredAt", TIMESTAMP, source="occurred_at", stored=True),
    data=Field("data", JSON, getter=_stored_data),
)
# `GET /api/v1/events`: the envelope exactly as the stream sends it, plus the event's id (the
# stream's `id:`, the webhook's `Svc-Event-Id`).
EVENT = Shape(
    "Event",
    (Field("id", STRING, description="`evt_` id: the stream's `id:` line and the webhooks' `Svc-Event-Id`"),
     *EVENT_ENVELOPE.entries),
    closed=True,
    component=True,
    description="A recorded event: the stream's envelope `{type, sessionId, occurredAt, data}` plus its `id`.",
)
# The same object from a row the log reader formatted for the wire (apps/events/selectors.LogRow):
# `occurredAt` already in wire form and `data` the stored document, both written as they are.
EVENT_ROW = EVENT.specialise(
    "EventRow",
    component=False,
    occurredAt=Field("occurredAt", TIMESTAMP, source="occurred_at", stored=True),
    data=Field("data", JSON, stored=True),
)
EVENT_PAGE = Shape(
    "EventPage",
    (
        Field("items", EVENT, many=True),
        Field("nextCursor", STRING, source="next_cursor",
              description="Never null: pass it as `after` on the next call; a poller keeps calling with it and "
              "gets `[]` until something new commits. An opaque `pos_` position."),
    ),
    params=("items", "next_cursor"),
    component=True,
)

def typed_envelope(event_type: str, description: str = "") -> Shape:
    """The envelope of one event type, for documentation."""
    return EVENT_ENVELOPE.specialise(
        ENVELOPE_NAMES[event_type],
        description=description,
        component=False,
        type=Field("type", STRING, const=event_type),
        data=Field("data", DATA_SHAPES[event_type]),
    )
