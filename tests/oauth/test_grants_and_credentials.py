"""Flow switches and the credential checks behind every REST request (Django test client)."""

from __future__ import annotations

from datetime import timedelta
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone
from oauth2_provider.models import set_token_value

from apps.access.credentials import principal_for_access_token
from apps.core.errors import Forbidden, Unauthorized, WorkspaceNotFound
from apps.oauth.models import AccessToken, Application
from apps.oauth.services import create_client
from apps.tenancy import services as tenancy

AUTHORIZE = "/api/auth/oauth2/authorize"
TOKEN = "/api/auth/oauth2/token"
REDIRECT = "https://agent.example/cb"


@pytest.fixture
def application(db):
    return create_client(name="Agent", redirect_uri=REDIRECT).application


def issue(membership, application, *, raw="tok-" + "x" * 40, resource=None, scope="svc:sessions:read",
          expires_in=3600, workspace="member"):
    token = AccessToken(
        user=membership.user,
        application=application,
        workspace=membership.workspace if workspace == "member" else workspace,
        expires=timezone.now() + timedelta(seconds=expires_in),
        scope=scope,
        resource=[settings.CONNECT_BASE_URL] if resource is None else resource,
    )
    set_token_value(token, raw)
    token.save()
    return raw


def test_valid_token_is_a_principal_for_its_workspace(alice, application):
    principal = principal_for_access_token(issue(alice, application), audience=settings.CONNECT_BASE_URL)
    assert (principal.kind, principal.workspace, principal.issuer) == ("oauth", alice.workspace, alice)
    assert principal.scopes == frozenset({"svc:sessions:read"})
    assert principal.audience == settings.CONNECT_BASE_URL


def test_principal_lookup_costs_two_queries(alice, application, django_assert_num_queries):
    raw = issue(alice, application)
    with django_assert_num_queries(2):
        principal = principal_for_access_token(raw, audience=settings.CONNECT_BASE_URL)
        assert principal.issuer.user.pk and principal.issuer.workspace.slug


@pytest.mark.parametrize(
    "kwargs",
    [
        {"expires_in": -1},
        {"resource": []},
        {"resource": ["https://elsewhere.example"]},
        {"workspace": None},
    ],
)
def test_invalid_tokens_are_unauthorized(alice, application, kwargs):
    raw = issue(alice, application, **kwargs)
    with pytest.raises(Unauthorized):
        principal_for_access_token(raw, audience=settings.CONNECT_BASE_URL)


def test_check_order_token_then_workspace_then_membership(alice, application):
    raw = issue(alice, application)
    tenancy.deactivate_member(membership=alice)
    with pytest.raises(Forbidden):
        principal_for_access_token(raw, audience=settings.CONNECT_BASE_URL)
    alice.workspace.suspended_at = timezone.now()
    alice.workspace.save()
    with pytest.raises(WorkspaceNotFound):
        principal_for_access_token(raw, audience=settings.CONNECT_BASE_URL)
    with pytest.raises(Unauthorized):
        principal_for_access_token(raw, audience=settings.CONNECT_BASE_URL + "/mcp")


def test_rest_accepts_oauth_tokens_like_api_keys(api, alice, alice_key, application):
    from tests import factories

    factories.session(alice.workspace)
    raw = issue(alice, application, scope=" ".join(factories.READ_SCOPES))
    with_token = api.get("/api/v1/sessions", raw)
    with_key = api.get("/api/v1/sessions", alice_key)
    assert with_token.status_code == with_key.status_code == 200
    assert with_token.json() == with_key.json()


def test_implicit_password_and_client_credentials_are_off(client, alice, application):
    client.force_login(alice.user)
    implicit = client.get(AUTHORIZE, {"response_type": "token", "client_id": application.client_id,
                                      "redirect_uri": REDIRECT, "resource": settings.CONNECT_BASE_URL})
    assert implicit.status_code == 302
    error = implicit["Location"].split("error=")[1].split("&")[0]
    assert error in {"unsupported_response_type", "unauthorized_client"}
    for data in (
        {"grant_type": "password", "username": "alice@acme.test", "password": "alice-password-1"},
        {"grant_type": "client_credentials"},
    ):
        response = client.post(TOKEN, {**data, "client_id": application.client_id})
        assert response.status_code in (400, 401)
        assert response.json()["error"] in {"unauthorized_client", "unsupported_grant_type", "invalid_client"}
    assert not AccessToken.objects.exists()


def test_authorize_refuses_before_login_with_an_error_page_for_unknown_clients(client, db):
    response = client.get(AUTHORIZE, {"response_type": "code", "client_id": "nobody", "redirect_uri": REDIRECT})
    assert response.status_code == 400
    assert "cannot be completed" in response.content.decode()


def test_login_page_is_served(client, db):
    response = client.get("/accounts/login")
    assert response.status_code == 200
    assert 'name="password"' in response.content.decode()


def test_create_oauth_client_command(db, capsys):
    call_command("create_oauth_client", "CLI", "--redirect-uri", "http://127.0.0.1/cb")
    public_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert Application.objects.get(client_id=public_id).client_type == "public"

    call_command("create_oauth_client", "Backend", "--redirect-uri", "https://backend.example/cb", "--confidential")
    client_id, secret = capsys.readouterr().out.strip().splitlines()[-1].split(" ")
    application = Application.objects.get(client_id=client_id)
    assert application.client_type == "confidential" and application.client_secret != secret  # stored hashed

    with pytest.raises(CommandError, match="redirect_uris"):
        call_command("create_oauth_client", "Bad", "--redirect-uri", "javascript:alert(1)")


def test_admin_lists_tokens_by_workspace_and_revokes_them(client, alice, bob, application):
    staff = tenancy.add_member(workspace=alice.workspace, email="admin@acme.test", password="pw-123456", staff=True)
    client.force_login(staff.user)
    issue(alice, application, raw="alice-" + "a" * 40)
    issue(bob, application, raw="bob-" + "b" * 40)
    page = client.get("/admin/oauth/accesstoken/", {"workspace__id__exact": alice.workspace.id})
    assert page.status_code == 200
    assert page.context["cl"].result_count == 1
    listed = client.get("/admin/oauth/accesstoken/").content.decode()
    assert "Revoke selected tokens" in listed
    for model in ("application", "grant", "refreshtoken"):
        assert client.get(f"/admin/oauth/{model}/").status_code == 200

    token = AccessToken.objects.get(workspace=alice.workspace)
    response = client.post(
        "/admin/oauth/accesstoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]}
    )
    assert response.status_code == 302
    assert list(AccessToken.objects.values_list("workspace_id", flat=True)) == [bob.workspace.id]


class FakeFetcher:
    def fetch(self, client_id):
        return (
            {"client_id": client_id, "client_name": "CIMD Agent", "redirect_uris": ["http://127.0.0.1/cb"],
             "token_endpoint_auth_method": "none"},
            300,
        )


def test_client_id_metadata_document_client_can_start_a_flow(client, alice, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_METADATA_FETCHER": f"{__name__}.FakeFetcher"}
    client.force_login(alice.user)
    client_id = "https://agent.example/oauth/client.json"
    response = client.get(AUTHORIZE, {
        "response_type": "code", "client_id": client_id, "redirect_uri": "http://127.0.0.1/cb",
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256",
        "resource": settings.CONNECT_BASE_URL,
    })
    assert response.status_code == 200, response.content
    assert "CIMD Agent" in response.content.decode()
    assert Application.objects.get(client_id=client_id).registration_source == "cimd"
