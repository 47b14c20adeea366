"""Lanes: the few long-lived threads per server process that run all of a request's sync code,
for Django's ASGI handler and for /mcp alike.

Django's own ASGIHandler enters a `ThreadSensitiveContext` per request, so each request's
sync code (middleware, DRF views, the ORM) runs in a thread started for that request, with a
database connection opened for it; that thread and connection cost more than a small view.
Running all sync code on one shared thread per process removes the cost but serialises
requests: one slow search stalls every fast request queued behind it.

Lanes sit between the two, like a WSGI server's thread pool: each request runs all of its
sync code on one lane (Django requires one thread per request), the least busy one, so up to
`CONNECT_SYNC_THREADS` requests per process proceed at once and no thread is started per
request. The middleware chain is loaded in sync mode and entered once on the lane, as under
WSGI: Django's async mode would run each async-capable middleware's hooks as two more hops
between the event loop and the lane. No view of ours is async; one that were would run
through async_to_sync, as under WSGI.

Relies on: asgiref's `ThreadSensitiveContext(executor=…)` (asgiref ≥ 3.8) naming the thread
that `sync_to_async(thread_sensitive=True)` runs on; Django's `ASGIHandler.handle`,
`get_response_async` and `load_middleware(is_async=…)`, overridden here (public methods of
the handler class, pinned in tests/test_engine_pins.py); `BaseHandler.get_response` being
callable twice for one request (the read-only retry).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.db import database_sync_to_async
from django.core.handlers.asgi import ASGIHandler

from connect.engine.faults import READ_ONLY_METHODS, discard_lost_connections

logger = logging.getLogger("connect.lanes")


class Lanes:
    """A few long-lived single-thread executors; each request runs its sync code on the least
    busy one. One instance per process (`process_lanes`), shared by Django and /mcp, so the
    process runs at most `CONNECT_SYNC_THREADS` requests' sync code at once."""

    def __init__(self, count: int, *, name: str = "lane") -> None:
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-{i}") for i in range(count)]
        self._busy = [0] * count  # requests on each lane; touched only on the event loop thread

    def _least_busy(self) -> int:
        return min(range(len(self._executors)), key=self._busy.__getitem__)

    async def enter(self, handle: Callable[..., Any], *args: Any) -> Any:
        """Await `handle(*args)` (a coroutine function) with its sync code on one lane."""
        lane = self._least_busy()
        self._busy[lane] += 1
        try:
            async with ThreadSensitiveContext(executor=self._executors[lane]):
                return await handle(*args)
        finally:
            self._busy[lane] -= 1

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on a lane, with Django's connection upkeep around it (as a consumer's
        database_sync_to_async): one hop for a whole sync call."""
        return await self.enter(database_sync_to_async(fn), *args)


_process_lanes: Lanes | None = None


def process_lanes() -> Lanes:
    """This process's lanes (created on first use, from CONNECT_SYNC_THREADS)."""
    global _process_lanes
    if _process_lanes is None:
        from django.conf import settings

        _process_lanes = Lanes(settings.CONNECT_SYNC_THREADS, name="django-lane")
    return _process_lanes


class LaneASGIHandler(ASGIHandler):
    def __init__(self, lanes: Lanes) -> None:
        super().__init__()
        self.lanes = lanes

    def load_middleware(self, is_async: bool = False) -> None:  # noqa: ARG002 - always sync
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        # thread_sensitive: the lane this request's ThreadSensitiveContext names.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    def get_response(self, request):
        """The middleware chain and view; a read-only request whose database connection died
        under it runs once more on a fresh connection (connect/engine/faults.py)."""
        response = super().get_response(request)
        if response.status_code >= 500 and request.method in READ_ONLY_METHODS and discard_lost_connections():
            logger.warning("database connection lost under %s %s; retrying once", request.method, request.path)
            response = super().get_response(request)
        return response

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.lanes.enter(self.handle, scope, receive, send)


def get_asgi_application() -> LaneASGIHandler:
    import django

    django.setup(set_prefix=False)
    from connect.engine.deadlines import apply_statement_timeout

    apply_statement_timeout()  # server processes only: commands and workers keep no limit
    return LaneASGIHandler(process_lanes())
