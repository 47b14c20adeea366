from __future__ import annotations

from datetime import datetime, timezone


def iso_ms(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with milliseconds and `Z`, the one timestamp format on the wire."""
    if value is None:
        return None
    if value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"  # "+00:00" → "Z"


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
