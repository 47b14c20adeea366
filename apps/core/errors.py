"""Wire error codes: defined once here, raised anywhere, rendered to `{"error": code}` at the edge.

Rendering: a refusal at an entry point (REST's DRF exception handler, the event stream, `/mcp`)
is rendered by the doorkeeper (apps/access/render.py: rate-limit headers and the 401 challenge);
the ground floor's own answers (unknown paths, NUL characters, deadlines, Django's handler
views) use `error_response` here, which knows no credential.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf


class ApiError(Exception):
    status: int = 500
    code: str = "internal_server_error"

    def __init__(self, code: str | None = None, *, status: int | None = None, **extra: Any) -> None:
        self.code = code or self.code
        self.status = status or self.status
        self.extra = extra
        super().__init__(self.code)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, **self.extra}


class InvalidRequest(ApiError):
    status, code = 400, "invalid_request"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class InsufficientScope(ApiError):
    status, code = 403, "insufficient_scope"


class NotFound(ApiError):
    status, code = 404, "not_found"


class WorkspaceNotFound(ApiError):
    status, code = 404, "workspace_not_found"


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class NotAllowed(ApiError):
    status, code = 409, "not_allowed"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class InvalidFilters(ApiError):
    status, code = 400, "invalid_filters"


class FilterCostExceeded(ApiError):
    """Body adds `cost`, `budget` and `entries` (contract §7)."""

    status, code = 400, "filter_cost_exceeded"


class RateLimited(ApiError):
    status, code = 429, "rate_limited"


class ConnectionLimit(ApiError):
    status, code = 429, "connection_limit"


class RequestTimeout(ApiError):
    status, code = 503, "timeout"


class Unavailable(ApiError):
    """A dependency (database, Redis) cannot be reached, or the process is saturated; the
    response carries `Retry-After`."""

    status, code = 503, "unavailable"


def error_response(error: ApiError) -> JsonResponse:
    return JsonResponse(error.body(), status=error.status)


# DRF's own exceptions, translated to our codes. Anything else is a 500.
_DRF_CODES: dict[type[Exception], ApiError] = {
    drf.NotAuthenticated: Unauthorized(),
    drf.AuthenticationFailed: Unauthorized(),
    drf.PermissionDenied: Forbidden(),
    drf.NotFound: NotFound(),
    drf.MethodNotAllowed: MethodNotAllowed(),
    drf.ValidationError: InvalidRequest(),
    drf.ParseError: InvalidRequest(),
    drf.UnsupportedMediaType: ApiError("unsupported_media_type", status=415),
    drf.NotAcceptable: ApiError("not_acceptable", status=406),
    drf.Throttled: ApiError("rate_limited", status=429),
}


def as_api_error(exc: Exception) -> ApiError | None:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Http404):
        return NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return Forbidden()
    for kind, error in _DRF_CODES.items():
        if isinstance(exc, kind):
            return error
    from apps.core.timeouts import is_timeout

    if is_timeout(exc):
        return RequestTimeout()
    return None


# Plain Django handlers (connect/urls.py): unknown paths and failures outside DRF views.

@csrf_exempt
def not_found_view(request, exception=None) -> JsonResponse:  # noqa: ARG001 - Django's signature
    return error_response(NotFound())


def server_error_view(request) -> JsonResponse:  # noqa: ARG001
    return error_response(ApiError())


def bad_request_view(request, exception=None) -> JsonResponse:  # noqa: ARG001
    return error_response(InvalidRequest())


def permission_denied_view(request, exception=None) -> JsonResponse:  # noqa: ARG001
    return error_response(Forbidden())
