"""One exception per wire error code (the `error` field of every JSON error body).

Every API error is a `ConnectError` carrying the HTTP `status`, the wire `code`, the body's
other fields (`extra`: `detail`, `cost`, `budget`, …) and the response's `X-Request-Id`.
`from_response` picks the class by code; a code this version does not know is still a
`ConnectError` (by status class: `ClientError` for 4xx, `ServerError` for 5xx), never a crash.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

import httpx


class ConfigurationError(ValueError):
    """The client was built without what it needs (a base URL, one credential), or with too much."""


class ConnectError(Exception):
    """An error answer from the API.

    `body` is the decoded JSON body as received (every field, those this version does not know
    too); `extra` is the same without `error` and `requestId`; `headers` are the response's
    (`WWW-Authenticate`, `RateLimit-*`, …)."""

    status: int = 0
    code: str = ""

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int | None = None,
        code: str | None = None,
        extra: dict[str, Any] | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status if status is not None else type(self).status
        self.code = code if code is not None else type(self).code
        self.extra: dict[str, Any] = dict(extra or {})
        self.body: dict[str, Any] = dict(body) if body is not None else {"error": self.code, **self.extra}
        self.headers: httpx.Headers = httpx.Headers(headers or {})
        self.request_id = request_id
        self.retry_after = retry_after
        detail = self.extra.get("detail")
        text = message or f"{self.status} {self.code}" + (f": {detail}" if detail else "")
        if request_id:
            text += f" (request {request_id})"
        super().__init__(text)

    @property
    def detail(self) -> str | None:
        """What was wrong and what to do (a 400's parameter, a 401's cause, …)."""
        detail = self.extra.get("detail")
        return detail if isinstance(detail, str) else None


class ClientError(ConnectError):
    """A 4xx whose code this client version does not know."""


class ServerError(ConnectError):
    """A 5xx whose code this client version does not know."""


class InvalidRequest(ClientError):
    status, code = 400, "invalid_request"


class InvalidFilters(ClientError):
    status, code = 400, "invalid_filters"


class FilterCostExceeded(ClientError):
    """`cost`, `budget` and `entries` are in `extra` (and as properties)."""

    status, code = 400, "filter_cost_exceeded"

    @property
    def cost(self) -> int | None:
        cost = self.extra.get("cost")
        return cost if isinstance(cost, int) else None

    @property
    def budget(self) -> int | None:
        budget = self.extra.get("budget")
        return budget if isinstance(budget, int) else None

    @property
    def entries(self) -> list[dict[str, Any]]:
        entries = self.extra.get("entries")
        return entries if isinstance(entries, list) else []


class Unauthorized(ClientError):
    status, code = 401, "unauthorized"


class Forbidden(ClientError):
    status, code = 403, "forbidden"


class InsufficientScope(ClientError):
    """`required_scopes`: what the call needs, when the server names it (`requiredScopes`)."""

    status, code = 403, "insufficient_scope"

    @property
    def required_scopes(self) -> list[str]:
        scopes = self.extra.get("requiredScopes")
        return [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else []


class NotFound(ClientError):
    status, code = 404, "not_found"


class WorkspaceNotFound(ClientError):
    status, code = 404, "workspace_not_found"


class MethodNotAllowed(ClientError):
    status, code = 405, "method_not_allowed"


class NotAcceptable(ClientError):
    status, code = 406, "not_acceptable"


class NotAllowed(ClientError):
    status, code = 409, "not_allowed"


class Conflict(ClientError):
    """The request contradicts what is stored (an ingest append's gap or changed segment:
    `expected_sequence` says what to send next), or its `Idempotency-Key` is still in flight."""

    status, code = 409, "conflict"

    @property
    def expected_sequence(self) -> int | None:
        expected = self.extra.get("expectedSequence")
        return expected if isinstance(expected, int) else None


class IdempotencyKeyReused(ClientError):
    status, code = 422, "idempotency_key_reused"


class ResyncRequired(ClientError):
    """The event log no longer reaches back to the `after` asked for: re-read the resources."""

    status, code = 410, "resync_required"


class PayloadTooLarge(ClientError):
    status, code = 413, "payload_too_large"


class UriTooLong(ClientError):
    status, code = 414, "uri_too_long"


class UnsupportedMediaType(ClientError):
    status, code = 415, "unsupported_media_type"


class RateLimited(ClientError):
    """`retry_after`: seconds the server asked to wait (`Retry-After`, else `RateLimit-Reset`)."""

    status, code = 429, "rate_limited"


class ConnectionLimit(ClientError):
    """Too many open event streams for the workspace."""

    status, code = 429, "connection_limit"


class HeadersTooLarge(ClientError):
    status, code = 431, "request_header_fields_too_large"


class InternalServerError(ServerError):
    status, code = 500, "internal_server_error"


class RequestTimeout(ServerError):
    status, code = 503, "timeout"


class Unavailable(ServerError):
    """A dependency of the server is down; `retry_after` says when to try again."""

    status, code = 503, "unavailable"


BY_CODE: dict[str, type[ConnectError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest, InvalidFilters, FilterCostExceeded, Unauthorized, Forbidden, InsufficientScope,
        NotFound, WorkspaceNotFound, MethodNotAllowed, NotAcceptable, NotAllowed, Conflict, IdempotencyKeyReused,
        ResyncRequired,
        PayloadTooLarge, UriTooLong, UnsupportedMediaType, RateLimited, ConnectionLimit, HeadersTooLarge,
        InternalServerError, RequestTimeout, Unavailable,
    )
}


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP-date (RFC 9110 §10.2.3);
    None when absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def wait_seconds(response: httpx.Response) -> float | None:
    """How long the server asked to wait before trying again: `Retry-After`, else on a 429 its
    `RateLimit-Reset` (seconds until the window that refused it ends); None when it said neither."""
    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
    if retry_after is None and response.status_code == 429:
        reset = response.headers.get("RateLimit-Reset")
        retry_after = retry_after_seconds(reset) if reset is not None and reset.strip().isdigit() else None
    return retry_after


def from_response(response: httpx.Response) -> ConnectError:
    """The exception for a non-2xx response (its body must have been read)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    code = body.get("error") if isinstance(body.get("error"), str) else None
    extra = {name: value for name, value in body.items() if name not in ("error", "requestId")}
    cls = BY_CODE.get(code or "")
    if cls is None:
        cls = ServerError if response.status_code >= 500 else ClientError
    request_id = response.headers.get("X-Request-Id") or body.get("requestId")
    return cls(
        status=response.status_code,
        code=code or f"http_{response.status_code}",
        extra=extra,
        request_id=request_id if isinstance(request_id, str) else None,
        retry_after=wait_seconds(response),
        body=body,
        headers=response.headers,
    )


