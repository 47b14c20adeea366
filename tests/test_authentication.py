"""docs/api/errors.md: every way a Bearer credential can fail, in the order the checks run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.errors import scope_detail
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from tests import factories

SESSIONS = "/api/v1/sessions"
RESOURCE_METADATA = 'Bearer resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource"'
INVALID_TOKEN = RESOURCE_METADATA + ', error="invalid_token", error_description="The credential is invalid, expired or revoked"'
DETAIL = {
    "missing": "Authorization: missing; send `Authorization: Bearer <credential>`, an API key (`svc_…`) or an "
    "OAuth access token",
    "not_bearer": "Authorization: not a Bearer credential; send `Authorization: Bearer <credential>`, an API key "
    "(`svc_…`) or an OAuth access token",
    "invalid": "Authorization: the Bearer credential is invalid, expired or revoked; use a current API key, or an "
    "access token from the authorization server (refresh it, or authorize again)",
}


def assert_unauthorized(response, reason: str = "invalid") -> None:
    """A 401 says which of three things is wrong, never which kind of invalid nor any part of
    the credential; the challenge has `error="invalid_token"` only when a credential was
    presented (RFC 6750 §3.1)."""
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized", "detail": DETAIL[reason]}
    assert response["WWW-Authenticate"] == (INVALID_TOKEN if reason == "invalid" else RESOURCE_METADATA)


def test_missing_header_is_unauthorized_with_resource_metadata_challenge(api, db):
    assert_unauthorized(api.get(SESSIONS), "missing")


@pytest.mark.parametrize(
    "header, reason",
    [("Bearer", "not_bearer"), ("Bearer ", "not_bearer"), ("Basic dXNlcjpwYXNz", "not_bearer"),
     ("svc_abc", "not_bearer"), ("Token svc_x", "not_bearer"), ("Bearer a b", "invalid")],
)
def test_malformed_header_is_unauthorized(api, db, header, reason):
    assert_unauthorized(api.client.get(SESSIONS, headers={"Authorization": header}), reason)


def test_unknown_api_key_is_unauthorized(api, db):
    assert_unauthorized(api.get(SESSIONS, "svc_" + "x" * 40))


def test_unknown_oauth_token_is_unauthorized(api, db):
    assert_unauthorized(api.get(SESSIONS, "not-a-token"))


def test_no_401_repeats_any_part_of_the_credential(api, db):
    for credential in ("svc_" + "q7" * 20, "tok-secretvalue-9z"):
        response = api.client.get(SESSIONS, headers={"Authorization": f"Bearer {credential}"})
        seen = response.content.decode() + response["WWW-Authenticate"]
        assert not any(credential[i:i + 6] in seen for i in range(len(credential) - 5))


def test_scheme_is_case_insensitive(api, alice_key):
    assert api.client.get(SESSIONS, headers={"Authorization": f"bearer {alice_key}"}).status_code == 200


def test_revoked_api_key_is_unauthorized(api, alice, alice_key):
    tenancy.revoke_api_key(api_key=ApiKey.objects.get(issued_by=alice))
    assert_unauthorized(api.get(SESSIONS, alice_key))


def test_expired_api_key_is_unauthorized(api, alice, alice_key):
    ApiKey.objects.filter(issued_by=alice).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_unauthorized(api.get(SESSIONS, alice_key))


def test_key_of_deactivated_member_is_forbidden(api, alice, alice_key):
    tenancy.deactivate_member(membership=alice)
    response = api.get(SESSIONS, alice_key)
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden"}


def test_key_of_disabled_user_is_forbidden(api, alice, alice_key):
    alice.user.is_active = False
    alice.user.save()
    assert api.get(SESSIONS, alice_key).json() == {"error": "forbidden"}


def test_reactivated_member_key_works_again(api, acme, alice, alice_key):
    tenancy.deactivate_member(membership=alice)
    tenancy.add_member(workspace=acme, email="alice@acme.test")
    assert api.get(SESSIONS, alice_key).status_code == 200


def test_suspended_workspace_is_workspace_not_found(api, acme, alice_key):
    acme.suspended_at = timezone.now()
    acme.save()
    response = api.get(SESSIONS, alice_key)
    assert response.status_code == 404
    assert response.json() == {"error": "workspace_not_found"}


def test_workspace_check_comes_before_membership_check(api, acme, alice, alice_key):
    acme.suspended_at = timezone.now()
    acme.save()
    tenancy.deactivate_member(membership=alice)
    assert api.get(SESSIONS, alice_key).json() == {"error": "workspace_not_found"}


@pytest.mark.parametrize(
    "path, scope",
    [
        ("/api/v1/sessions", "svc:sessions:read"),
        ("/api/v1/sessions/{id}", "svc:sessions:read"),
        ("/api/v1/sessions/{id}/transcripts", "svc:transcripts:read"),
        ("/api/v1/sessions/{id}/transcript", "svc:transcripts:read"),
        ("/api/v1/transcripts/search?query=hello", "svc:transcripts:read"),
        ("/api/v1/sessions/{id}/boards", "svc:boards:read"),
        ("/api/v1/sessions/{id}/boards/summary", "svc:boards:read"),
    ],
)
def test_each_endpoint_needs_its_scope(api, acme, alice, path, scope):
    session = factories.session(acme, committed=["hello"])
    url = path.format(id=session.id)
    others = [s for s in factories.ALL_SCOPES if s != scope]
    without = factories.api_key(alice, others)
    response = api.client.get(url, headers={"Authorization": f"Bearer {without}"})
    assert response.status_code == 403
    assert response.json() == {"error": "insufficient_scope", "detail": scope_detail((scope,)), "requiredScopes": [scope]}
    assert response["WWW-Authenticate"] == (
        f'{RESOURCE_METADATA}, error="insufficient_scope", scope="{scope}", '
        'error_description="The credential lacks a scope this request needs"'
    )
    only = factories.api_key(alice, [scope])
    assert api.client.get(url, headers={"Authorization": f"Bearer {only}"}).status_code in (200, 404)


def test_scope_is_checked_after_credential(api, alice):
    key = factories.api_key(alice, ["svc:boards:read"])
    tenancy.deactivate_member(membership=alice)
    assert api.get(SESSIONS, key).json() == {"error": "forbidden"}


def test_webhook_scopes_alone_read_nothing(api, alice):
    key = factories.api_key(alice, ["svc:webhooks:read", "svc:webhooks:write"])
    body = api.get(SESSIONS, key).json()
    assert (body["error"], body["requiredScopes"]) == ("insufficient_scope", ["svc:sessions:read"])


def test_last_used_is_recorded_but_not_on_every_request(api, alice, alice_key):
    api.get(SESSIONS, alice_key)
    first = ApiKey.objects.get(issued_by=alice).last_used_at
    assert first is not None
    api.get(SESSIONS, alice_key)
    assert ApiKey.objects.get(issued_by=alice).last_used_at == first


def test_issued_key_is_stored_only_as_hash(alice):
    issued = tenancy.issue_api_key(membership=alice, scopes=["svc:sessions:read"], name="ci")
    assert issued.key.startswith("svc_") and len(issued.key) >= 36
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    assert issued.key not in (stored.key_hash, stored.prefix)
    assert issued.key.startswith(stored.prefix)


def test_unknown_scope_cannot_be_issued(alice):
    with pytest.raises(tenancy.UnknownScope):
        tenancy.issue_api_key(membership=alice, scopes=["svc:everything"], name="x")
