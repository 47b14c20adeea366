"""One exception per wire error code (the `error` field of every JSON error body).

Every API error is a `ConnectError` carrying the HTTP `status`, the wire `code`, the body's
other fields (`extra`: `detail`, `cost`, `budget`, …) and the response's `X-Request-Id`.
`from_response` picks the class by code; a code this version does not know is still a
`ConnectError` (by status class: `ClientError` for 4xx, `ServerError` for 5xx), never a crash.
"""

from __future__ import annotations

from typing import Any

import httpx


class ConnectError(Exception):
    """An error answer from the API."""

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
    ) -> None:
        self.status = status if status is not None else type(self).status
        self.code = code if code is not None else type(self).code
        self.extra = dict(extra or {})
        self.request_id = request_id
        self.retry_after = retry_after
        detail = self.extra.get("detail")
        text = message or f"{self.status} {self.code}" + (f": {detail}" if detail else "")
        if request_id:
            text += f" (request {request_id})"
        super().__init__(text)

    @property
    def detail(self) -> str | None:
        """Which parameter is wrong and why, on a 400."""
        return self.extra.get("detail")


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
        return self.extra.get("cost")

    @property
    def budget(self) -> int | None:
        return self.extra.get("budget")

    @property
    def entries(self) -> list[dict[str, Any]]:
        return self.extra.get("entries") or []


class Unauthorized(ClientError):
    status, code = 401, "unauthorized"


class Forbidden(ClientError):
    status, code = 403, "forbidden"


class InsufficientScope(ClientError):
    status, code = 403, "insufficient_scope"


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
        return self.extra.get("expectedSequence")


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
    """`retry_after`: seconds the server asked to wait (its `Retry-After`)."""

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


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds (we only send delta-seconds); None when absent or unreadable."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


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
    return cls(
        status=response.status_code,
        code=code or f"http_{response.status_code}",
        extra=extra,
        request_id=response.headers.get("X-Request-Id") or body.get("requestId"),
        retry_after=retry_after_seconds(response.headers.get("Retry-After")),
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


__all__ = [name for name, value in list(globals().items())
           if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == __name__]
