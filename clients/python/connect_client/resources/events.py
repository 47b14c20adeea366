"""`client.events`: the event log (`list`, `get`) and the live stream (`stream`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

from .. import errors, models
from .._resource import (AsyncAPIResource, SyncAPIResource, _one, _seg, to_async_raw, to_async_raw_list, to_raw,
                         to_raw_list)
from .._response import Request
from ..pagination import AsyncPaginator, ListCall, Paginator
from ..stream import AsyncEventStream, EventStream
from ..types import EventType, Filter
from .sessions import _csv

OnResync = Callable[[errors.ResyncRequired], None]


def _list(type: EventType | Iterable[EventType] | None, session_id: str | None,
          limit: int | None) -> ListCall[models.Event]:
    return ListCall("/api/v1/events", {"type": _csv(type), "sessionId": session_id, "limit": limit},
                    models.Event.from_wire, cursor_param="after", log=True)


def _get(event_id: str) -> Request[models.Event]:
    return Request("GET", f"/api/v1/events/{_seg(event_id)}", _one(models.Event))


def _filters(filters: Iterable[Filter | models.WebhookFilter] | None) -> list[dict[str, Any]] | None:
    if filters is None:
        return None
    return [f.to_wire() if isinstance(f, models.WebhookFilter) else dict(f) for f in filters]


class Events(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> EventsWithRawResponse:
        return EventsWithRawResponse(Events(self._client, raw=True))

    def list(self, *, after: str | None = None, type: EventType | Iterable[EventType] | None = None,
             session_id: str | None = None, limit: int | None = None) -> Paginator[models.Event]:
        """The event log, oldest first, after `after` (an `evt_` id or a previous cursor).
        Iteration ends with everything committed so far; `.next_cursor` is where to poll next."""
        return Paginator(self._client._transport, _list(type, session_id, limit), after)

    def get(self, event_id: str) -> models.Event:
        return self._send(_get(event_id))

    def stream(self, *, filters: Iterable[Filter | models.WebhookFilter] | None = None,
               last_event_id: str | None = None, heartbeat_timeout: float = 45.0, min_backoff: float = 1.0,
               max_backoff: float = 60.0, on_resync: OnResync | None = None,
               connect_timeout: float = 10.0) -> EventStream:
        """Every matching event once, in order, across reconnects (see `EventStream`)."""
        return EventStream(self._client, filters=_filters(filters), last_event_id=last_event_id,
                           heartbeat_timeout=heartbeat_timeout, min_backoff=min_backoff, max_backoff=max_backoff,
                           on_resync=on_resync, connect_timeout=connect_timeout)


class AsyncEvents(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncEventsWithRawResponse:
        return AsyncEventsWithRawResponse(AsyncEvents(self._client, raw=True))

    def list(self, *, after: str | None = None, type: EventType | Iterable[EventType] | None = None,
             session_id: str | None = None, limit: int | None = None) -> AsyncPaginator[models.Event]:
        return AsyncPaginator(self._client._transport, _list(type, session_id, limit), after)

    async def get(self, event_id: str) -> models.Event:
        return await self._send(_get(event_id))

    def stream(self, *, filters: Iterable[Filter | models.WebhookFilter] | None = None,
               last_event_id: str | None = None, heartbeat_timeout: float = 45.0, min_backoff: float = 1.0,
               max_backoff: float = 60.0, on_resync: OnResync | None = None,
               connect_timeout: float = 10.0) -> AsyncEventStream:
        """`async for event in client.events.stream(…)`; cancel the task (or `aclose()`) to end it."""
        return AsyncEventStream(self._client, filters=_filters(filters), last_event_id=last_event_id,
                                heartbeat_timeout=heartbeat_timeout, min_backoff=min_backoff,
                                max_backoff=max_backoff, on_resync=on_resync, connect_timeout=connect_timeout)


class EventsWithRawResponse:
    def __init__(self, events: Events) -> None:
        self.list = to_raw_list(events.list)
        self.get = to_raw(events.get)


class AsyncEventsWithRawResponse:
    def __init__(self, events: AsyncEvents) -> None:
        self.list = to_async_raw_list(events.list)
        self.get = to_async_raw(events.get)
