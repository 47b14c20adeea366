"""The event envelope (contract §2.6, §6.1), declared once: exactly type, sessionId, occurredAt,
data. Each type's `data` is declared by the app that records the event (apps/recordings/shapes.py);
the documented envelopes below pin `type` to one value and `data` to that type's shape."""

from __future__ import annotations

from apps.core.shapes import JSON, STRING, TIMESTAMP, Field, Shape
from apps.events.models import EventType
from apps.recordings.shapes import (
    SESSION_CREATED_DATA,
    SESSION_STATUS_CHANGED_DATA,
    TRANSCRIPT_SEGMENT_CREATED_DATA,
)

EVENT_ENVELOPE = Shape(
    "EventEnvelope",
    (
        Field("type", STRING, choices=EventType),
        Field("sessionId", STRING),
        Field("occurredAt", TIMESTAMP),
        # Stored as the wire shows it when the event was recorded (its type's data shape).
        Field("data", JSON, stored=True),
    ),
    closed=True,
)

DATA_SHAPES: dict[str, Shape] = {
    EventType.SESSION_CREATED: SESSION_CREATED_DATA,
    EventType.SESSION_STATUS_CHANGED: SESSION_STATUS_CHANGED_DATA,
    EventType.TRANSCRIPT_SEGMENT_CREATED: TRANSCRIPT_SEGMENT_CREATED_DATA,
}
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
