"""The OAuth 2.1 flow end to end against a live daphne (docs/api/authentication-and-scopes.md): a dynamically
registered public client, a member who logs in and consents, tokens used on REST."""

from __future__ import annotations

from datetime import timedelta

import pytest
from authlib.integrations.httpx_client import OAuth2Client
from django.utils import timezone
from oauth2_provider.models import set_token_value

from apps.access.credentials import principal_for_access_token
from apps.core.errors import Unauthorized
from apps.oauth.models import AccessToken, Application, Grant, RefreshToken
from apps.tenancy import services as tenancy
from tests import factories
from tests.oauth.flow import (
    AUTHORIZE,
    REDIRECT_URI,
    REVOKE,
    TOKEN,
    Browser,
    authorize_params,
    exchange,
    form_fields,
    pkce_pair,
    query_of,
    refresh,
    register,
)
from tests.servers import without_request_id

pytestmark = pytest.mark.e2e

READ_SCOPES = "svc:boards:read svc:sessions:read svc:transcripts:read"


def scope_set(token: dict) -> set[str]:
    return set(token["scope"].split())


def test_member_authorizes_an_agent_end_to_end(live_server_daphne, transactional_db, acme, globex, alice):
    live = live_server_daphne
    tenancy.add_member(workspace=globex, email="alice@acme.test")  # Alice can choose between two
    ours = factories.session(acme, label="Acme weekly")
    theirs = factories.session(globex, label="Globex weekly")

    with live.client() as http, live.client() as browser_http:
        registered = register(http, client_name="Acme Agent")
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        assert registered.json()["token_endpoint_auth_method"] == "none"

        client = OAuth2Client(
            client_id=client_id,
            redirect_uri=REDIRECT_URI,
            code_challenge_method="S256",
            token_endpoint_auth_method="none",
            base_url=live.url,
        )
        verifier = pkce_pair()[0]
        url, state = client.create_authorization_url(
            f"{live.url}{AUTHORIZE}", code_verifier=verifier, resource=live.url
        )

        browser = Browser(browser_http)
        to_login = browser_http.get(url)
        assert to_login.status_code == 302 and to_login.headers["location"].startswith("/accounts/login")
        next_url = query_of(to_login.headers["location"])["next"]
        browser.login("alice@acme.test", "alice-password-1", next_url=next_url)

        page = browser_http.get(url)
        assert page.status_code == 200
        assert "Acme Agent" in page.text
        assert "Read AI board contents" in page.text and "Read sessions and receive session events" in page.text
        assert "webhook" not in page.text.lower()
        assert sorted(form_fields(page.text).radios["workspace"]) == sorted([acme.id, globex.id])

        callback = browser.consent(page, workspace_id=acme.id)
        assert callback.status_code == 302
        assert query_of(callback.headers["location"])["state"] == state

        token = client.fetch_token(
            f"{live.url}{TOKEN}", authorization_response=callback.headers["location"], code_verifier=verifier
        )
        assert token["token_type"] == "Bearer"
        assert token["expires_in"] == 3600
        assert token["scope"].split() == READ_SCOPES.split() or scope_set(token) == set(READ_SCOPES.split())

        def get(path: str, access_token: str):
            return http.get(path, headers={"Authorization": f"Bearer {access_token}"})

        listed = get("/api/v1/sessions", token["access_token"])
        assert listed.status_code == 200
        assert [s["id"] for s in listed.json()["items"]] == [ours.id]
        assert get(f"/api/v1/sessions/{ours.id}", token["access_token"]).status_code == 200
        other = get(f"/api/v1/sessions/{theirs.id}", token["access_token"])
        assert (other.status_code, without_request_id(other.json())) == (404, {"error": "not_found"})

        stored = AccessToken.objects.get(token_checksum__isnull=False, workspace=acme)
        assert stored.resource == [live.url] and stored.token == ""  # audience recorded, only the hash stored

        # Refresh: a new pair, the old access token is gone, the workspace carried over.
        refreshed = client.refresh_token(f"{live.url}{TOKEN}", refresh_token=token["refresh_token"])
        assert refreshed["access_token"] != token["access_token"]
        assert refreshed["refresh_token"] != token["refresh_token"]
        assert scope_set(refreshed) == scope_set(token)
        assert get("/api/v1/sessions", token["access_token"]).status_code == 401
        assert get("/api/v1/sessions", refreshed["access_token"]).status_code == 200
        assert set(RefreshToken.objects.values_list("workspace_id", flat=True)) == {acme.id}

        # RFC 7009 revocation: the token and its refresh token stop working.
        revoked = http.post(REVOKE, data={"token": refreshed["access_token"], "client_id": client_id})
        assert revoked.status_code == 200
        after = get("/api/v1/sessions", refreshed["access_token"])
        assert (after.status_code, after.json()["error"]) == (401, "unauthorized")
        assert after.headers["WWW-Authenticate"].startswith('Bearer resource_metadata="')
        assert refresh(http, client_id, refreshed["refresh_token"]).json()["error"] == "invalid_grant"


