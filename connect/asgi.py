"""The one ASGI application daphne serves: static files first, then Channels routes HTTP to the
event stream and /mcp (connect/routing.py), and everything else to Django's handler on the
process's lanes (connect/engine/lanes.py: DRF, admin, OAuth, well-known, health)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")

from connect.engine import http_limits  # noqa: E402

http_limits.install()  # oversized request lines and header blocks get 414/431, not a silent close

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from connect.engine.lanes import get_asgi_application  # noqa: E402
from django.urls import re_path  # noqa: E402

django_asgi = get_asgi_application()

from django.conf import settings  # noqa: E402
from django.urls import URLPattern  # noqa: E402
from servestatic import ServeStaticASGI  # noqa: E402

from apps.core.cors import CorsASGI  # noqa: E402
from apps.core.static import is_hashed  # noqa: E402
from connect.routing import http_routes  # noqa: E402

# The Channels consumers are not Django views, so django-cors-headers never sees them: the
# same policy and headers come from apps.core.cors's wrapper around each of them.
channels_routes = [
    URLPattern(route.pattern, CorsASGI(route.callback), route.default_args, route.name) for route in http_routes
]

# Static files (collected by `collectstatic`) are answered before routing; hashed names are
# cached for a year, the rest for a minute; gzip copies are served to clients that accept them.
application = ServeStaticASGI(
    ProtocolTypeRouter({"http": URLRouter([*channels_routes, re_path(r"", django_asgi)])}),
    root=settings.STATIC_ROOT,
    prefix=settings.STATIC_URL,
    immutable_file_test=is_hashed,
)
