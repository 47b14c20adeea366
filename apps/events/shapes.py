"""The event envelope (contract §2.6, §6.1), declared once: exactly type, sessionId, occurredAt,
data. Each type's `data` is declared by the app that records the event (apps/recordings/shapes.py);
the documented envelopes below pin `type` to one value and `data` to that type's shape."""

from __future__ import annotations

from typing import Any

from apps.core.shapes import JSON, STRING, TIMESTAMP, Field, Shape
from apps.events.models import Event, EventType
from apps.recordings.shapes import (
    SESSION_CREATED_DATA,
    SESSION_STATUS_CHANGED_DATA,
    TRANSCRIPT_SEGMENT_CREATED_DATA,
)

DATA_SHAPES: dict[str, Shape] = {
    EventType.SESSION_CREATED: SESSION_CREATED_DATA,
    EventType.SESSION_STATUS_CHANGED: SESSION_STATUS_CHANGED_DATA,
    EventType.TRANSCRIPT_SEGMENT_CREATED: TRANSCRIPT_SEGMENT_CREATED_DATA,
}


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
# The component name of each type's documented envelope in /openapi.json.
ENVELOPE_NAMES: dict[str, str] = {
    EventType.SESSION_CREATED: "SessionCreatedEvent",
    EventType.SESSION_STATUS_CHANGED: "SessionStatusChangedEvent",
    EventType.TRANSCRIPT_SEGMENT_CREATED: "TranscriptSegmentCreatedEvent",
}


def typed_envelope(event_type: str, description: str = "") -> Shape:
    """The envelope of one event type, for documentation."""
    return EVENT_ENVELOPE.specialise(
        ENVELOPE_NAMES[event_type],
        description=description,
        component=False,
        type=Field("type", STRING, const=event_type),
        data=Field("data", DATA_SHAPES[event_type]),
    )
