"""Reads of the outbox, each starting from a workspace (or, for the per-process follower, from
an id window across all workspaces: it routes by workspace itself)."""

from __future__ import annotations

from typing import Iterable

from apps.events.models import Event

EVENT_FIELDS = ("id", "workspace_id", "type", "session_id", "occurred_at", "data")


def event_in_workspace(*, workspace_id: int, event_id: str) -> Event | None:
    return Event.objects.filter(workspace_id=workspace_id, pk=event_id).only("id").first()


def events_after(*, workspace_id: int, after_id: str, types: Iterable[str], limit: int) -> list[Event]:
    """A workspace's events after `after_id` in id order, of the given types (resume)."""
    return list(
        Event.objects.filter(workspace_id=workspace_id, pk__gt=after_id, type__in=list(types))
        .only(*EVENT_FIELDS)
        .order_by("id")[:limit]
    )


def event_ids_from(floor_id: str) -> list[str]:
    """Ids at or above `floor_id`, every workspace: the follower's cheap look at its window."""
    return list(Event.objects.filter(pk__gte=floor_id).order_by("id").values_list("id", flat=True))


def events_by_ids(ids: list[str]) -> list[Event]:
    return list(Event.objects.filter(pk__in=ids).only(*EVENT_FIELDS).order_by("id"))
