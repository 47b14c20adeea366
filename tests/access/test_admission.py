"""The doorkeeper's one entry point, `admit`: the order every entry point answers in (401, 404,
403, 429), the challenge and rate headers a refusal carries, the audiences each entry point
accepts, and what it costs in queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from oauth2_provider.models import set_token_value

from apps.access.admission import admit
from apps.access.ratelimit import shared_counters
from apps.oauth.audience import accepted_audiences, rest_audiences
from apps.core.errors import Forbidden, RateLimited, Unauthorized, WorkspaceNotFound
from apps.oauth.models import AccessToken
from apps.oauth.services import create_client
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey

CHALLENGE = f'Bearer resource_metadata="{settings.CONNECT_BASE_URL}/.well-known/oauth-protected-resource"'


def rest() -> frozenset[str]:
    return rest_audiences(settings.CONNECT_BASE_URL)


def token_for(membership, resource: str, raw: str = "tok-" + "a" * 40) -> str:
    application = create_client(name="Agent", redirect_uri="https://agent.example/cb").application
    token = AccessToken(user=membership.user, application=application, workspace=membership.workspace,
                        expires=timezone.now() + timedelta(hours=1), scope="svc:sessions:read", resource=[resource])
    set_token_value(token, raw)
    token.save()
    return raw


INVALID_TOKEN = CHALLENGE + ', error="invalid_token", error_description="The credential is invalid, expired or revoked"'


@pytest.mark.parametrize(("header", "reason"), [
    (None, "missing"), ("", "missing"), ("Bearer", "not_bearer"), ("Bearer ", "not_bearer"),
    ("Basic abc", "not_bearer"), ("svc_" + "x" * 40, "not_bearer"), ("Bearer a b", "invalid"),
    ("Bearer svc_unknown", "invalid"), ("Bearer not-a-token", "invalid"), ("Bearer svc_\x00", "invalid"),
])
def test_no_valid_credential_is_401_with_the_one_challenge_and_no_count(db, header, reason):
    """RFC 6750 §3.1: a request that presented no Bearer credential gets the challenge without
    an `error`; one that presented a credential that is not valid, `invalid_token`."""
    admission = admit(header, audiences=rest())
    assert isinstance(admission.error, Unauthorized) and admission.principal is None and admission.rate is None
    assert admission.error.reason == reason
    assert admission.headers() == [("WWW-Authenticate", INVALID_TOKEN if reason == "invalid" else CHALLENGE)]


def test_the_order_is_credential_then_workspace_then_member(alice, alice_key):
    tenancy.deactivate_member(membership=alice)
    assert isinstance(admit(f"Bearer {alice_key}", audiences=rest()).error, Forbidden)
    tenancy.suspend_workspace(workspace=alice.workspace)
    assert isinstance(admit(f"Bearer {alice_key}", audiences=rest()).error, WorkspaceNotFound)
    tenancy.revoke_api_key(api_key=ApiKey.objects.get(issued_by=alice))
    refused = admit(f"Bearer {alice_key}", audiences=rest())
    assert isinstance(refused.error, Unauthorized) and ("WWW-Authenticate", INVALID_TOKEN) in refused.headers()


def test_an_admitted_request_carries_its_principal_and_rate_headers(alice, alice_key):
    admission = admit(f"Bearer {alice_key}", audiences=rest())
    assert admission.error is None and admission.principal.workspace == alice.workspace
    names = [name for name, _ in admission.headers()]
    assert names == ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]


def test_past_the_limit_the_refusal_keeps_the_principal_and_says_when_to_retry(alice, alice_key, settings):
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 1
    assert admit(f"Bearer {alice_key}", audiences=rest()).error is None
    refused = admit(f"Bearer {alice_key}", audiences=rest())
    assert isinstance(refused.error, RateLimited) and refused.principal.workspace == alice.workspace
    headers = dict(refused.headers())
    assert headers["RateLimit-Remaining"] == "0" and headers["Retry-After"] == headers["RateLimit-Reset"]
    assert "WWW-Authenticate" not in headers


def test_a_refused_credential_is_not_counted(alice, alice_key, settings):
    settings.CONNECT_RATE_LIMIT_PER_WORKSPACE = 1
    for _ in range(3):
        assert isinstance(admit("Bearer svc_" + "x" * 40, audiences=rest()).error, Unauthorized)
    assert admit(f"Bearer {alice_key}", audiences=rest()).error is None


def test_rest_accepts_only_its_own_audience_and_mcp_accepts_both(alice):
    base = settings.CONNECT_BASE_URL
    mcp_token = token_for(alice, base + "/mcp")
    assert isinstance(admit(f"Bearer {mcp_token}", audiences=rest()).error, Unauthorized)
    admitted = admit(f"Bearer {mcp_token}", audiences=accepted_audiences(base))
    assert admitted.error is None and admitted.principal.audience == base + "/mcp"
    rest_token = token_for(alice, base + "/", raw="tok-" + "b" * 40)  # a trailing slash is normalised
    for audiences in (rest(), accepted_audiences(base)):
        admitted = admit(f"Bearer {rest_token}", audiences=audiences)
        assert admitted.error is None and admitted.principal.audience == base


def test_a_token_for_another_resource_is_refused_everywhere(alice):
    token = token_for(alice, "https://elsewhere.example")
    for audiences in (rest(), accepted_audiences(settings.CONNECT_BASE_URL)):
        assert isinstance(admit(f"Bearer {token}", audiences=audiences).error, Unauthorized)


def test_admission_adds_no_query_of_its_own(alice, alice_key, settings, django_assert_num_queries):
    """An API key: its one lookup; a token: its two. Limits off, so nothing is counted."""
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 0
    settings.CONNECT_RATE_LIMIT_PER_WORKSPACE = 0
    admit(f"Bearer {alice_key}", audiences=rest())  # the first use records last_used_at
    with django_assert_num_queries(1):
        assert admit(f"Bearer {alice_key}", audiences=rest()).error is None
    token = token_for(alice, settings.CONNECT_BASE_URL)
    with django_assert_num_queries(2):
        assert admit(f"Bearer {token}", audiences=rest()).error is None


def test_counting_without_redis_is_one_statement_at_most(alice, alice_key, settings, django_assert_num_queries):
    """PostgreSQL: one upsert of both buckets. A SQLite file: none (the counter file beside
    it, apps/access/ratelimit/file_store.py `SharedCounters`), and the count still holds."""
    settings.REDIS_URL = ""
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 2
    admit(f"Bearer {alice_key}", audiences=rest())  # last_used_at, and this window's pruning
    beside = shared_counters() is not None
    assert beside == (connection.vendor == "sqlite" and not connection.is_in_memory_db())
    with django_assert_num_queries(1 if beside else 2):  # the key (then one upsert of both buckets)
        assert admit(f"Bearer {alice_key}", audiences=rest()).error is None
    assert isinstance(admit(f"Bearer {alice_key}", audiences=rest()).error, RateLimited)
