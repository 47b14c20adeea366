"""Wire error codes: defined once here, raised anywhere, rendered to `{"error": code}` at the edge.

Rendering: `error_response` here is the one Django response of an error. The doorkeeper
(apps/access/render.py) only adds its headers (rate limits, the 401 challenge) at the entry
points; the ground floor's own answers (unknown paths, NUL characters, deadlines, Django's
handler views) add none.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    SuspiciousMultipartForm,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf

from apps.core import context
from engine.faults import is_dependency_unavailable, is_timeout

logger = logging.getLogger("connect.errors")


class ApiError(Exception):
    status: int = 500
    code: str = "internal_server_error"

    def __init__(self, code: str | None = None, *, status: int | None = None, **extra: Any) -> None:
        self.code = code or self.code
        self.status = status or self.status
        self.extra = extra
        super().__init__(self.code)

    def body(self, *, request_id: bool = True) -> dict[str, Any]:
        """`{"error": code, …}`, and the request's id as `requestId` when one is in hand (the
        contract allows extra fields; a customer quotes it in a support ticket). An MCP tool's
        error result is a payload, not a response: it asks for none."""
        request = context.get() if request_id else None
        if request is None:
            return {"error": self.code, **self.extra}
        return {"error": self.code, **self.extra, "requestId": request.request_id}

    def headers(self) -> dict[str, str]:
        return {}


class InvalidRequest(ApiError):
    status, code = 400, "invalid_request"


def invalid(name: str, why: str, error: type[ApiError] = InvalidRequest) -> ApiError:
    """A 400 that says which parameter or field is wrong and why: `{"error": code, "detail":
    "limit: must be an integer from 1 to 100"}`. `why` is ours: never the client's value, which
    may be a secret (a URL's credentials, a token pasted in the wrong place)."""
    return error(detail=f"{name}: {why}")


class UnsupportedGrantType(ApiError):
    """RFC 6749 §5.2: the token endpoint does not offer the grant type asked for."""

    status, code = 400, "unsupported_grant_type"


# What a 401's `detail` says: which of three things is wrong, never which of the last (unknown,
# expired, revoked, of another audience, without a workspace), never any part of the credential.
BEARER_FORM = "send `Authorization: Bearer <credential>`, an API key (`svc_…`) or an OAuth access token"
UNAUTHORIZED_DETAILS = {
    "missing": f"Authorization: missing; {BEARER_FORM}",
    "not_bearer": f"Authorization: not a Bearer credential; {BEARER_FORM}",
    "invalid": "Authorization: the Bearer credential is invalid, expired or revoked; use a current API key, or "
    "an access token from the authorization server (refresh it, or authorize again)",
}


class Unauthorized(ApiError):
    """No valid Bearer credential; `detail` says whether the Authorization header is missing, is
    not a Bearer credential, or holds one that is invalid, expired or revoked.

    `reason` picks the `detail` (`UNAUTHORIZED_DETAILS`); the doorkeeper's challenge reads it
    (apps/access/render.py): only an `invalid` credential was one the request presented."""

    status, code = 401, "unauthorized"

    def __init__(self, reason: str | None = None, **extra: Any) -> None:
        if reason is not None:
            extra = {"detail": UNAUTHORIZED_DETAILS[reason], **extra}
        super().__init__(**extra)
        self.reason = reason


class Forbidden(ApiError):
    status, code = 403, "forbidden"


# The refusal of a credential at the other door (apps/access/admission.wrong_door).
READ_CREDENTIAL_AT_INGEST = (
    "the ingest API takes an ingest key only (scope svc:ingest:write, issued by `manage.py issue_ingest_key`), "
    "never a read key or an OAuth token"
)


def ingest_key_reads_nothing(needs: Iterable[str]) -> str:
    wanted = " ".join(needs)
    return ("an ingest key writes through the ingest API only and reads nothing; read with an API key or OAuth "
            "access token" + (f" with {wanted}" if wanted else " with this operation's scope"))


class InsufficientScope(ApiError):
    """The credential lacks a scope the request needs; `requiredScopes` names every scope it
    needs, as the `WWW-Authenticate` challenge's `scope` does.

    `required`: every scope the request needs, granted or not (RFC 6750 §3; the MCP
    authorization spec's scope step-up), so a client can ask for exactly those."""

    status, code = 403, "insufficient_scope"

    def __init__(self, required: Iterable[str] = (), *, detail: str | None = None, **extra: Any) -> None:
        self.required = tuple(dict.fromkeys(required))
        if self.required:
            extra = {"detail": detail or scope_detail(self.required), "requiredScopes": list(self.required), **extra}
        elif detail is not None:
            extra = {"detail": detail, **extra}
        super().__init__(**extra)


def scope_detail(required: tuple[str, ...]) -> str:
    them = "it" if len(required) == 1 else "them"
    return (f"this request needs {'scope' if len(required) == 1 else 'scopes'} {' '.join(required)}, which the "
            f"credential does not hold; use an API key with {them}, or authorize again asking for {them} (the "
            "`scope` of the WWW-Authenticate challenge)")


class NotFound(ApiError):
    status, code = 404, "not_found"


class WorkspaceNotFound(ApiError):
    status, code = 404, "workspace_not_found"


class MethodNotAllowed(ApiError):
    status, code = 405, "method_not_allowed"


class NotAllowed(ApiError):
    status, code = 409, "not_allowed"


class Conflict(ApiError):
    """The request contradicts what is stored, or races a request with the same
    `Idempotency-Key` still in progress; `detail` says which, and an ingest append's conflict
    adds `expectedSequence`, the sequence the session expects next."""

    status, code = 409, "conflict"


class IdempotencyKeyReused(ApiError):
    """The `Idempotency-Key` was already used with a different request (method, path or body);
    send a new key for a new request."""

    status, code = 422, "idempotency_key_reused"


RESYNC_DETAIL = (
    "after: older than the event log keeps events of these types, so some after it may be gone; re-read the "
    "resources you keep (GET /api/v1/sessions and what you read of each), then read the log again from its "
    "start: GET /api/v1/events without `after` (it starts at the oldest event kept), and follow `nextCursor`"
)


class ResyncRequired(ApiError):
    """`after` is older than the event log's retention for the requested types: events after it
    may have been purged, so the log can no longer say everything that changed since. Re-read
    the resources themselves, then poll the log from a fresh `nextCursor`."""

    status, code = 410, "resync_required"

    def __init__(self, **extra: Any) -> None:
        super().__init__(**{"detail": RESYNC_DETAIL, **extra})


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class UriTooLong(ApiError):
    """The request line is over the HTTP server's limit (engine/http_limits.py)."""

    status, code = 414, "uri_too_long"


class HeadersTooLarge(ApiError):
    """The request's header block is over the HTTP server's limit (engine/http_limits.py)."""

    status, code = 431, "request_header_fields_too_large"


class InvalidFilters(ApiError):
    status, code = 400, "invalid_filters"


class FilterCostExceeded(ApiError):
    """Body adds `cost`, `budget` and `entries` (docs/api/errors.md)."""

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

    def __init__(self, *, retry_after: int = 5, **extra: Any) -> None:
        super().__init__(**extra)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


def error_response(error: ApiError, headers: Iterable[tuple[str, str]] = ()) -> JsonResponse:
    """`error` as a Django response: its status, its body and headers, then `headers`."""
    response = JsonResponse(error.body(), status=error.status)
    for name, value in [*error.headers().items(), *headers]:
        response[name] = value
    return response


async def send_error(send: Callable[[dict], Awaitable[None]], error: ApiError) -> None:
    """`error` as a whole ASGI response, for an answer sent from the event loop where no view
    runs (a request the lanes shed, engine/lanes.py)."""
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store")]  # fmt: skip
    headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers().items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# DRF's own exceptions, translated to our codes. Anything else is a 500.
_DRF_CODES: dict[type[Exception], ApiError] = {
    drf.NotAuthenticated: Unauthorized("missing"),
    drf.AuthenticationFailed: Unauthorized("invalid"),
    drf.PermissionDenied: Forbidden(),
    drf.NotFound: NotFound(),
    drf.MethodNotAllowed: MethodNotAllowed(),
    drf.ValidationError: invalid("request", "fails validation"),
    drf.ParseError: invalid("body", "malformed for its Content-Type"),
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
    if isinstance(exc, RequestDataTooBig):
        # Django's upload limit (DATA_UPLOAD_MAX_MEMORY_SIZE), raised when a view or middleware
        # first reads the body. Django would answer 400 (it is a SuspiciousOperation); DRF, 500.
        return PayloadTooLarge()
    for kind, error in _DRF_CODES.items():
        if isinstance(exc, kind):
            return error
    if is_timeout(exc):
        return RequestTimeout()
    if is_dependency_unavailable(exc):
        logger.warning("dependency unavailable: %s", exc)
        return Unavailable()
    return None


# Plain Django handlers (connect/urls.py): unknown paths and failures outside DRF views.

@csrf_exempt
def not_found_view(request, exception=None) -> JsonResponse:  # noqa: ARG001 - Django's signature
    return error_response(NotFound())


def server_error_view(request) -> JsonResponse:  # noqa: ARG001
    # Django calls this while handling the exception: a dependency outage or a timeout raised
    # outside a DRF view (in a middleware, say) still answers its 503.
    exc = sys.exc_info()[1]
    error = as_api_error(exc) if isinstance(exc, Exception) else None
    return error_response(error if isinstance(error, (RequestTimeout, Unavailable)) else ApiError())


# Django's SuspiciousOperation family, which it answers with handler400: what each one says.
_SUSPICIOUS_DETAILS: dict[type[Exception], tuple[str, str]] = {
    DisallowedHost: ("Host", "not a host this service answers for"),
    TooManyFieldsSent: ("body", "more form fields than DATA_UPLOAD_MAX_NUMBER_FIELDS"),
    TooManyFilesSent: ("body", "more files than DATA_UPLOAD_MAX_NUMBER_FILES"),
    SuspiciousMultipartForm: ("body", "malformed multipart form"),
}


def bad_request_view(request, exception=None) -> JsonResponse:  # noqa: ARG001
    """Django's handler400. RequestDataTooBig (a SuspiciousOperation) is `413 payload_too_large`."""
    error = as_api_error(exception) if exception is not None else None
    if error is None:
        name, why = next(
            (pair for kind, pair in _SUSPICIOUS_DETAILS.items() if isinstance(exception, kind)),
            ("request", "refused by the request parser"),
        )
        error = invalid(name, why)
    return error_response(error)


def permission_denied_view(request, exception=None) -> JsonResponse:  # noqa: ARG001
    return error_response(Forbidden())
