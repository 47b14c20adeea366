"""What the consent page tells the member about the client, and `iss` on every authorization
response (docs/specification/2026-07-28/basic/authorization/security-considerations.mdx;
RFC 9207). A self-registered client named "Claude Desktop (official)" that sends codes to
https://evil.example must not look like Claude Desktop."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client

from apps.oauth.models import Application
from apps.oauth.redirect_uris import loopback_only, redirect_target
from apps.oauth.services import create_client
from tests.oauth.flow import AUTHORIZE, REGISTER, authorize_params, form_fields, pkce_pair, query_of

ISSUER = f"{settings.CONNECT_AUTH_URL}/api/auth"


@pytest.fixture
def browser(alice) -> Client:
    client = Client()
    client.force_login(alice.user)
    return client


def register(name: str, redirect_uris: list[str]) -> str:
    response = Client().post(REGISTER, data=json.dumps({
        "client_name": name, "redirect_uris": redirect_uris, "grant_types": ["authorization_code"],
        "token_endpoint_auth_method": "none"}), content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()["client_id"]


def consent_page(browser: Client, client_id: str, redirect_uri: str):
    _, challenge = pkce_pair()
    params = authorize_params(client_id, challenge, resource=settings.CONNECT_BASE_URL, redirect_uri=redirect_uri)
    page = browser.get(AUTHORIZE, params)
    assert page.status_code == 200, page.content[:300]
    return page


def test_self_registered_client_is_marked_unverified_and_shows_where_codes_go(browser):
    client_id = register("Claude Desktop (official)", ["https://evil.example/cb"])
    html = consent_page(browser, client_id, "https://evil.example/cb").content.decode()
    assert "Claude Desktop (official)" in html
    assert 'id="redirect-host">evil.example<' in html
    assert 'id="unverified"' in html and "its own claim" in html
    assert 'id="loopback-only"' not in html


def test_operator_registered_client_is_not_marked_unverified(browser):
    client = create_client(name="Acme Agent", redirect_uri="https://agent.acme.example/cb")
    html = consent_page(browser, client.application.client_id, "https://agent.acme.example/cb").content.decode()
    assert 'id="redirect-host">agent.acme.example<' in html
    assert 'id="unverified"' not in html


def test_metadata_document_clients_are_unverified_too(browser):
    client = create_client(name="Doc Agent", redirect_uri="https://doc.example/cb")
    Application.objects.filter(pk=client.application.pk).update(
        registration_source=Application.RegistrationSource.CIMD)
    html = consent_page(browser, client.application.client_id, "https://doc.example/cb").content.decode()
    assert 'id="unverified"' in html


def test_loopback_only_client_gets_a_warning(browser):
    client_id = register("Local Tool", ["http://127.0.0.1:33418/callback", "http://localhost:33418/callback"])
    html = consent_page(browser, client_id, "http://127.0.0.1:33418/callback").content.decode()
    assert 'id="loopback-only"' in html and 'id="redirect-host">127.0.0.1<' in html


def test_client_with_one_public_redirect_uri_gets_no_loopback_warning(browser):
    client_id = register("Mixed", ["http://127.0.0.1:33418/callback", "https://mixed.example/cb"])
    html = consent_page(browser, client_id, "http://127.0.0.1:33418/callback").content.decode()
    assert 'id="loopback-only"' not in html


def test_consent_re_rendered_after_a_missing_workspace_still_shows_the_warnings(browser, alice):
    client_id = register("Claude Desktop (official)", ["https://evil.example/cb"])
    page = consent_page(browser, client_id, "https://evil.example/cb")
    data = {**form_fields(page.content.decode()).fields, "allow": "Authorize"}
    again = browser.post(AUTHORIZE + "?" + page.wsgi_request.META["QUERY_STRING"], data)
    html = again.content.decode()
    assert again.status_code == 200 and 'id="unverified"' in html and "evil.example" in html


def test_success_redirect_carries_exactly_one_iss(browser, alice):
    client_id = register("Agent", ["https://agent.example/cb"])
    page = consent_page(browser, client_id, "https://agent.example/cb")
    data = {**form_fields(page.content.decode()).fields, "workspace": str(alice.workspace_id), "allow": "Authorize"}
    done = browser.post(AUTHORIZE, data)
    assert done.status_code == 302
    assert done["Location"].count("iss=") == 1
    params = query_of(done["Location"])
    assert params["iss"] == ISSUER and params["code"] and params["state"] == "st4te"


def test_denied_consent_redirect_carries_iss(browser):
    client_id = register("Agent", ["https://agent.example/cb"])
    page = consent_page(browser, client_id, "https://agent.example/cb")
    done = browser.post(AUTHORIZE, form_fields(page.content.decode()).fields)  # "Cancel"
    params = query_of(done["Location"])
    assert (done.status_code, params["error"], params["iss"]) == (302, "access_denied", ISSUER)


@pytest.mark.parametrize(
    ("change", "error"),
    [({"resource": "https://elsewhere.example"}, "invalid_target"), ({"code_challenge_method": "plain"},
                                                                      "invalid_request")],
)
def test_refused_request_redirect_carries_iss(db, change, error):
    client_id = register("Agent", ["https://agent.example/cb"])
    _, challenge = pkce_pair()
    params = {**authorize_params(client_id, challenge, resource=settings.CONNECT_BASE_URL,
                                 redirect_uri="https://agent.example/cb"), **change}
    response = Client().get(AUTHORIZE, params)  # refused before the login page
    assert response.status_code == 302
    redirect = query_of(response["Location"])
    assert (redirect["error"], redirect["iss"], redirect["state"]) == (error, ISSUER, "st4te")


def test_metadata_advertises_iss_support(db):
    document = Client().get("/.well-known/oauth-authorization-server").json()
    assert document["authorization_response_iss_parameter_supported"] is True
    assert document["issuer"] == ISSUER


@pytest.mark.parametrize(
    ("uri", "shown"),
    [("https://evil.example/cb", "evil.example"), ("http://[::1]:8080/cb", "::1"),
     ("com.example.app:/oauth2redirect", "com.example.app: (an app on this device)")],
)
def test_redirect_target_is_the_host_or_the_app_scheme(uri, shown):
    assert redirect_target(uri) == shown


def test_loopback_only_needs_every_uri_on_loopback():
    assert loopback_only(["http://127.0.0.1:1/cb", "http://[::1]:2/cb", "http://localhost/cb"])
    assert not loopback_only(["http://127.0.0.1:1/cb", "https://a.example/cb"])
    assert not loopback_only(["com.example.app:/cb"]) and not loopback_only([])
