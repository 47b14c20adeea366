"""Connect's ASGI app with Django's stock handler (a thread and a connection per request),
for side-by-side comparison with production's LaneASGIHandler (engine/lanes.py).
Selected by bench/settings.py when BENCH_STOCK_HANDLER=1."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.urls import re_path  # noqa: E402

django_asgi = get_asgi_application()

from connect.routing import http_routes  # noqa: E402

application = ProtocolTypeRouter({"http": URLRouter([*http_routes, re_path(r"", django_asgi)])})
