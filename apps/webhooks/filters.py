"""Webhook subscription filters (docs/api/webhooks.md): validation and matching, pure.

An entry is `{"type": "session.created" | "session.status_changed", "sessionId"?: str,
"status"?: [unique session statuses]}` — `status` only on status-change entries. Fields inside
an entry are AND-matched; entries are OR-matched. The type-and-session part of an entry is the
event stream's own matcher (apps/events/filters.FilterEntry); webhooks add the status list.
Validation differs from the stream's (§2.7 vs §2.8), so it lives here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from apps.events.filters import FilterEntry as StreamEntry
from apps.events.filters import InvalidFilters

SUBSCRIBABLE_TYPES = ("session.created", "session.status_changed")
SESSION_STATUSES = ("recording", "processing", "completed", "failed")
MAX_ENTRIES = 20
MAX_SESSION_ID_LENGTH = 200


def validate_filters(value: Any) -> list[dict[str, Any]]:
    """The normalised filter list, or InvalidFilters saying where and what is wrong."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_ENTRIES:
        raise InvalidFilters("", f"must be a list of 1 to {MAX_ENTRIES} entries")
    return [_validate_entry(entry, f"[{index}]") for index, entry in enumerate(value)]


def _validate_entry(entry: Any, at: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise InvalidFilters(at, "must be an object")
    if set(entry) - {"type", "sessionId", "status"}:
        raise InvalidFilters(at, "unknown property; an entry has only type, sessionId and status")
    kind = entry.get("type")
    if kind not in SUBSCRIBABLE_TYPES:
        raise InvalidFilters(f"{at}.type", "must be one of " + ", ".join(SUBSCRIBABLE_TYPES))
    normalised: dict[str, Any] = {"type": kind}
    if "sessionId" in entry:
        session_id = entry["sessionId"]
        if not isinstance(session_id, str) or not 1 <= len(session_id) <= MAX_SESSION_ID_LENGTH:
            raise InvalidFilters(f"{at}.sessionId", f"must be a string of 1 to {MAX_SESSION_ID_LENGTH} characters")
        normalised["sessionId"] = session_id
    if "status" in entry:
        if kind != "session.status_changed":
            raise InvalidFilters(f"{at}.status", "applies to session.status_changed entries only")
        statuses = entry["status"]
        if (
            not isinstance(statuses, list)
            or not statuses
            or any(s not in SESSION_STATUSES for s in statuses)
            or len(set(statuses)) != len(statuses)
        ):
            raise InvalidFilters(
                f"{at}.status", "must be a non-empty list of unique values of " + ", ".join(SESSION_STATUSES)
            )
        normalised["status"] = list(statuses)
    return normalised


def entry_matches(entry: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """AND within an entry. `event` has `type`, `sessionId` and, for status changes, `status`."""
    if not StreamEntry(entry["type"], entry.get("sessionId")).matches(event.get("type"), event.get("sessionId")):
        return False
    if "status" in entry and event.get("status") not in entry["status"]:
        return False
    return True


def filters_match(filters: Sequence[Mapping[str, Any]], event: Mapping[str, Any]) -> bool:
    """OR across entries."""
    return any(entry_matches(entry, event) for entry in filters)