def test_authorization_requires_pkce_with_s256(flow, acme):
    verifier, challenge = pkce_pair()
    for params in (
        {k: v for k, v in authorize_params(flow.client_id, challenge, resource=flow.base_url).items()
         if not k.startswith("code_challenge")},
        authorize_params(flow.client_id, verifier, resource=flow.base_url, method="plain"),
        authorize_params(flow.client_id, verifier, resource=flow.base_url, method=None),  # defaults to plain
    ):
        response = flow.browser.authorize(params)
        assert response.status_code == 302, response.text[:300]
        redirect = query_of(response.headers["location"])
        assert response.headers["location"].startswith(REDIRECT_URI)
        assert redirect["error"] == "invalid_request" and redirect["state"] == "st4te"
    assert not Grant.objects.exists()


def test_authorization_requires_this_resource(flow, acme):
    _, challenge = pkce_pair()
    for resource in (None, "https://evil.example", f"{flow.base_url}/api/v1", "not a uri"):
        response = flow.browser.authorize(authorize_params(flow.client_id, challenge, resource=resource))
        assert response.status_code == 302
        assert query_of(response.headers["location"])["error"] == "invalid_target", resource
    two = authorize_params(flow.client_id, challenge, resource=flow.base_url)
    two["resource"] = [flow.base_url, f"{flow.base_url}/mcp"]
    assert query_of(flow.browser.authorize(two).headers["location"])["error"] == "invalid_target"

    # A trailing slash is normalised: the token is for the base URL and works on REST.
    token = flow.tokens(workspace_id=acme.id, resource=flow.base_url + "/")
    assert AccessToken.objects.get(workspace__isnull=False).resource == [flow.base_url]
    assert flow.api("/api/v1/sessions", token["access_token"]).status_code == 200


def test_wrong_verifier_and_reused_code_fail_the_exchange(flow, acme):
    code, verifier = flow.code_for(workspace_id=acme.id)
    wrong = exchange(flow.http, flow.client_id, code, pkce_pair()[0])
    assert (wrong.status_code, wrong.json()["error"]) == (400, "invalid_grant")

    code, verifier = flow.code_for(workspace_id=acme.id)
    assert exchange(flow.http, flow.client_id, code, verifier).status_code == 200
    again = exchange(flow.http, flow.client_id, code, verifier)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")


def test_reused_code_revokes_the_tokens_already_issued_from_it(flow, acme):
    code, verifier = flow.code_for(workspace_id=acme.id)
    issued = exchange(flow.http, flow.client_id, code, verifier).json()
    rotated = refresh(flow.http, flow.client_id, issued["refresh_token"]).json()
    assert flow.api("/api/v1/sessions", rotated["access_token"]).status_code == 200
    unrelated = flow.tokens(workspace_id=acme.id)

    assert exchange(flow.http, flow.client_id, code, verifier).json()["error"] == "invalid_grant"
    assert flow.api("/api/v1/sessions", rotated["access_token"]).status_code == 401
    assert refresh(flow.http, flow.client_id, rotated["refresh_token"]).json()["error"] == "invalid_grant"
    assert flow.api("/api/v1/sessions", unrelated["access_token"]).status_code == 200


def test_reusing_a_rotated_refresh_token_revokes_the_family(flow, acme):
    first = flow.tokens(workspace_id=acme.id)
    second = refresh(flow.http, flow.client_id, first["refresh_token"]).json()
    assert flow.api("/api/v1/sessions", second["access_token"]).status_code == 200

    replay = refresh(flow.http, flow.client_id, first["refresh_token"])
    assert (replay.status_code, replay.json()["error"]) == (400, "invalid_grant")
    # The whole family is dead: the current access token and the current refresh token.
    assert flow.api("/api/v1/sessions", second["access_token"]).status_code == 401
    assert refresh(flow.http, flow.client_id, second["refresh_token"]).json()["error"] == "invalid_grant"


