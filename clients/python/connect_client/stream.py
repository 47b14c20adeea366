"""The event stream, followed so that a consumer sees every event once, in order.

- Reconnects after any temporary end (EOF, reset, `429`, `5xx`, a silent connection) with
  exponential backoff and equal jitter, honouring `Retry-After`; the backoff resets once a
  stream is open.
- Sends `Last-Event-ID` with the last event handed to the consumer, so the server replays
  what was missed within its resume window.
- After `: resume-unavailable` (the server could not replay) it pages the event log
  (`GET /api/v1/events?after=<last id>`) before reading the live stream further: the stream is
  already open, so whatever commits meanwhile arrives live too, and a copy is dropped by id.
  When the log cannot reach back either (`410 resync_required`), `on_resync(error)` is called
  (default: the `ResyncRequired` is raised) — reconcile through the resources.
- A connection with no byte (event or `: ping`) for `heartbeat_timeout` seconds is dropped and
  reopened: a dead peer that never sent FIN or RST.
- `close()` (from any thread, or leaving the `with` block) ends iteration cleanly; the async
  stream is also ended by cancelling the task that iterates it.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx

from . import errors
from .models import Event
from .types import EventType

if TYPE_CHECKING:
    from .client import AsyncConnect, Connect

STREAM_PATH = "/api/v1/events/stream"
DEFAULT_TYPES = ("session.created", "session.status_changed")  # a stream without filters
RECENT_IDS = 10_000


class _Retry(Exception):
    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__("retry")
        self.retry_after = retry_after


class _Core:
    """What the sync and async streams share: parsing, matching, deduplication, backoff."""

    def __init__(self, client: Any, *, filters: list[dict[str, Any]] | None = None, last_event_id: str | None = None,
                 heartbeat_timeout: float = 45.0, min_backoff: float = 1.0, max_backoff: float = 60.0,
                 on_resync: Callable[[errors.ResyncRequired], None] | None = None,
                 connect_timeout: float = 10.0) -> None:
        self._client = client
        self.filters = filters
        self.last_event_id = last_event_id
        self.heartbeat_timeout = heartbeat_timeout
        self.min_backoff, self.max_backoff = min_backoff, max_backoff
        self.on_resync = on_resync
        self.connections = 0  # streams opened
        self.catch_ups = 0  # times the event log filled a gap the stream could not replay
        self._timeout = httpx.Timeout(connect_timeout, read=heartbeat_timeout)
        self._recent: deque[str] = deque(maxlen=RECENT_IDS)
        self._recent_set: set[str] = set()
        self._failures = 0

    # --- request ---------------------------------------------------------------------------
    def _request(self) -> tuple[dict[str, str], dict[str, str] | None]:
        headers = {**self._client._transport.headers, "Accept": "text/event-stream"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        params = {"filters": json.dumps(self.filters, separators=(",", ":"))} if self.filters else None
        return headers, params

    @staticmethod
    def _refusal(response: httpx.Response) -> Exception:
        error = errors.from_response(response)
        if response.status_code == 429 or response.status_code >= 500:
            return _Retry(error.retry_after)
        return error  # 400, 401, 403, 404: retrying will not change them

    def _backoff(self, retry_after: float | None) -> float:
        delay = min(self.max_backoff, self.min_backoff * 2**self._failures)
        delay = delay / 2 + random.uniform(0, delay / 2)
        self._failures += 1
        return float(max(delay, retry_after or 0.0))

    # --- frames ----------------------------------------------------------------------------
    def _types(self) -> list[EventType] | None:
        """The filters' event types, for the event log's `type` (which the server checks)."""
        return sorted({entry["type"] for entry in self.filters}) if self.filters else None

    def _matches(self, event: Event) -> bool:
        if not self.filters:
            return event.type in DEFAULT_TYPES
        return any(entry["type"] == event.type and entry.get("sessionId") in (None, event.session_id)
                   for entry in self.filters)

    def _accept(self, event: Event) -> bool:
        """True the first time an id is seen; remembers it as the last one handed out."""
        if event.id is not None:
            if event.id in self._recent_set:
                return False
            if len(self._recent) == self._recent.maxlen:
                self._recent_set.discard(self._recent[0])
            self._recent.append(event.id)
            self._recent_set.add(event.id)
            self.last_event_id = event.id
        return True

    def _resync(self, error: errors.ResyncRequired) -> None:
        if self.on_resync is None:
            raise error
        self.on_resync(error)


class _Frames:
    """An SSE parser fed line by line: returns ("event", Event) or ("comment", text) or None."""

    def __init__(self) -> None:
        self.event_id: str | None = None
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, Any] | None:
        if line == "":
            data, event_id = self.data, self.event_id
            self.data, self.event_id = [], None
            if data:
                envelope = json.loads("\n".join(data))
                return "event", Event.from_wire({**envelope, "id": event_id})
            return None
        if line.startswith(":"):
            return "comment", line[1:].strip()
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            self.event_id = value
        elif name == "data":
            self.data.append(value)
        return None


class EventStream(_Core):
    """`for event in client.events.stream(filters=[…]): …` — see the module's docstring."""

    def __init__(self, client: Connect, **options: Any) -> None:
        super().__init__(client, **options)
        self._client: Connect = client
        self._closed = threading.Event()
        self._response: httpx.Response | None = None
        self._http = httpx.Client(base_url=client.base_url, timeout=self._timeout)

    def close(self) -> None:
        self._closed.set()
        response = self._response
        if response is not None:
            response.close()  # unblocks a read waiting for the next line

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        try:
            while not self._closed.is_set():
                retry_after = None
                try:
                    yield from self._connection()
                except _Retry as retry:
                    retry_after = retry.retry_after
                except (httpx.TransportError, httpx.StreamError):
                    pass
                if self._closed.wait(self._backoff(retry_after)):
                    break
        finally:
            self._http.close()

    def _connection(self) -> Iterator[Event]:
        headers, params = self._request()
        with self._http.stream("GET", STREAM_PATH, params=params, headers=headers) as response:
            if response.status_code != 200:
                response.read()
                raise self._refusal(response)
            self._response = response
            self.connections += 1
            self._failures = 0
            frames = _Frames()
            try:
                for line in response.iter_lines():
                    found = frames.feed(line)
                    if found is None:
                        continue
                    kind, value = found
                    if kind == "event":
                        if self._accept(value):
                            yield value
                    elif value == "resume-unavailable":
                        yield from self._catch_up()
            except (httpx.TransportError, httpx.StreamError, RuntimeError):
                if not self._closed.is_set():
                    raise _Retry() from None
            finally:
                self._response = None

    def _catch_up(self) -> Iterator[Event]:
        if self.last_event_id is None:
            return  # nothing handed out yet: there is no gap to fill
        self.catch_ups += 1
        try:
            for event in self._client.events.list(after=self.last_event_id, type=self._types(), limit=100):
                if self._matches(event) and self._accept(event):
                    yield event
        except errors.ResyncRequired as error:
            self._resync(error)


