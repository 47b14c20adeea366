"""A refusal on the wire: the headers the doorkeeper adds to an `ApiError`'s status and
`{"error": code, "detail": …}` body (apps/core/errors.py), the same for REST, the event stream
and `/mcp`.

The headers are the rate-limit headers of the request's decision (when it was counted) and the
one `WWW-Authenticate` challenge (RFC 6750 §3), on a 401 and on a 403 `insufficient_scope`.
Every challenge starts with the root protected-resource document (docs/api/authentication-and-scopes.md; `/mcp`
included — clients that probe `/.well-known/oauth-protected-resource/mcp` still find a document
there). A 401 to a request that presented a Bearer credential adds `error="invalid_token"`; one
that presented none (no header, another scheme) adds nothing more (RFC 6750 §3.1). A 403
`insufficient_scope` adds `error="insufficient_scope"` and the `scope` the request needs (the
MCP authorization spec's scope step-up). docs/decisions/error-details.md says why.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from apps.access.ratelimit import RateDecision
from apps.core.errors import ApiError, InsufficientScope, Unauthorized

PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"
INVALID_TOKEN_DESCRIPTION = "The credential is invalid, expired or revoked"
INSUFFICIENT_SCOPE_DESCRIPTION = "The credential lacks a scope this request needs"


def www_authenticate(*params: tuple[str, str]) -> str:
    """`Bearer resource_metadata="…"`, then `params` as quoted auth-params. Their values are
    ours (codes, scope names, fixed sentences): none holds a quote or a backslash."""
    metadata = ("resource_metadata", f"{settings.CONNECT_BASE_URL}{PROTECTED_RESOURCE_PATH}")
    return "Bearer " + ", ".join(f'{name}="{value}"' for name, value in (metadata, *params))


def challenge(error: ApiError) -> list[tuple[str, str]]:
    """The `WWW-Authenticate` header of a 401 or a 403 `insufficient_scope`; none otherwise."""
    if error.status == 401:
        if isinstance(error, Unauthorized) and error.reason == "invalid":
            return [("WWW-Authenticate", www_authenticate(
                ("error", "invalid_token"), ("error_description", INVALID_TOKEN_DESCRIPTION)))]
        return [("WWW-Authenticate", www_authenticate())]
    if isinstance(error, InsufficientScope) and error.required:
        return [("WWW-Authenticate", www_authenticate(
            ("error", "insufficient_scope"), ("scope", " ".join(error.required)),
            ("error_description", INSUFFICIENT_SCOPE_DESCRIPTION)))]
    return []


def error_headers(error: ApiError, rate: RateDecision | None = None) -> list[tuple[str, str]]:
    headers = rate.headers() if rate is not None else []
    headers += [(name, value) for name, value in error.headers().items()]  # e.g. a 503's Retry-After
    return headers + challenge(error)


def render(error: ApiError, rate: RateDecision | None = None) -> tuple[int, list[tuple[str, str]], dict[str, Any]]:
    """(status, headers, body) for the transports that write their own response."""
    return error.status, error_headers(error, rate), error.body()
