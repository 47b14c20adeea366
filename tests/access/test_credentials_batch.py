"""The batch check both the event stream's recheck and the webhook installation check call:
which admitted credentials still hold. Each rule is tried on its own, with the other refs of
the batch untouched, and the cost does not grow with the batch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import set_token_value

from apps.access.credentials import CredentialRef, authenticate_bearer, invalid_credentials
from apps.oauth.models import AccessToken, RefreshToken
from apps.oauth.services import create_client
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from tests import factories


def key_ref(membership, scopes=None) -> tuple[CredentialRef, ApiKey]:
    principal = authenticate_bearer(f"Bearer {factories.api_key(membership, scopes)}")
    ref = CredentialRef(kind="api_key", credential_id=principal.credential_id, membership_id=membership.pk,
                        workspace_id=membership.workspace_id)
    return ref, ApiKey.objects.get(pk=principal.credential_id)


@pytest.fixture
def application(db):
    return create_client(name="Agent", redirect_uri="https://agent.example/cb").application


def token(membership, application, *, scope="svc:sessions:read", expires_in=3600, n=0) -> AccessToken:
    access = AccessToken(user=membership.user, application=application, workspace=membership.workspace,
                         expires=timezone.now() + timedelta(seconds=expires_in), scope=scope,
                         resource=["http://127.0.0.1:8000"])
    set_token_value(access, f"tok-{n}-" + "x" * 40)
    access.save()
    return access


def token_ref(membership, access: AccessToken) -> CredentialRef:
    return CredentialRef(kind="oauth", credential_id=str(access.pk), membership_id=membership.pk,
                         workspace_id=membership.workspace_id)


def grant_ref(membership, application) -> CredentialRef:
    return CredentialRef(kind="oauth_grant", credential_id=str(application.pk), membership_id=membership.pk,
                         workspace_id=membership.workspace_id)


def test_nothing_to_check_costs_nothing(db, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert invalid_credentials(set()) == set()


def test_holding_credentials_of_every_kind_are_valid(alice, application):
    key, _ = key_ref(alice)
    refs = {key, token_ref(alice, token(alice, application)), grant_ref(alice, application)}
    assert invalid_credentials(refs) == set()
    assert invalid_credentials(refs, scope="svc:sessions:read") == set()


def test_a_revoked_expired_or_deleted_key_no_longer_holds(alice):
    (revoked, revoked_row), (expired, expired_row), (deleted, deleted_row), (good, _) = (key_ref(alice) for _ in range(4))
    tenancy.revoke_api_key(api_key=revoked_row)
    ApiKey.objects.filter(pk=expired_row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    deleted_row.delete()
    assert invalid_credentials({revoked, expired, deleted, good}) == {revoked, expired, deleted}


def test_an_expired_or_deleted_token_no_longer_holds(alice, application):
    expired = token_ref(alice, token(alice, application, expires_in=-1, n=1))
    deleted_token = token(alice, application, n=2)
    deleted = token_ref(alice, deleted_token)
    deleted_token.delete()
    good = token_ref(alice, token(alice, application, n=3))
    assert invalid_credentials({expired, deleted, good}) == {expired, deleted}


def test_the_member_the_user_and_the_workspace_each_end_every_credential_they_carry(alice, bob, application):
    carol = factories.member(alice.workspace, "carol@acme.test")
    alice_key, _ = key_ref(alice)
    carol_refs = {key_ref(carol)[0], token_ref(carol, token(carol, application, n=1)), grant_ref(carol, application)}
    bob_key, _ = key_ref(bob)
    tenancy.deactivate_member(membership=carol)
    assert invalid_credentials({alice_key, bob_key, *carol_refs}) == carol_refs
    tenancy.activate_member(membership=carol)
    carol.user.is_active = False
    carol.user.save()
    assert invalid_credentials({alice_key, bob_key, *carol_refs}) == carol_refs
    tenancy.suspend_workspace(workspace=bob.workspace)
    assert invalid_credentials({alice_key, bob_key}) == {bob_key}


def test_with_a_scope_a_credential_that_no_longer_grants_it_is_invalid(alice, application):
    narrow, _ = key_ref(alice, ["svc:transcripts:read"])
    broad, _ = key_ref(alice, ["svc:sessions:read", "svc:transcripts:read"])
    narrow_token = token_ref(alice, token(alice, application, scope="svc:transcripts:read", n=1))
    assert invalid_credentials({narrow, broad, narrow_token}) == set()
    assert invalid_credentials({narrow, broad, narrow_token}, scope="svc:sessions:read") == {narrow, narrow_token}


def test_a_grant_outlives_its_expired_tokens_while_a_refresh_token_remains(alice, application):
    grant = grant_ref(alice, application)
    expired = token(alice, application, expires_in=-1)
    assert invalid_credentials({grant}) == {grant}
    refresh = RefreshToken.objects.create(user=alice.user, application=application, workspace=alice.workspace,
                                          token="refresh-" + "y" * 40, access_token=expired)
    assert invalid_credentials({grant}, scope="svc:sessions:read") == set()
    assert invalid_credentials({grant}, scope="svc:boards:read") == {grant}  # its token never granted it
    refresh.revoked = timezone.now()
    refresh.save()
    assert invalid_credentials({grant}) == {grant}


def test_a_grant_is_the_members_in_that_workspace_only(alice, bob, application):
    token(bob, application)  # bob's grant says nothing about alice's
    other_application = create_client(name="Other", redirect_uri="https://other.example/cb").application
    token(alice, other_application, n=1)
    grant = grant_ref(alice, application)
    assert invalid_credentials({grant}) == {grant}
    assert invalid_credentials({CredentialRef(kind="oauth_grant", credential_id="", membership_id=alice.pk,
                                              workspace_id=alice.workspace_id)}) != set()


def test_the_cost_does_not_grow_with_the_batch(alice, application, django_assert_max_num_queries):
    few = {key_ref(alice)[0], token_ref(alice, token(alice, application))}
    many = few | {key_ref(alice)[0] for _ in range(20)} | {
        token_ref(alice, token(alice, application, n=n)) for n in range(1, 21)}
    with django_assert_max_num_queries(4):
        invalid_credentials(few)
    with django_assert_max_num_queries(4):
        assert invalid_credentials(many) == set()
    with django_assert_max_num_queries(5):
        invalid_credentials(many | {grant_ref(alice, application)})
