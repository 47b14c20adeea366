"""Request edges every path shares: NUL characters refused, plain OPTIONS and HEAD.

NUL (apps/core/text.py): a path holding one names nothing (`404 not_found`); a query string
or form body holding one is `400 invalid_request` — before any view can pass it to a query.

Plain answers to OPTIONS and HEAD on every path served by a view class.

OPTIONS: `204` with `Allow` listing the view's methods, no body — never DRF's metadata
document (which names internal classes). Class-based views are answered without running them;
function views limited by `require_http_methods` are asked, and their 405 (which carries
`Allow`) becomes the plain answer. A CORS preflight on a Bearer-only path is answered
earlier by django-cors-headers, which is above this middleware.

HEAD: Django answers it with the GET view (View.setup); the body is dropped here, keeping the
GET's headers (Content-Length included), so an ASGI server that does not strip it itself
never sends one.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import Resolver404, resolve

from apps.core.errors import InvalidRequest, NotFound, error_response
from apps.core.text import NUL, holds_nul


def allowed_methods(view_class) -> list[str]:
    methods = [m.upper() for m in view_class.http_method_names if hasattr(view_class, m)]
    if "GET" in methods and "HEAD" not in methods:
        methods.append("HEAD")  # View.setup answers HEAD with get
    if "OPTIONS" not in methods:
        methods.append("OPTIONS")
    return methods


def plain_options(methods: list[str]) -> HttpResponse:
    response = HttpResponse(status=204)
    response["Allow"] = ", ".join(dict.fromkeys(methods))
    return response


class PlainOptionsHeadMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "OPTIONS":
            view_class = self._view_class(request.path_info)
            if view_class is not None:
                return plain_options(allowed_methods(view_class))
        response = self.get_response(request)
        if request.method == "OPTIONS" and response.status_code == 405 and response.has_header("Allow"):
            # A function view limited by require_http_methods/require_GET: its 405 names them.
            methods = [m.strip() for m in response["Allow"].split(",") if m.strip()]
            return plain_options([*methods, *(["HEAD"] if "GET" in methods and "HEAD" not in methods else []), "OPTIONS"])
        if request.method == "HEAD" and not response.streaming and response.content:
            length = len(response.content)
            response.content = b""
            response["Content-Length"] = str(length)
        return response

    @staticmethod
    def _view_class(path: str):
        try:
            match = resolve(path)
        except Resolver404:
            return None
        return getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)


class NulCharacterMiddleware:
    FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path:
            return error_response(NotFound())
        if self._holds_nul(request.GET) or (
            request.method == "POST" and request.content_type in self.FORM_TYPES and self._holds_nul(request.POST)
        ):
            return error_response(InvalidRequest())
        return self.get_response(request)

    @staticmethod
    def _holds_nul(query) -> bool:
        return any(holds_nul(key) or holds_nul(query.getlist(key)) for key in query)
