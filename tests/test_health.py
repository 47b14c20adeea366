"""`/healthz`, `/readyz` and the `/` index: unauthenticated, JSON, and honest when the database
or Redis is down (a real server process started on an unreachable database)."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.servers import free_port, serve

pytestmark = pytest.mark.django_db


def test_healthz_is_alive_without_credentials():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_checks_the_database():
    response = Client().get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready" and body["checks"]["database"] == "ok"


@override_settings(REDIS_URL="redis://127.0.0.1:1/0")
def test_readyz_fails_when_redis_is_configured_but_unreachable():
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"error": "not_ready", "checks": {"database": "ok", "redis": "unavailable"}}


def test_the_root_is_an_index_of_links():
    response = Client().get("/")
    assert response.status_code == 200
    links = response.json()["links"]
    assert links["docs"].endswith("/docs") and links["openapi"].endswith("/openapi.json")
    assert links["health"].endswith("/healthz") and links["readiness"].endswith("/readyz")
    for link in ("docs", "openapi", "health", "readiness"):
        path = "/" + links[link].split("/", 3)[3]
        assert Client().get(path).status_code == 200, link


@pytest.mark.django_db
def test_the_index_links_every_entry_point_and_each_answers():
    """Issue 23: `/` links the API, the stream, MCP, webhooks, the JWKS and the docs; each link
    is a route (the Bearer-protected ones answer 401 to this unauthenticated GET, not 404)."""
    links = Client().get("/").json()["links"]
    assert {"docs", "openapi", "sessions", "search", "events", "eventStream", "mcp", "webhooks",
            "webhookDeliveries", "webhookSigningKeys", "protectedResourceMetadata",
            "authorizationServerMetadata", "health", "readiness", "admin"} <= links.keys()
    protected = {"api", "sessions", "search", "events", "eventStream", "mcp", "webhooks", "webhookDeliveries"}
    for name, url in links.items():
        path = "/" + url.split("/", 3)[3]
        if name in {"eventStream", "mcp"}:
            continue  # not Django views: tests/test_edges.py and tests/mcp open them over HTTP
        status = Client().get(path).status_code
        assert status == (401 if name in protected else 200) or (name == "admin" and status == 302), (name, status)


def test_health_endpoints_answer_only_safe_methods():
    assert Client().post("/healthz").status_code == 405
    options = Client().options("/readyz")
    assert options.status_code == 204 and "GET" in options["Allow"]


@pytest.mark.e2e
def test_an_unreachable_database_is_not_ready_but_alive(tmp_path):
    unreachable = f"postgres://postgres@127.0.0.1:{free_port()}/connect"
    with serve(tmp_path, env={"DATABASE_URL": unreachable}) as server:
        with server.client() as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            ready = client.get("/readyz")
            assert ready.status_code == 503
            body = ready.json()
            assert body["error"] == "not_ready" and body["checks"]["database"] == "unavailable"
            assert body["checks"].get("redis", "ok") == "ok"  # checked only when REDIS_URL is set
