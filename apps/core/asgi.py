"""Django's ASGI handler on a fixed set of long-lived threads ("lanes") per process.

Django's own ASGIHandler enters a `ThreadSensitiveContext` per request, so each request's
sync code (middleware, DRF views, the ORM) runs in a thread started for that request, with a
database connection opened for it. Measured under load (bench/README.md), that thread and
connection cost more than a small view itself. Running all sync code on one shared thread per
process removes the cost but serialises requests: one slow search stalls every fast request
queued behind it in that process.

Lanes sit between the two, like a WSGI server's thread pool: each request runs all of its
sync code on one lane (Django requires one thread per request), the least busy one, so up to
`CONNECT_SYNC_THREADS` requests per process proceed at once and no thread is started per request.

The middleware chain runs as it does under WSGI: loaded in sync mode and entered once on the
lane. Django's async mode would run each async-capable middleware's process_request and
process_response as two more hops between the event loop and the lane (15 per request with
our MIDDLEWARE), which cost more than a small view: /healthz took 2.8 ms in process, 0.65 ms
in sync mode (docs/decisions.md "One hop per request"). No view of ours is async; one that
were would run through async_to_sync, as under WSGI.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler


class LaneASGIHandler(ASGIHandler):
    def __init__(self, lanes: int) -> None:
        super().__init__()
        self._lanes = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"django-lane-{i}") for i in range(lanes)]
        self._busy = [0] * lanes  # requests on each lane; touched only on the event loop thread

    def load_middleware(self, is_async: bool = False) -> None:  # noqa: ARG002 - always sync
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        # thread_sensitive: the lane this request's ThreadSensitiveContext names.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        lane = min(range(len(self._lanes)), key=self._busy.__getitem__)
        self._busy[lane] += 1
        try:
            async with ThreadSensitiveContext(executor=self._lanes[lane]):
                await self.handle(scope, receive, send)
        finally:
            self._busy[lane] -= 1


def get_asgi_application() -> LaneASGIHandler:
    import django
    from django.conf import settings

    django.setup(set_prefix=False)
    from apps.core.timeouts import apply_statement_timeout

    apply_statement_timeout()  # server processes only: commands and workers keep no limit
    return LaneASGIHandler(lanes=settings.CONNECT_SYNC_THREADS)
