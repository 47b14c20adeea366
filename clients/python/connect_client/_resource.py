"""What every resource namespace shares: its base class (sync or async), the typed wrappers
behind `.with_raw_response`, and the path and value encodings its methods use.

A resource is written twice, `Sessions` and `AsyncSessions`, each method with its own
annotation (`-> Session`, `async … -> Session`); what they share is the request each method
builds (a module-level function per operation, returning a `Request[T]`), so the two classes
hold only signatures and one line each. `.with_raw_response` is the same resource in raw mode
(its sends return the `APIResponse`), its methods re-annotated by `to_raw` & co. with the
original's parameters (a `ParamSpec`, overloads included).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, ParamSpec, TypeVar, cast
from urllib.parse import quote

import httpx

from . import models
from ._response import APIResponse, Request
from .pagination import AsyncPaginator, ListCall, Page, Paginator

if TYPE_CHECKING:
    from .client import AsyncConnect, Connect

T = TypeVar("T")
M = TypeVar("M", bound=models.Model)
P = ParamSpec("P")


def _seg(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("an id must be a non-empty string")
    return quote(value, safe="")


def _timestamp(value: datetime | str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("pass an aware datetime (with tzinfo)")
        return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value


def _one(model: type[M], key: str | None = None) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        body = response.json()
        return model.from_wire(body[key] if key else body)
    return parse


def _many(model: type[M], key: str) -> Callable[[httpx.Response], list[M]]:
    return lambda response: [model.from_wire(item) for item in response.json()[key]]


def _text(response: httpx.Response) -> str:
    return response.text


def _nothing(response: httpx.Response) -> None:
    return None


class SyncAPIResource:
    def __init__(self, client: Connect, *, raw: bool = False) -> None:
        self._client = client
        self._raw = raw

    def _send(self, request: Request[T]) -> T:
        answer = self._client._exchange(request)
        return cast(T, answer) if self._raw else answer.parse()

    def _list(self, call: ListCall[T], start: str | None = None) -> Paginator[T]:
        return Paginator(self._client._transport, call, start)


class AsyncAPIResource:
    def __init__(self, client: AsyncConnect, *, raw: bool = False) -> None:
        self._client = client
        self._raw = raw

    async def _send(self, request: Request[T]) -> T:
        answer = await self._client._exchange(request)
        return cast(T, answer) if self._raw else answer.parse()

    def _list(self, call: ListCall[T], start: str | None = None) -> AsyncPaginator[T]:
        return AsyncPaginator(self._client._transport, call, start)


def to_raw(method: Callable[P, T]) -> Callable[P, APIResponse[T]]:
    """A raw-mode resource's method, annotated as what it returns: the `APIResponse`."""
    return cast("Callable[P, APIResponse[T]]", method)


def to_async_raw(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[APIResponse[T]]]:
    return cast("Callable[P, Awaitable[APIResponse[T]]]", method)


def to_raw_list(method: Callable[P, Paginator[T]]) -> Callable[P, APIResponse[Page[T]]]:
    """A list's raw form: its first page (`.parse()` is the `Page`)."""
    def first_page(*args: P.args, **kwargs: P.kwargs) -> APIResponse[Page[T]]:
        return method(*args, **kwargs).raw_page()
    return first_page


def to_async_raw_list(method: Callable[P, AsyncPaginator[T]]) -> Callable[P, Awaitable[APIResponse[Page[T]]]]:
    async def first_page(*args: P.args, **kwargs: P.kwargs) -> APIResponse[Page[T]]:
        return await method(*args, **kwargs).raw_page()
    return first_page


__all__ = ["AsyncAPIResource", "Request", "SyncAPIResource"]
