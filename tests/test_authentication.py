"""docs/api/errors.md: every way a Bearer credential can fail, in the order the checks run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from tests import factories

SESSIONS = "/api/v1/sessions"
RESOURCE_METADATA = 'Bearer resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource"'


def assert_unauthorized(response) -> None:
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}
    assert response["WWW-Authenticate"] == RESOURCE_METADATA


def test_missing_header_is_unauthorized_with_resource_metadata_challenge(api, db):
    assert_unauthorized(api.get(SESSIONS))


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "svc_abc", "Bearer a b", "Token svc_x"],
)
def test_malformed_header_is_unauthorized(api, db, header):
    assert_unauthorized(api.client.get(SESSIONS, headers={"Authorization": header}))


def test_unknown_api_key_is_unauthorized(api, db):
    assert_unauthorized(api.get(SESSIONS, "svc_" + "x" * 40))


def test_unknown_oauth_token_is_unauthorized(api, db):
    assert_unauthorized(api.get(SESSIONS, "not-a-token"))


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
    assert response.json() == {"error": "insufficient_scope"}
    only = factories.api_key(alice, [scope])
    assert api.client.get(url, headers={"Authorization": f"Bearer {only}"}).status_code in (200, 404)


def test_scope_is_checked_after_credential(api, alice):
    key = factories.api_key(alice, ["svc:boards:read"])
    tenancy.deactivate_member(membership=alice)
    assert api.get(SESSIONS, key).json() == {"error": "forbidden"}


def test_webhook_scopes_alone_read_nothing(api, alice):
    key = factories.api_key(alice, ["svc:webhooks:read", "svc:webhooks:write"])
    assert api.get(SESSIONS, key).json() == {"error": "insufficient_scope"}


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
