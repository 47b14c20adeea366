"""OPTIONS and HEAD answer plainly on every API path: `Allow`, no body, never DRF's metadata."""

from __future__ import annotations

import pytest
from django.test import Client

from tests import factories


@pytest.fixture
def documented_paths(db, acme):
    """Every path in /openapi.json that a Django view serves, with real ids filled in."""
    session = factories.session(acme, committed=["alpha"])
    doc = Client().get("/openapi.json").json()
    values = {"{id}": session.id, "{sessionId}": session.id, "{boardSpecId}": "summary"}
    paths = {}
    for template, item in doc["paths"].items():
        path = template
        for name, value in values.items():
            path = path.replace(name, value)
        if "{" in path:
            path = path.split("{")[0] + "x"  # an unknown id: still a routed path
        paths[path] = {method.upper() for method in item if method in {"get", "post", "patch", "put", "delete"}}
    return paths


def test_options_on_every_documented_path_is_plain(documented_paths):
    client = Client()
    for path, methods in documented_paths.items():
        response = client.options(path)
        if response.status_code == 404:
            continue  # served outside Django (a Channels consumer) or a parameter we could not fill
        assert response.status_code == 204, (path, response.status_code, response.content[:200])
        assert response.content == b"", path
        allow = {m.strip() for m in response["Allow"].split(",")}
        assert methods <= allow, (path, allow)
        assert "OPTIONS" in allow


def test_options_never_returns_drf_metadata(db):
    response = Client().options("/api/v1/sessions")
    assert response.status_code == 204
    assert b"name" not in response.content and b"Api" not in response.content
    assert {m.strip() for m in response["Allow"].split(",")} == {"GET", "HEAD", "OPTIONS"}


def test_head_has_the_get_headers_and_no_body(db, alice_key, acme):
    session = factories.session(acme, committed=["alpha"])
    client = Client()
    auth = {"Authorization": f"Bearer {alice_key}"}
    for path in ("/api/v1/sessions", f"/api/v1/sessions/{session.id}", f"/api/v1/sessions/{session.id}/transcript"):
        get = client.get(path, headers=auth)
        head = client.head(path, headers=auth)
        assert head.status_code == get.status_code == 200
        assert head.content == b""
        assert head["Content-Type"] == get["Content-Type"]
        assert int(head["Content-Length"]) == len(get.content)
        assert "RateLimit-Limit" in head


def test_head_without_credential_is_401_without_body(db):
    response = Client().head("/api/v1/sessions")
    assert response.status_code == 401
    assert response.content == b""
    assert "WWW-Authenticate" in response


def test_other_methods_stay_json_405(db, alice_key):
    response = Client().delete("/api/v1/sessions", headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 405
    assert response.json() == {"error": "method_not_allowed"}


def test_options_on_an_unknown_api_path_is_a_json_404(db):
    response = Client().options("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found"}
