"""/openapi.json and /docs, with drf-spectacular's schema machinery loaded on their first request.

drf-spectacular's views import its generator and `plumbing`, and through them `django.test`,
Jinja2, `unittest`, `requests` and PyYAML: several MB of every server process, which most
processes never use (docs/decisions/runtime.md "What a server process imports"). The views are made on
first use; tests/test_server_imports.py keeps the machinery out of a started server.
"""

from __future__ import annotations

from functools import cache

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from apps.core.errors import MethodNotAllowed, error_response

SAFE = ("GET", "HEAD")


def _made_on_first_request(make_view):
    """A view that makes `make_view()`'s view when first asked for something it answers."""
    view = cache(make_view)

    @csrf_exempt
    def answer(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method not in SAFE:
            # As DRF answered before: JSON, and the Allow that OPTIONS' plain answer is made from
            # (apps/core/middleware.py), without loading the schema machinery for it.
            response = error_response(MethodNotAllowed())
            response["Allow"] = "GET, HEAD, OPTIONS"
            return response
        return view()(request, *args, **kwargs)

    return answer


def _openapi():
    from drf_spectacular.views import SpectacularJSONAPIView

    return SpectacularJSONAPIView.as_view()


def _docs():
    from drf_spectacular.views import SpectacularSwaggerView

    return SpectacularSwaggerView.as_view(url_name="openapi")


openapi_view = _made_on_first_request(_openapi)
docs_view = _made_on_first_request(_docs)
