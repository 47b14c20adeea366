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

from apps.core.errors import MethodNotAllowed, error_response

SAFE = ("GET", "HEAD")


@cache
def _views():
    from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

    return SpectacularJSONAPIView.as_view(), SpectacularSwaggerView.as_view(url_name="openapi")


def _answer(which: int, request: HttpRequest, *args, **kwargs) -> HttpResponse:
    if request.method not in SAFE:
        # As DRF answered before: JSON, and the Allow that OPTIONS' plain answer is made from
        # (apps/core/middleware.py), without loading the schema machinery for it.
        response = error_response(MethodNotAllowed())
        response["Allow"] = "GET, HEAD, OPTIONS"
        return response
    return _views()[which](request, *args, **kwargs)


@csrf_exempt
def openapi_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    return _answer(0, request, *args, **kwargs)


@csrf_exempt
def docs_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    return _answer(1, request, *args, **kwargs)
