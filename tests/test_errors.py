"""docs/api/errors.md: every non-2xx response is `{"error": code}`, never HTML."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from apps.core.errors import UNAUTHORIZED_DETAILS
from apps.recordings import selectors


@pytest.mark.parametrize(
    "path",
    ["/api/v1", "/api/v1/", "/api/v1/nope", "/api/v1/sessions/", "/api/v1/sessions/x/y/z/w", "/api/v2/sessions"],
)
def test_unknown_paths_are_json_not_found(api, alice_key, path):
    response = api.client.get(path, headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"error": "not_found"}


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize("path", ["/api/v1/sessions", "/api/v1/sessions/x", "/api/v1/transcripts/search"])
def test_wrong_method_is_method_not_allowed(api, alice_key, method, path):
    response = getattr(api.client, method)(path, headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 405
    assert response.json() == {"error": "method_not_allowed"}


def test_wrong_method_on_unknown_path_is_not_found_without_csrf_html(db):
    response = Client(enforce_csrf_checks=True).post("/api/v1/nope")
    assert response.status_code == 404 and response.json() == {"error": "not_found"}


def test_unexpected_failure_is_internal_server_error_without_details(api, alice_key, monkeypatch, caplog):
    def explode(**kwargs):
        raise RuntimeError("database password is hunter2")

    monkeypatch.setattr(selectors, "sessions_page", explode)
    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.ERROR):
        response = client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 500
    assert response.json() == {"error": "internal_server_error"}
    assert b"hunter2" not in response.content
    assert "hunter2" in caplog.text, "the failure must be logged server-side"


def test_failure_outside_views_is_json_too(db, monkeypatch):
    from apps.core import errors

    response = errors.server_error_view(None)
    assert response.status_code == 500 and response.content == b'{"error": "internal_server_error"}'


def test_accept_header_does_not_change_the_format(api, alice_key):
    response = api.client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {alice_key}", "Accept": "text/html"})
    assert response.status_code == 200 and response["Content-Type"] == "application/json"


# U+0000 (apps/core/text.py): PostgreSQL refuses it in any text or jsonb parameter, so each of
# these answered 500 there before any view could say what was wrong.
@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/sessions/s%00",
        "/api/v1/sessions/%00/transcript",
        "/api/v1/sessions/s/boards/%00",
        "/api/v1/webhooks/wh_%00",
        "/api/v1/webhook-deliveries/%00/replay",
        "/admin/recordings/session/%00/change/",
    ],
)
def test_a_path_holding_nul_names_nothing(api, alice_key, path):
    response = api.client.get(path, headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 404 and response.json() == {"error": "not_found"}


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/transcripts/search?q=budget%00",
        "/api/v1/sessions?cursor=%00",
        "/api/v1/webhook-deliveries?sessionId=s%00",
        "/api/v1/sessions?x%00=1",
        "/api/auth/oauth2/authorize?response_type=code&client_id=agent%00",
    ],
)
def test_a_query_holding_nul_is_invalid_request(api, alice_key, path):
    response = api.client.get(path, headers={"Authorization": f"Bearer {alice_key}"})
    name = "a parameter name" if "x%00" in path else path.rpartition("&")[2].rpartition("?")[2].partition("=")[0]
    assert response.status_code == 400 and response.json() == {"error": "invalid_request", "detail": f"{name}: holds U+0000"}


def test_a_form_holding_nul_is_invalid_request(db):
    response = Client().post(
        "/api/auth/oauth2/token",
        {"grant_type": "authorization_code", "code": "c\x00", "client_id": "agent", "code_verifier": "v" * 43},
    )
    assert response.status_code == 400 and response.json() == {"error": "invalid_request", "detail": "code: holds U+0000"}


@pytest.mark.parametrize("credential", ["svc_\x00", "opaque-oauth-token\x00"])
def test_a_bearer_credential_holding_nul_is_unauthorized(api, credential):
    response = api.client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {credential}"})
    assert response.status_code == 401 and response.json() == {"error": "unauthorized", "detail": UNAUTHORIZED_DETAILS["invalid"]}
    assert response["WWW-Authenticate"].startswith("Bearer resource_metadata=")
    assert 'error="invalid_token"' in response["WWW-Authenticate"]
