"""Request edges every path shares: bodies over the upload limit and NUL characters refused,
plain OPTIONS and HEAD, the request's database deadline (engine/deadlines.py).

Each refusal happens here, before authentication and before any view can read the body or pass
a parameter to a query, so no view can forget it; each middleware's docstring says what it
answers and why."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse
from django.urls import NoReverseMatch, Resolver404, resolve, reverse

from apps.core.errors import (
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    Unavailable,
    as_api_error,
    error_response,
)
from apps.core.text import NUL, holds_nul
from engine.deadlines import end_deadline, start_deadline


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
    """Plain answers to OPTIONS and HEAD on every path served by a view class.

    OPTIONS: `204` with `Allow` listing the view's methods, no body — never DRF's metadata
    document (which names internal classes). Class-based views are answered without running them;
    function views limited by `require_http_methods` are asked, and their 405 (which carries
    `Allow`) becomes the plain answer. A CORS preflight on a Bearer-only path is answered
    earlier by django-cors-headers, which is above this middleware.

    HEAD: Django answers it with the GET view (View.setup); the body is dropped here, keeping the
    GET's headers (Content-Length included), so an ASGI server that does not strip it itself
    never sends one."""

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


class UploadLimitMiddleware:
    """Reads the body of every request that may carry one (the admin's excepted: its forms
    keep Django's own handling), so an oversized one is refused here, whatever the view.

    A body over `DATA_UPLOAD_MAX_MEMORY_SIZE` is `413 payload_too_large` whether or not the view
    reads it (a POST whose view ignores the body, e.g. a webhook test, must not accept megabytes
    either), before authentication. Django raises RequestDataTooBig on the first read of the
    body; it would become a 400 in a plain view and a 500 in a DRF view, and apps/core/errors.py
    maps it to 413 there too for reads that get past this middleware."""

    BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        try:
            self.admin_prefix: str | None = reverse("admin:index")
        except NoReverseMatch:  # a URLconf without the admin (bench/urls.py)
            self.admin_prefix = None

    def __call__(self, request):
        admin = self.admin_prefix is not None and request.path_info.startswith(self.admin_prefix)
        if request.method in self.BODY_METHODS and not admin:
            try:
                request.body  # noqa: B018 - the read is the check; Django keeps the bytes for the view
            except RequestDataTooBig:
                return error_response(PayloadTooLarge())
        return self.get_response(request)


class NulCharacterMiddleware:
    """NUL (apps/core/text.py): a path holding one names nothing (`404 not_found`); a query string
    or form body holding one is `400 invalid_request` — before any view can pass it to a query."""

    FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path:
            return error_response(NotFound())
        at_fault = self._nul_field(request.GET)
        if at_fault is None and request.method == "POST" and request.content_type in self.FORM_TYPES:
            at_fault = self._nul_field(request.POST)
        if at_fault is not None:
            return error_response(InvalidRequest(detail=f"{at_fault}: holds U+0000"))
        return self.get_response(request)

    @staticmethod
    def _nul_field(query) -> str | None:
        """The first parameter holding NUL, by name when its name is clean; None when none does."""
        for key in query:
            if holds_nul(key):
                return "a parameter name"
            if holds_nul(query.getlist(key)):
                return key
        return None


class RequestDeadlineMiddleware:
    """Starts the request's database deadline (engine/deadlines.py) and turns a timed-out
    statement or an unavailable database outside DRF (DRF's views go through
    apps.core.errors) into its 503."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        start_deadline(settings.CONNECT_REQUEST_TIMEOUT_SECONDS)
        try:
            return self.get_response(request)
        finally:
            end_deadline()

    def process_exception(self, request, exception):  # noqa: ARG002
        error = as_api_error(exception)
        if isinstance(error, (RequestTimeout, Unavailable)):
            return error_response(error)
        return None
