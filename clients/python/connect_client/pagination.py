"""Lazy iterators over cursor-paged lists: the next page is fetched only when the items of the
one before are used up. `.page(cursor)` reads a single page.

Two ways a list ends: resource lists (sessions, search, webhooks, deliveries) end when
`nextCursor` is null; the event log's `nextCursor` is never null (a poller keeps calling with
it), so its iteration ends at an empty page that is not `Events-Unsettled` — everything
committed so far — and `next_cursor` is then where the next poll starts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx

from ._response import APIResponse

if TYPE_CHECKING:
    from ._http import AsyncTransport, SyncTransport

T = TypeVar("T")
UNSETTLED_WAIT = 0.2  # seconds between pages while older transactions hold the log back


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None
    unsettled: bool = False  # event log only: committed events wait for an older transaction


@dataclass(frozen=True)
class ListCall(Generic[T]):
    """One paged list operation: where it lives and how its items are read."""

    path: str
    params: dict[str, Any]
    parse: Callable[[dict[str, Any]], T]
    cursor_param: str = "cursor"
    log: bool = False  # the event log: never-null cursor, `Events-Unsettled`

    def params_for(self, cursor: str | None) -> dict[str, Any]:
        params = {name: value for name, value in self.params.items() if value is not None}
        if cursor is not None:
            params[self.cursor_param] = cursor
        return params

    def read(self, response: httpx.Response) -> Page[T]:
        body = response.json()
        return Page(
            items=[self.parse(item) for item in body["items"]],
            next_cursor=body.get("nextCursor"),
            unsettled=response.headers.get("Events-Unsettled") == "true",
        )

    def ends_after(self, page: Page[T]) -> bool:
        if self.log:
            return not page.items and not page.unsettled
        return page.next_cursor is None


class Paginator(Generic[T]):
    """`for item in paginator` follows `nextCursor` lazily; `paginator.page()` reads one page."""

    def __init__(self, transport: SyncTransport, call: ListCall[T], start: str | None = None) -> None:
        self._transport = transport
        self._call = call
        self._start = start
        self.next_cursor = start  # after iteration: where the next call would start

    def page(self, cursor: str | None = None) -> Page[T]:
        """One page: the first (after the list's `after`, for the event log), or `cursor`'s."""
        return self.raw_page(cursor).parse()

    def raw_page(self, cursor: str | None = None) -> APIResponse[Page[T]]:
        """`page()` with its answer's status, headers and request id."""
        cursor = self._start if cursor is None else cursor
        response = self._transport.request("GET", self._call.path, params=self._call.params_for(cursor))
        return APIResponse(response, self._call.read(response))

    def __iter__(self) -> Iterator[T]:
        while True:
            page = self.page(self.next_cursor)
            yield from page.items
            if page.next_cursor is not None:
                self.next_cursor = page.next_cursor
            if self._call.ends_after(page):
                return
            if page.unsettled and not page.items:
                time.sleep(UNSETTLED_WAIT)


class AsyncPaginator(Generic[T]):
    """`async for item in paginator`; `await paginator.page()`."""

    def __init__(self, transport: AsyncTransport, call: ListCall[T], start: str | None = None) -> None:
        self._transport = transport
        self._call = call
        self._start = start
        self.next_cursor = start

    async def page(self, cursor: str | None = None) -> Page[T]:
        return (await self.raw_page(cursor)).parse()

    async def raw_page(self, cursor: str | None = None) -> APIResponse[Page[T]]:
        cursor = self._start if cursor is None else cursor
        response = await self._transport.request("GET", self._call.path, params=self._call.params_for(cursor))
        return APIResponse(response, self._call.read(response))

    async def __aiter__(self) -> AsyncIterator[T]:
        while True:
            page = await self.page(self.next_cursor)
            for item in page.items:
                yield item
            if page.next_cursor is not None:
                self.next_cursor = page.next_cursor
            if self._call.ends_after(page):
                return
            if page.unsettled and not page.items:
                await asyncio.sleep(UNSETTLED_WAIT)