# --- webhook verification -------------------------------------------------------------------


class WebhookVerificationError(Exception):
    """A webhook request that must be refused (answer 400); each cause is its own subclass."""


class MissingSignature(WebhookVerificationError):
    """No `Svc-Signature` header."""


class MalformedSignature(WebhookVerificationError):
    """`Svc-Signature` is not `t=<seconds>,kid=<id>,v1=<base64url>`."""


class TimestampOutsideTolerance(WebhookVerificationError):
    """The signed timestamp is further from now than the tolerance (a replayed or delayed request)."""


class UnknownKeyId(WebhookVerificationError):
    """No published key has the signature's `kid`, even after refetching the key set."""


class InvalidSignature(WebhookVerificationError):
    """The signature does not verify over `<t>.<raw body>` (the body or the header was altered)."""


class InvalidPayload(WebhookVerificationError):
    """The signature verifies but the body is not a JSON event object."""


class KeySetUnavailable(WebhookVerificationError):
    """The key set could not be fetched or read."""


# Written out (not computed) so that type checkers see what `from connect_client import *` gives.
__all__ = [
    "ConfigurationError", "ConnectError", "ClientError", "ServerError", "InvalidRequest", "InvalidFilters",
    "FilterCostExceeded", "Unauthorized", "Forbidden", "InsufficientScope", "NotFound", "WorkspaceNotFound",
    "MethodNotAllowed", "NotAcceptable", "NotAllowed", "Conflict", "IdempotencyKeyReused", "ResyncRequired",
    "PayloadTooLarge", "UriTooLong", "UnsupportedMediaType", "RateLimited", "ConnectionLimit", "HeadersTooLarge",
    "InternalServerError", "RequestTimeout", "Unavailable", "WebhookVerificationError", "MissingSignature",
    "MalformedSignature", "TimestampOutsideTolerance", "UnknownKeyId", "InvalidSignature", "InvalidPayload",
    "KeySetUnavailable",
]
