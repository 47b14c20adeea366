"""One request and its answer: `Request` (what to send and how to read the answer),
`APIResponse` (the answer with its status, headers and request id: what `.with_raw_response`
returns) and the ETag cache that makes reads conditional.

The cache: a GET whose `200` carried an `ETag` keeps the object read from it, keyed by path and
query, in memory on the client instance (so per credential: a client has one). The next same
GET sends `If-None-Match`; a `304 Not Modified` returns the kept object itself (results are
frozen, so sharing one is safe), costs no body and no rate-limit hit. Bounded by the bytes of
the bodies it was read from (`etag_cache_bytes`, default 8 MiB; a body larger than the bound is
not kept), least recently used first out; `etag_cache_bytes=0` turns it off. Lock-guarded: a
sync client may be shared by threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

T = TypeVar("T")
DEFAULT_CACHE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Request(Generic[T]):
    """One API call: where it goes, what it carries, and how its answer becomes a `T`."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    headers: Mapping[str, str] | None = field(default=None)

    def query(self) -> dict[str, Any] | None:
        kept = {name: value for name, value in (self.params or {}).items() if value is not None}
        return kept or None


class APIResponse(Generic[T]):
    """An answer: `status_code`, `headers`, `request_id` (`X-Request-Id`), `http_response`
    (the `httpx.Response`), and `parse()`, the object the plain call returns. After a `304`,
    `status_code` is 304 and `parse()` is the cached object (`from_cache` is True)."""

    def __init__(self, http_response: httpx.Response, value: T, *, from_cache: bool = False) -> None:
        self.http_response = http_response
        self._value = value
        self.from_cache = from_cache

    @property
    def status_code(self) -> int:
        return self.http_response.status_code

    @property
    def headers(self) -> httpx.Headers:
        return self.http_response.headers

    @property
    def request_id(self) -> str | None:
        value: str | None = self.http_response.headers.get("X-Request-Id")
        return value

    @property
    def etag(self) -> str | None:
        value: str | None = self.http_response.headers.get("ETag")
        return value

    def parse(self) -> T:
        return self._value

    def __repr__(self) -> str:
        return f"<APIResponse [{self.status_code}] {self.http_response.request.method} {self.http_response.url}>"


@dataclass
class _Entry:
    etag: str
    value: Any
    size: int


class ETagCache:
    """Path and query → (ETag, object), LRU, bounded by the answers' body bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(path: str, params: Mapping[str, Any] | None) -> tuple[str, str]:
        return path, str(httpx.QueryParams(sorted((params or {}).items())))

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[str, str]) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str], etag: str, value: Any, size: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.size
            if size > self.max_bytes:
                return
            self._entries[key] = _Entry(etag, value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.bytes -= dropped.size

    def discard(self, key: tuple[str, str]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.size


class Exchange:
    """What the sync and async clients do around sending: the conditional header before, the
    cache and the `APIResponse` after. Only sending itself differs between them."""

    def __init__(self, cache: ETagCache) -> None:
        self.cache = cache

    def prepare(self, request: Request[Any]) -> tuple[dict[str, str], _Entry | None]:
        headers = dict(request.headers or {})
        entry = None
        if request.method == "GET" and self.cache.max_bytes > 0:
            entry = self.cache.get(self.cache.key(request.path, request.query()))
            if entry is not None:
                headers["If-None-Match"] = entry.etag
        return headers, entry

    def finish(self, request: Request[T], response: httpx.Response, entry: _Entry | None) -> APIResponse[T]:
        key = self.cache.key(request.path, request.query())
        if response.status_code == 304 and entry is not None:
            self.cache.put(key, response.headers.get("ETag") or entry.etag, entry.value, entry.size)
            value: T = entry.value
            return APIResponse(response, value, from_cache=True)
        value = request.parse(response)
        etag = response.headers.get("ETag")
        if request.method == "GET" and etag and self.cache.max_bytes > 0:
            self.cache.put(key, etag, value, len(response.content))
        elif entry is not None:
            self.cache.discard(key)
        return APIResponse(response, value)
