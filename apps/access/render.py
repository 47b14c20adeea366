"""A refusal on the wire: the headers the doorkeeper adds to an `ApiError`'s status and
`{"error": code}` body (apps/core/errors.py), the same for REST, the event stream and `/mcp`.

The headers are the rate-limit headers of the request's decision (when it was counted) and,
on a 401, the one `WWW-Authenticate` challenge: every entry point names the root
protected-resource document (docs/api/authentication-and-scopes.md; `/mcp` included — clients that probe
`/.well-known/oauth-protected-resource/mcp` still find a document there).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from apps.access.ratelimit import RateDecision
from apps.core.errors import ApiError

PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"


def www_authenticate() -> str:
    return f'Bearer resource_metadata="{settings.CONNECT_BASE_URL}{PROTECTED_RESOURCE_PATH}"'


def challenge(error: ApiError) -> list[tuple[str, str]]:
    """The one `WWW-Authenticate` header, on a 401."""
    return [("WWW-Authenticate", www_authenticate())] if error.status == 401 else []


def error_headers(error: ApiError, rate: RateDecision | None = None) -> list[tuple[str, str]]:
    headers = rate.headers() if rate is not None else []
    headers += [(name, value) for name, value in error.headers().items()]  # e.g. a 503's Retry-After
    return headers + challenge(error)


def render(error: ApiError, rate: RateDecision | None = None) -> tuple[int, list[tuple[str, str]], dict[str, Any]]:
    """(status, headers, body) for the transports that write their own response."""
    return error.status, error_headers(error, rate), error.body()

