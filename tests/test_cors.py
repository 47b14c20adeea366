"""CORS: one origin policy (apps/core/origins.py) on the Bearer-only paths — django-cors-headers
for Django views, apps.core.cors.CorsASGI for the Channels consumers — never on cookie pages,
never with credentials."""

from __future__ import annotations

import asyncio

import pytest
from django.test import Client, override_settings

from apps.core.cors import ALLOW_HEADERS, CorsASGI

ALLOWED = "http://localhost:5173"  # loopback, any port: allowed by the default policy
UNLISTED = "https://evil.example"

BEARER_ONLY = [
    "/api/v1/sessions",
    "/api/v1/sessions/some-id/boards",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/api/auth",
    "/api/auth/oauth2/token",
    "/api/auth/oauth2/revoke",
    "/api/auth/oauth2/register",
]
COOKIE_PAGES = ["/api/auth/oauth2/authorize", "/accounts/login", "/admin/login/", "/admin/"]


def preflight(client: Client, path: str, origin: str, method: str = "POST"):
    return client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
    )


@pytest.mark.parametrize("path", BEARER_ONLY)
def test_preflight_on_bearer_only_paths_allows_the_origin(db, path):
    response = preflight(Client(), path, ALLOWED)
    assert response.status_code in (200, 204)
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    allowed_headers = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id"} <= allowed_headers
    assert {"GET", "POST", "PATCH", "DELETE"} <= {m.strip() for m in response["Access-Control-Allow-Methods"].split(",")}
    assert "Access-Control-Allow-Credentials" not in response
    assert "Origin" in response["Vary"] or "origin" in response["Vary"]


@pytest.mark.parametrize("path", BEARER_ONLY)
def test_unlisted_origin_gets_no_cors_headers(db, path):
    response = preflight(Client(), path, UNLISTED)
    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Headers" not in response


@pytest.mark.parametrize("path", COOKIE_PAGES)
def test_cookie_pages_never_get_cors_headers(db, path):
    client = Client()
    for response in (preflight(client, path, ALLOWED), client.get(path, headers={"Origin": ALLOWED})):
        assert "Access-Control-Allow-Origin" not in response, (path, response.status_code)


