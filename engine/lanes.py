"""Lanes: the few long-lived threads per server process that run all of a request's sync code,
for Django's ASGI handler and for /mcp alike.

Django's own ASGIHandler runs each request's sync code in a thread started for it, with a
connection opened for it, which costs more than a small view; one shared thread per process
would serialise requests behind one slow search. Lanes sit between, like a WSGI server's thread
pool: each request runs all of its sync code on one free lane, so up to `CONNECT_SYNC_THREADS`
requests per process proceed at once; one that finds no lane free within
`CONNECT_QUEUE_TIMEOUT_SECONDS` is shed with `503 unavailable`. The middleware chain is loaded
in sync mode and entered once on the lane, as under WSGI (docs/decisions/runtime.md "Runtime").

Relies on (pinned in tests/test_engine_pins.py): asgiref's `ThreadSensitiveContext(executor=…)`;
Django's `ASGIHandler.handle`, `get_response_async`, `load_middleware(is_async=…)`, `read_body`,
`create_request`, `send_response`, `chunk_size`, `get_script_prefix`; `BaseHandler.get_response`
being callable twice for one request (the read-only retry)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse
from django.urls import set_script_prefix
from django.db import close_old_connections

from engine.faults import READ_ONLY_METHODS, discard_lost_connections

logger = logging.getLogger("connect.lanes")


class Overloaded(Exception):
    """No lane came free within the queue bound: the request is shed, not queued."""


class Lanes:
    """A few long-lived single-thread executors, each running one request's sync code at a
    time. One instance per process (`process_lanes`), shared by Django and /mcp, so the process
    runs at most `CONNECT_SYNC_THREADS` requests' sync code at once.

    A request takes a free lane, or waits for one in arrival order for at most `queue_timeout`
    seconds; past that it raises `Overloaded` and is answered 503 at once, instead of queueing
    behind work it would wait for longer than a client does. Health probes have a lane of their
    own (`enter_probe`), never shed and never behind a request: a saturated process is alive
    and may be ready, and a load balancer must be told so."""

    def __init__(self, count: int, *, queue_timeout: float, name: str = "lane") -> None:
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-{i}") for i in range(count)]
        self._probe_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-probe")
        self.queue_timeout = queue_timeout
        # Touched only on the event loop thread, so no lock: lanes running nothing, and the
        # requests waiting for one (first come, first served) with the loop time at which each
        # is shed. One timer serves the whole queue: waiters share one bound, so deadlines
        # grow from head to tail and only the head's can be due.
        self._free = list(range(count))
        self._waiting: deque[tuple[float, asyncio.Future[int]]] = deque()
        self._shed_timer: asyncio.TimerHandle | None = None

    async def _acquire(self) -> int:
        if self._free and not self._waiting:
            return self._free.pop()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[int] = loop.create_future()
        self._waiting.append((loop.time() + self.queue_timeout, waiter))
        if self._shed_timer is None:
            self._shed_timer = loop.call_at(self._waiting[0][0], self._shed_due, loop)
        try:
            return await waiter
        except asyncio.CancelledError:
            # The client left while waiting (its entry, now done, is skipped when reached); a
            # lane handed over in that instant goes back.
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())
            raise

    def _shed_due(self, loop: asyncio.AbstractEventLoop) -> None:
        self._shed_timer = None
        now = loop.time()
        while self._waiting and (self._waiting[0][1].done() or self._waiting[0][0] <= now):
            _, waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(Overloaded())
        if self._waiting:
            self._shed_timer = loop.call_at(self._waiting[0][0], self._shed_due, loop)

    def _release(self, lane: int) -> None:
        while self._waiting:
            _, waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(lane)
                return
        self._free.append(lane)

    async def enter(self, handle: Callable[..., Any], *args: Any) -> Any:
        """Await `handle(*args)` (a coroutine function) with its sync code on one lane; raises
        `Overloaded` before calling it when no lane came free within the queue bound."""
        lane = await self._acquire()
        try:
            async with ThreadSensitiveContext(executor=self._executors[lane]):
                return await handle(*args)
        finally:
            self._release(lane)

    async def enter_probe(self, handle: Callable[..., Any], *args: Any) -> Any:
        """`enter` for health probes: on the probe lane, never shed."""
        async with ThreadSensitiveContext(executor=self._probe_executor):
            return await handle(*args)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on a lane, with Django's connection upkeep around it (as a consumer's
        database_sync_to_async does), in a copy of the caller's context: one hop for a whole
        sync call. Raises `Overloaded` as `enter`.

        The hop is the executor's own (`run_in_executor`), not asgiref's: `fn` is plain sync
        code that calls no async code and waits for none, so it needs none of what
        `sync_to_async` sets up per call (the thread-sensitive executor lookup, the event loop
        recorded for a nested `async_to_sync`, every context variable copied back afterwards),
        which cost a `get_session` call more than the call's own protocol code."""
        lane = await self._acquire()
        try:
            loop = asyncio.get_running_loop()
            work = loop.run_in_executor(self._executors[lane], contextvars.copy_context().run, _with_upkeep, fn, args)
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                # The caller was cancelled (the client left): the lane stays taken until the
                # sync code, which cannot be interrupted, has ended.
                await asyncio.wait([work])
                raise
        finally:
            self._release(lane)


