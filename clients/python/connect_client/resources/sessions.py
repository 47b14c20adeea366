"""`client.sessions`: list (newest first, lazily paged) and get."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import cached_property

from .. import models
from .._resource import (AsyncAPIResource, SyncAPIResource, _one, _seg, _timestamp, to_async_raw,
                         to_async_raw_list, to_raw, to_raw_list)
from .._response import Request
from ..pagination import AsyncPaginator, ListCall, Paginator
from ..types import SessionStatus


def _csv(value: str | Iterable[str] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return ",".join(value)


def _list(status: SessionStatus | Iterable[SessionStatus] | None, created_after: datetime | str | None,
          created_before: datetime | str | None, limit: int | None) -> ListCall[models.Session]:
    params = {"status": _csv(status), "limit": limit,
              "createdAfter": None if created_after is None else _timestamp(created_after),
              "createdBefore": None if created_before is None else _timestamp(created_before)}
    return ListCall("/api/v1/sessions", params, models.Session.from_wire)


def _get(session_id: str) -> Request[models.Session]:
    return Request("GET", f"/api/v1/sessions/{_seg(session_id)}", _one(models.Session, "session"))


class Sessions(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> SessionsWithRawResponse:
        return SessionsWithRawResponse(Sessions(self._client, raw=True))

    def list(self, *, status: SessionStatus | Iterable[SessionStatus] | None = None,
             created_after: datetime | str | None = None, created_before: datetime | str | None = None,
             limit: int | None = None) -> Paginator[models.Session]:
        """Newest first; `status` one or more, `created_after` / `created_before` exclusive bounds."""
        return self._list(_list(status, created_after, created_before, limit))

    def get(self, session_id: str) -> models.Session:
        """Conditional: an unchanged session is answered `304` and returned from the cache."""
        return self._send(_get(session_id))


class AsyncSessions(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncSessionsWithRawResponse:
        return AsyncSessionsWithRawResponse(AsyncSessions(self._client, raw=True))

    def list(self, *, status: SessionStatus | Iterable[SessionStatus] | None = None,
             created_after: datetime | str | None = None, created_before: datetime | str | None = None,
             limit: int | None = None) -> AsyncPaginator[models.Session]:
        return self._list(_list(status, created_after, created_before, limit))

    async def get(self, session_id: str) -> models.Session:
        return await self._send(_get(session_id))


class SessionsWithRawResponse:
    def __init__(self, sessions: Sessions) -> None:
        self.list = to_raw_list(sessions.list)
        self.get = to_raw(sessions.get)


class AsyncSessionsWithRawResponse:
    def __init__(self, sessions: AsyncSessions) -> None:
        self.list = to_async_raw_list(sessions.list)
        self.get = to_async_raw(sessions.get)
