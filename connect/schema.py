"""/openapi.json and /docs, with drf-spectacular's schema machinery loaded on their first request.

drf-spectacular's views import its generator and `plumbing`, and through them `django.test`,
Jinja2, `unittest`, `requests` and PyYAML: several MB of every server process, which most
processes never use (docs/decisions.md "What a server process imports"). The views are made on
first use; tests/test_server_imports.py keeps the machinery out of a started server.
"""

from __future__ import annotations

from functools import cache

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt


@cache
def _views():
    from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

    return SpectacularJSONAPIView.as_view(), SpectacularSwaggerView.as_view(url_name="openapi")


@csrf_exempt
def openapi_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    return _views()[0](request, *args, **kwargs)


@csrf_exempt
def docs_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    return _views()[1](request, *args, **kwargs)
