"""CORS for the Bearer-only paths: one policy (apps/core/origins.py), one list of headers, two
places that apply them.

Django views (REST, the metadata documents, the OAuth token/registration/revoke endpoints) get
their headers from django-cors-headers, configured from this module (connect/settings.py reads
`CORS_URLS_REGEX`, `ALLOW_HEADERS`, `EXPOSE_HEADERS`; apps/core/apps.py connects
`check_request_enabled` to the origin policy). The two Channels consumers (`/mcp`, the event
stream) are not Django views, so that middleware never sees them: `CorsASGI` wraps their ASGI
apps (connect/asgi.py), answers their preflights itself and adds the same headers to their
responses.

No credentials mode: these paths authenticate with a Bearer header only, never a cookie, so
`Access-Control-Allow-Credentials` is never sent. The cookie pages (authorize/consent, login,
admin) are never listed here, so a browser on another origin cannot read them.
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.core.origins import allowed_origin

# Request headers a browser client may send on these paths.
ALLOW_HEADERS: tuple[str, ...] = (
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "x-request-id",  # a client's own id, kept when well-formed (apps/access/door.py)
    "traceparent",
)
# Response headers a browser client may read (beyond the CORS-safelisted ones).
EXPOSE_HEADERS: tuple[str, ...] = (
    "WWW-Authenticate",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "Retry-After",
    "X-Request-Id",
)
ALLOW_METHODS: tuple[str, ...] = ("GET", "POST", "PATCH", "DELETE", "OPTIONS")  # PATCH: webhook endpoints
PREFLIGHT_MAX_AGE = 600

# The Bearer-only Django paths (django-cors-headers' CORS_URLS_REGEX). Not listed on purpose:
# /api/auth/oauth2/authorize (consent, a cookie page), /accounts/*, /admin/*.
BEARER_ONLY_PATHS = (
    r"^/api/v1(/.*)?$",
    r"^/\.well-known/oauth-protected-resource(/mcp)?/?$",
    r"^/\.well-known/oauth-authorization-server(/.*)?$",
    r"^/api/auth/\.well-known/.*$",
    r"^/\.well-known/webhook-signing-keys\.json$",
    r"^/api/auth/oauth2/(token|revoke)/?$",
    r"^/api/auth/oauth2/register(/[^/]+)?/?$",
)
URLS_REGEX = "|".join(f"(?:{p})" for p in BEARER_ONLY_PATHS)


def response_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """Headers for an actual (non-preflight) response to an allowed origin."""
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", ", ".join(EXPOSE_HEADERS).encode()),
    ]


def preflight_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-headers", ", ".join(ALLOW_HEADERS).encode()),
        (b"access-control-allow-methods", ", ".join(ALLOW_METHODS).encode()),
        (b"access-control-max-age", str(PREFLIGHT_MAX_AGE).encode()),
    ]


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _with_vary_origin(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    for i, (key, value) in enumerate(headers):
        if key.lower() == b"vary":
            if b"origin" not in value.lower():
                headers[i] = (key, value + b", Origin")
            return headers
    return [*headers, (b"vary", b"Origin")]


class CorsASGI:
    """ASGI wrapper for a Channels HTTP consumer: the django-cors-headers behaviour, same policy.

    A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here with 204 and
    never reaches the consumer; an origin the policy refuses gets the 204 without CORS headers,
    so the browser blocks the actual request. Other requests pass through, and the response
    start gains `Access-Control-Allow-Origin`/`-Expose-Headers` when the origin is allowed.
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        origin = _header(scope.get("headers", ()), b"origin")
        allowed = origin is not None and allowed_origin(origin)
        if scope["method"] == "OPTIONS" and _header(scope["headers"], b"access-control-request-method"):
            headers = _with_vary_origin(preflight_headers(origin) if allowed else [])
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return None
        if origin is None:
            return await self.app(scope, receive, send)

        async def send_with_cors(message):
            if message["type"] == "http.response.start":
                headers = _with_vary_origin(list(message.get("headers", [])))
                if allowed:
                    headers += response_headers(origin)
                message = {**message, "headers": headers}
            await send(message)

        return await self.app(scope, receive, send_with_cors)
