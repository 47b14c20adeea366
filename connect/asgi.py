"""One ASGI application: Channels routes HTTP; the event stream and /mcp will be Channels
consumers, everything else is Django's ASGI handler (DRF, admin, OAuth, well-known)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "connect.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from apps.core.asgi import get_asgi_application  # noqa: E402
from django.urls import re_path  # noqa: E402

django_asgi = get_asgi_application()

from connect.routing import http_routes  # noqa: E402

application = ProtocolTypeRouter({"http": URLRouter([*http_routes, re_path(r"", django_asgi)])})
