"""The event envelope on the wire (contract §2.6, §6.1): exactly type, sessionId, occurredAt,
data, generated from its declaration in apps/events/shapes.py."""

from __future__ import annotations

from apps.events.shapes import EVENT_ENVELOPE

event_envelope = EVENT_ENVELOPE.encode
