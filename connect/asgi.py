"""The one ASGI application daphne serves: static files first, then Channels routes HTTP to the
event stream and /mcp (connect/routing.py), and everything else to Django's handler on the
process's lanes (engine/lanes.py: DRF, admin, OAuth, well-known, health).

It is built in a context of its own (`contextvars.copy_context().run`): startup work sets
context variables — Django's URL resolvers flag their population in asgiref `Local`s, one per
resolver, when middleware reverses a URL — and whatever the importing thread's context holds is
copied into every request's task, where each variable makes every later `ContextVar.set` and
asgiref's context restore after each hop to a lane cost more (tests/test_asgi_lanes.py)."""

import contextvars
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")


def _build():
    from apps.core.context import new_request_id
    from engine import http_limits

    http_limits.install(new_request_id)  # refused request heads get our JSON 400/414/431, not Twisted's

    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import re_path

    from engine.lanes import get_asgi_application

    django_asgi = get_asgi_application()

    from django.conf import settings
    from django.urls import URLPattern
    from servestatic import ServeStaticASGI

    from apps.access.door import Door, named_route
    from apps.core.cors import CorsASGI
    from apps.core.static import is_hashed
    from connect.routing import http_routes

    # The Channels consumers are not Django views, so django-cors-headers never sees them: the
    # same policy and headers come from apps.core.cors's wrapper around each of them.
    channels_routes = [
        URLPattern(route.pattern, CorsASGI(named_route(route.callback, str(route.pattern))), route.default_args, route.name)
        for route in http_routes
    ]

    # Static files (collected by `collectstatic`) are answered before routing; hashed names are
    # cached for a year, the rest for a minute; gzip copies are served to clients that accept them.
    # The door (request id, access line, request metrics) is in front of everything.
    return Door(
        ServeStaticASGI(
            ProtocolTypeRouter({"http": URLRouter([*channels_routes, re_path(r"", django_asgi)])}),
            root=settings.STATIC_ROOT,
            prefix=settings.STATIC_URL,
            immutable_file_test=is_hashed,
        ),
        static_prefix=settings.STATIC_URL,
    )


application = contextvars.copy_context().run(_build)
