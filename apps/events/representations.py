"""The event envelope on the wire (contract §2.6, §6.1): exactly type, sessionId, occurredAt, data."""

from __future__ import annotations

from typing import Any

from apps.core.timestamps import iso_ms
from apps.events.models import Event


def event_envelope(event: Event) -> dict[str, Any]:
    return {
        "type": event.type,
        "sessionId": event.session_id,
        "occurredAt": iso_ms(event.occurred_at),
        "data": event.data,
    }