class AsyncEventStream(_Core):
    """`async for event in client.events.stream(filters=[…]): …`; cancel the task (or call
    `await stream.aclose()`) to end it."""

    def __init__(self, client: AsyncConnect, **options: Any) -> None:
        super().__init__(client, **options)
        self._client: AsyncConnect = client
        self._closed = asyncio.Event()
        self._http = httpx.AsyncClient(base_url=client.base_url, timeout=self._timeout)

    async def aclose(self) -> None:
        self._closed.set()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            while not self._closed.is_set():
                retry_after = None
                try:
                    async for event in self._connection():
                        yield event
                except _Retry as retry:
                    retry_after = retry.retry_after
                except (httpx.TransportError, httpx.StreamError):
                    pass
                if self._closed.is_set():
                    break
                try:
                    await asyncio.wait_for(self._closed.wait(), self._backoff(retry_after))
                except asyncio.TimeoutError:
                    pass
        finally:
            await self._http.aclose()

    async def _connection(self) -> AsyncIterator[Event]:
        headers, params = self._request()
        async with self._http.stream("GET", STREAM_PATH, params=params, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                raise self._refusal(response)
            self.connections += 1
            self._failures = 0
            frames = _Frames()
            try:
                async for line in response.aiter_lines():
                    found = frames.feed(line)
                    if found is None:
                        continue
                    kind, value = found
                    if kind == "event":
                        if self._accept(value):
                            yield value
                    elif value == "resume-unavailable":
                        async for event in self._catch_up():
                            yield event
            except (httpx.TransportError, httpx.StreamError, RuntimeError):
                if not self._closed.is_set():
                    raise _Retry() from None

    async def _catch_up(self) -> AsyncIterator[Event]:
        if self.last_event_id is None:
            return
        self.catch_ups += 1
        try:
            async for event in self._client.events.list(after=self.last_event_id, type=self._types(), limit=100):
                if self._matches(event) and self._accept(event):
                    yield event
        except errors.ResyncRequired as error:
            self._resync(error)
