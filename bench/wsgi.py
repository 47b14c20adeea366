"""WSGI entry point for the gunicorn experiment of bench/rest.py (`--gunicorn`): the same
Django project and settings (bench.settings), served by a WSGI server, where each worker thread
keeps its database connection (CONN_MAX_AGE) instead of one connection per request. Only the
plain HTTP views work here (no SSE, no MCP): a measurement, not a way to serve Connect."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
application = get_wsgi_application()