def test_simple_request_exposes_the_authentication_and_rate_limit_headers(db, alice_key):
    response = Client().get("/api/v1/sessions", headers={"Origin": ALLOWED, "Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    exposed = {h.strip() for h in response["Access-Control-Expose-Headers"].split(",")}
    assert {"WWW-Authenticate", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After",
            "X-Request-Id"} <= exposed
    assert "Access-Control-Allow-Credentials" not in response


def test_a_401_is_readable_by_the_browser_client(db):
    response = Client().get("/api/v1/sessions", headers={"Origin": ALLOWED})
    assert response.status_code == 401
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    assert "WWW-Authenticate" in response


def test_token_endpoint_answers_an_allowed_origin(db):
    response = Client().post(
        "/api/auth/oauth2/token", {"grant_type": "authorization_code", "code": "nope"}, headers={"Origin": ALLOWED}
    )
    assert response.status_code in (400, 401)
    assert response["Access-Control-Allow-Origin"] == ALLOWED


def test_a_cookie_alone_never_authenticates_a_bearer_only_path(db, alice):
    client = Client()
    client.force_login(alice.user)
    response = client.get("/api/v1/sessions", headers={"Origin": ALLOWED})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


@override_settings(CONNECT_ALLOWED_ORIGINS="*")
def test_star_allows_any_origin(db):
    response = preflight(Client(), "/api/v1/sessions", UNLISTED, method="GET")
    assert response["Access-Control-Allow-Origin"] == UNLISTED
    assert "Access-Control-Allow-Credentials" not in response
    assert "Access-Control-Allow-Origin" not in preflight(Client(), "/accounts/login", UNLISTED)


@override_settings(CONNECT_ALLOWED_ORIGINS="https://app.example")
def test_a_configured_list_replaces_the_loopback_default(db):
    assert preflight(Client(), "/api/v1/sessions", "https://app.example")["Access-Control-Allow-Origin"] == "https://app.example"
    assert "Access-Control-Allow-Origin" not in preflight(Client(), "/api/v1/sessions", ALLOWED)


# --- The ASGI wrapper for the Channels consumers ------------------------------------------------


def call(app, method: str, headers: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """Run one HTTP request through an ASGI app; return (messages sent, scopes the inner app saw)."""
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(app(scope, receive, send))
    return sent


class Consumer:
    """Stands in for a Channels consumer: records calls, answers 401 with WWW-Authenticate."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await send({"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", b"Bearer x")]})
        await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})


def headers_of(message: dict) -> dict[str, str]:
    return {k.decode().lower(): v.decode() for k, v in message["headers"]}


def test_wrapper_answers_the_preflight_itself(settings):
    consumer = Consumer()
    sent = call(CorsASGI(consumer), "OPTIONS", {"Origin": ALLOWED, "Access-Control-Request-Method": "POST"})
    assert consumer.calls == 0
    assert sent[0]["status"] == 204
    headers = headers_of(sent[0])
    assert headers["access-control-allow-origin"] == ALLOWED
    assert {h.strip() for h in headers["access-control-allow-headers"].split(",")} == set(ALLOW_HEADERS)
    assert "access-control-allow-credentials" not in headers


def test_wrapper_refuses_unlisted_origins_by_saying_nothing(settings):
    consumer = Consumer()
    sent = call(CorsASGI(consumer), "OPTIONS", {"Origin": UNLISTED, "Access-Control-Request-Method": "POST"})
    assert consumer.calls == 0 and sent[0]["status"] == 204
    assert "access-control-allow-origin" not in headers_of(sent[0])
    sent = call(CorsASGI(Consumer()), "POST", {"Origin": UNLISTED})
    assert "access-control-allow-origin" not in headers_of(sent[0])


def test_wrapper_adds_the_same_headers_to_responses(settings):
    sent = call(CorsASGI(Consumer()), "POST", {"Origin": ALLOWED, "Authorization": "Bearer nope"})
    headers = headers_of(sent[0])
    assert sent[0]["status"] == 401
    assert headers["access-control-allow-origin"] == ALLOWED
    assert "WWW-Authenticate" in headers["access-control-expose-headers"]
    assert headers["vary"] == "Origin"
    assert headers["www-authenticate"] == "Bearer x"


def test_wrapper_leaves_requests_without_origin_alone(settings):
    sent = call(CorsASGI(Consumer()), "POST", {})
    assert headers_of(sent[0]) == {"www-authenticate": "Bearer x"}


def test_every_channels_route_is_wrapped():
    from connect import asgi, routing

    served = asgi.application.app.application.application_mapping["http"].routes  # Door → ServeStatic → router
    channels_routes = served[: len(routing.http_routes)]
    assert [route.pattern.describe() for route in channels_routes] == [r.pattern.describe() for r in routing.http_routes]
    assert all(isinstance(route.callback, CorsASGI) for route in channels_routes)


# --- The real Channels routes on a live server ---------------------------------------------------

CHANNELS_PATHS = ["/mcp", "/api/v1/events/stream"]


@pytest.mark.e2e
@pytest.mark.parametrize("path", CHANNELS_PATHS)
def test_channels_routes_answer_preflights_from_the_same_policy(live_server_daphne, transactional_db, path):
    with live_server_daphne.client() as http:
        allowed = http.options(
            path,
            headers={
                "Origin": ALLOWED,
                "Access-Control-Request-Method": "POST" if path == "/mcp" else "GET",
                "Access-Control-Request-Headers": "authorization, mcp-protocol-version, last-event-id",
            },
        )
        assert allowed.status_code == 204
        assert allowed.headers["access-control-allow-origin"] == ALLOWED
        assert {h.strip() for h in allowed.headers["access-control-allow-headers"].split(",")} == set(ALLOW_HEADERS)
        assert "access-control-allow-credentials" not in allowed.headers
        refused = http.options(path, headers={"Origin": UNLISTED, "Access-Control-Request-Method": "GET"})
        assert "access-control-allow-origin" not in refused.headers


@pytest.mark.e2e
def test_the_event_stream_401_is_readable_and_a_cookie_does_not_authenticate(live_server_daphne, transactional_db, alice):
    from tests.oauth.flow import Browser

    with live_server_daphne.client() as http:
        Browser(http).login("alice@acme.test", "alice-password-1")  # the session cookie is now in `http`
        assert http.cookies.get("sessionid")
        response = http.get("/api/v1/events/stream", headers={"Origin": ALLOWED})
        assert response.status_code == 401
        assert response.json()["error"] == "unauthorized"
        assert response.headers["access-control-allow-origin"] == ALLOWED
        assert "WWW-Authenticate" in response.headers["access-control-expose-headers"]
        assert "www-authenticate" in response.headers
