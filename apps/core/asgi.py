"""Django's ASGI handler, minus the per-request thread.

Django's ASGIHandler enters a `ThreadSensitiveContext` for every request, so the request's
sync code (middleware, DRF views, the ORM) runs in a thread created for that request, with
a database connection opened for it and dropped after. Measured under load (bench/README.md)
that per-request thread and connection cost more than the view itself.

Without the context, asgiref runs thread-sensitive sync code on one long-lived thread per
process: connections persist and no thread is started per request. Sync work in one process
is serialised (the GIL serialises most of it anyway); `serve --workers N` runs one process
per core. Async consumers (event stream, MCP) are unaffected: they never enter this handler.
"""

from __future__ import annotations

from django.core.handlers.asgi import ASGIHandler


class SharedThreadASGIHandler(ASGIHandler):
    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)


def get_asgi_application() -> SharedThreadASGIHandler:
    import django

    django.setup(set_prefix=False)
    return SharedThreadASGIHandler()
