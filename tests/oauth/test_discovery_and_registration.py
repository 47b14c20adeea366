"""RFC 8414 metadata and RFC 7591 registration (Django test client)."""

from __future__ import annotations

import pytest
from django.conf import settings

from apps.oauth.models import Application

REGISTER = "/api/auth/oauth2/register"


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-authorization-server/api/auth", "/.well-known/oauth-authorization-server"]
)
def test_authorization_server_metadata(client, db, path):
    response = client.get(path)
    assert response.status_code == 200
    doc = response.json()
    issuer = f"{settings.CONNECT_AUTH_URL}/api/auth"
    assert doc["issuer"] == issuer
    assert doc["authorization_endpoint"] == f"{issuer}/oauth2/authorize"
    assert doc["token_endpoint"] == f"{issuer}/oauth2/token"
    assert doc["revocation_endpoint"] == f"{issuer}/oauth2/revoke"
    assert doc["registration_endpoint"] == f"{issuer}/oauth2/register"
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert doc["response_types_supported"] == ["code"]
    assert doc["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert "none" in doc["token_endpoint_auth_methods_supported"]
    assert doc["client_id_metadata_document_supported"] is True
    assert set(settings.CONNECT_SCOPES) == set(doc["scopes_supported"])
    assert "introspection_endpoint" not in doc


def test_unknown_issuer_path_has_no_metadata(client, db):
    assert client.get("/.well-known/oauth-authorization-server/other").status_code == 404


def test_protected_resource_metadata_is_unchanged(client, db):
    doc = client.get("/.well-known/oauth-protected-resource").json()
    assert doc["resource"] == settings.CONNECT_BASE_URL
    assert doc["authorization_servers"] == [f"{settings.CONNECT_AUTH_URL}/api/auth"]


def register(client, **metadata):
    body = {"client_name": "Agent", "redirect_uris": ["https://agent.example/cb"], **metadata}
    return client.post(REGISTER, body, content_type="application/json")


@pytest.mark.parametrize(
    "uri",
    [
        "https://agent.example/cb",
        "http://127.0.0.1:43110/callback",
        "http://[::1]/callback",
        "http://localhost:6274/oauth/callback",
        "com.example.app:/cb",
    ],
)
def test_registration_accepts_public_clients_with_safe_redirect_uris(client, db, uri):
    response = register(client, redirect_uris=[uri], token_endpoint_auth_method="none")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none" and "client_secret" not in body
    application = Application.objects.get(client_id=body["client_id"])
    assert application.client_type == Application.CLIENT_PUBLIC
    assert application.registration_source == "dcr"


def test_registration_without_auth_method_registers_a_public_client(client, db):
    response = register(client)
    assert response.status_code == 201
    assert response.json()["token_endpoint_auth_method"] == "none"


@pytest.mark.parametrize(
    "uri",
    ["javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "http://agent.example/cb", "http://10.0.0.5/cb"],
)
def test_registration_refuses_unsafe_redirect_uris(client, db, uri):
    response = register(client, redirect_uris=[uri], token_endpoint_auth_method="none")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    "metadata",
    [
        {"token_endpoint_auth_method": "client_secret_basic"},
        {"token_endpoint_auth_method": "client_secret_post"},
        {"grant_types": ["client_credentials"]},
        {"grant_types": ["implicit"]},
        {"grant_types": ["password"]},
        {"response_types": ["token"]},
    ],
)
def test_registration_refuses_confidential_clients_and_other_flows(client, db, metadata):
    response = register(client, **metadata)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    "raw",
    [
        "{not json",
        # A "\ud800" escape is valid JSON but not text: PostgreSQL answered 500 to it.
        '{"client_name": "\\ud800", "redirect_uris": ["https://agent.example/cb"]}',
        '{"client_name": "Agent\\u0000", "redirect_uris": ["https://agent.example/cb"]}',
        '{"client_name": "Agent", "redirect_uris": ["https://agent.example/cb"], "x": '
        + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_registration_refuses_bodies_that_are_not_json_text(client, db, raw):
    response = client.post(REGISTER, raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert not Application.objects.exists()