def test_tokens_carry_exactly_the_granted_scopes(flow, acme):
    default = flow.tokens(workspace_id=acme.id)
    assert scope_set(default) == set(READ_SCOPES.split())  # no webhook scopes unless asked for

    narrow = flow.tokens(workspace_id=acme.id, scope="svc:sessions:read")
    assert scope_set(narrow) == {"svc:sessions:read"}
    session = factories.session(acme)
    assert flow.api("/api/v1/sessions", narrow["access_token"]).status_code == 200
    boards = flow.api(f"/api/v1/sessions/{session.id}/boards", narrow["access_token"])
    assert (boards.status_code, boards.json()["error"]) == (403, "insufficient_scope")

    webhooks = flow.tokens(workspace_id=acme.id, scope="svc:sessions:read svc:webhooks:read svc:webhooks:write")
    assert scope_set(webhooks) == {"svc:sessions:read", "svc:webhooks:read", "svc:webhooks:write"}


def test_mcp_audience_token_is_refused_by_rest(flow, acme):
    token = flow.tokens(workspace_id=acme.id, resource=f"{flow.base_url}/mcp")
    rest = flow.api("/api/v1/sessions", token["access_token"])
    assert (rest.status_code, rest.json()["error"]) == (401, "unauthorized")
    # The MCP endpoint (a later issue) passes its own audience and accepts it.
    principal = principal_for_access_token(token["access_token"], audience=f"{flow.base_url}/mcp")
    assert principal.audience == f"{flow.base_url}/mcp" and principal.workspace == acme
    with pytest.raises(Unauthorized):
        principal_for_access_token(token["access_token"], audience=flow.base_url)


def test_expired_revoked_and_workspaceless_tokens_are_unauthorized(flow, acme, alice):
    token = flow.tokens(workspace_id=acme.id)
    AccessToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    expired = flow.api("/api/v1/sessions", token["access_token"])
    assert (expired.status_code, expired.json()["error"]) == (401, "unauthorized")

    orphan = AccessToken(
        user=alice.user,
        application=Application.objects.get(),
        expires=timezone.now() + timedelta(hours=1),
        scope=READ_SCOPES,
        resource=[flow.base_url],
    )
    set_token_value(orphan, "token-without-a-workspace-0123456789")
    orphan.save()
    response = flow.api("/api/v1/sessions", "token-without-a-workspace-0123456789")
    assert (response.status_code, response.json()["error"]) == (401, "unauthorized")
    assert flow.api("/api/v1/sessions", "never-issued-token").status_code == 401


def test_deactivated_member_is_forbidden_and_suspended_workspace_not_found(flow, acme, alice):
    token = flow.tokens(workspace_id=acme.id)
    tenancy.deactivate_member(membership=alice)
    forbidden = flow.api("/api/v1/sessions", token["access_token"])
    assert (forbidden.status_code, without_request_id(forbidden.json())) == (403, {"error": "forbidden"})

    acme.suspended_at = timezone.now()
    acme.save(update_fields=["suspended_at"])
    # Workspace availability is checked before membership.
    gone = flow.api("/api/v1/sessions", token["access_token"])
    assert (gone.status_code, without_request_id(gone.json())) == (404, {"error": "workspace_not_found"})


def test_member_without_an_active_workspace_cannot_consent(live_server_daphne, transactional_db, acme, alice):
    tenancy.deactivate_member(membership=alice)
    with live_server_daphne.client() as http:
        client_id = register(http).json()["client_id"]
        browser = Browser(http)
        browser.login("alice@acme.test", "alice-password-1")
        _, challenge = pkce_pair()
        params = authorize_params(client_id, challenge, resource=live_server_daphne.url)
        page = browser.authorize(params)
        assert page.status_code == 403
        assert "not an active member of any workspace" in page.text
        # Posting the consent form anyway issues nothing.
        forged = http.post(
            AUTHORIZE, params=params,
            data={"allow": "Authorize", "workspace": acme.id, "client_id": client_id, "redirect_uri": REDIRECT_URI,
                  "response_type": "code", "scope": READ_SCOPES, "code_challenge": challenge,
                  "code_challenge_method": "S256", "resource": live_server_daphne.url,
                  "csrfmiddlewaretoken": http.cookies.get("csrftoken", "")},
            headers={"X-CSRFToken": http.cookies.get("csrftoken", "")},
        )
        assert forged.status_code == 403
    assert not Grant.objects.exists()


def test_consent_needs_a_workspace_of_the_member_and_cancel_denies(flow, acme, globex):
    _, challenge = pkce_pair()
    params = authorize_params(flow.client_id, challenge, resource=flow.base_url)
    page = flow.browser.authorize(params)
    # Alice is not in globex: choosing it is refused and the form is shown again.
    refused = flow.browser.consent(page, workspace_id=globex.id)
    assert refused.status_code == 200 and 'class="errors"' in refused.text and "Select a valid choice" in refused.text
    assert not Grant.objects.exists()

    cancelled = flow.browser.consent(page, workspace_id=acme.id, allow=False)
    assert query_of(cancelled.headers["location"])["error"] == "access_denied"
    assert not Grant.objects.exists()