def _with_upkeep(fn: Callable[..., Any], args: tuple) -> Any:
    # channels' database_sync_to_async: connections past their age (or, on PostgreSQL,
    # every one: CONN_MAX_AGE 0 hands it back to the pool) are closed before and after.
    close_old_connections()
    try:
        return fn(*args)
    finally:
        close_old_connections()


_process_lanes: Lanes | None = None


def process_lanes() -> Lanes:
    """This process's lanes (created on first use, from CONNECT_SYNC_THREADS and
    CONNECT_QUEUE_TIMEOUT_SECONDS)."""
    global _process_lanes
    if _process_lanes is None:
        from django.conf import settings

        _process_lanes = Lanes(
            settings.CONNECT_SYNC_THREADS, queue_timeout=settings.CONNECT_QUEUE_TIMEOUT_SECONDS, name="django-lane"
        )
    return _process_lanes


# Load balancers' probes (apps/core/health.py) and Prometheus' scrape (connect/scrape.py):
# answered on the probe lane, never shed.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
SHED_RETRY_AFTER_SECONDS = 1


async def _bare_shed(send: Callable[..., Any]) -> None:
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"retry-after", str(SHED_RETRY_AFTER_SECONDS).encode()), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


# The 503 a shed request gets, sent straight from the event loop (no lane is free to render it).
# The API's error body is the apps' to write: apps/core registers its renderer at start
# (`answer_shed_with`); a process without one answers a bare 503 with Retry-After.
_send_shed: Callable[[Callable[..., Any]], Awaitable[None]] = _bare_shed


def answer_shed_with(send_shed: Callable[[Callable[..., Any]], Awaitable[None]]) -> None:
    """`send_shed(send)` answers every request shed from now on."""
    global _send_shed
    _send_shed = send_shed


class LaneASGIHandler(ASGIHandler):
    def __init__(self, lanes: Lanes) -> None:
        super().__init__()
        self.lanes = lanes

    def load_middleware(self, is_async: bool = False) -> None:  # noqa: ARG002 - always sync
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        # thread_sensitive: the lane this request's ThreadSensitiveContext names.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def handle(self, scope, receive, send):
        """Django's `ASGIHandler.handle` with one hop to the lane instead of three: the
        request_started signal, the middleware chain and view, and the response's close (the
        request_finished signal, which hands the database connection back) run in one call on
        the lane, and the finished response is sent from the event loop. Django's handler hops
        for each of the three and watches for a disconnect in a task of its own; a sync view
        cannot be interrupted anyway, so a client that left gets its answer dropped by the
        server instead. A streaming response is sent as Django sends it and closed after."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            response = await sync_to_async(self.respond, thread_sensitive=True)(scope, body_file)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client left while the answer was going out (as Django's handler)
            if response.streaming:
                await sync_to_async(response.close, thread_sensitive=True)()
        finally:
            body_file.close()

    def respond(self, scope, body_file):
        """On the lane: the whole request, up to a response ready to send (closed, unless it
        streams: its content is produced while it is sent)."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size  # as Django's run_get_response
        if not response.streaming:
            response.close()
        return response

    def get_response(self, request):
        """The middleware chain and view; a read-only request whose database connection died
        under it runs once more on a fresh connection (engine/faults.py)."""
        response = super().get_response(request)
        if response.status_code >= 500 and request.method in READ_ONLY_METHODS and discard_lost_connections():
            logger.warning("database connection lost under %s %s; retrying once", request.method, request.path)
            response = super().get_response(request)
        return response

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        if scope["path"] in PROBE_PATHS:
            return await self.lanes.enter_probe(self.handle, scope, receive, send)
        try:
            await self.lanes.enter(self.handle, scope, receive, send)
        except Overloaded:
            await _send_shed(send)


def get_asgi_application() -> LaneASGIHandler:
    import django

    django.setup(set_prefix=False)
    from engine.deadlines import apply_statement_timeout

    apply_statement_timeout()  # server processes only: commands and workers keep no limit
    return LaneASGIHandler(process_lanes())
