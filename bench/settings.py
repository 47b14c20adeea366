"""Benchmark settings: production settings plus the bare-Django reference view (bench/urls.py).

Serve with `DJANGO_SETTINGS_MODULE=bench.settings python manage.py serve --workers 2`, exactly
like production; nothing else differs (same middleware, database options, daphne processes).
"""

from connect.settings import *  # noqa: F401,F403

ROOT_URLCONF = "bench.urls"
