"""Rate limits per credential and per workspace (apps/access/ratelimit/): the pure decision,
the shared counters, and the REST answers."""

from __future__ import annotations


import pytest
from django.test import Client, override_settings

from apps.access.credentials import authenticate_bearer
from apps.access.ratelimit import RateDecision, check_rate_limit_sync, check_rate_limits, decide
from tests import factories
from tests.servers import UNTURNING_WINDOW_SECONDS, forget_rate_limit_counts


@pytest.fixture
def unturning_window(settings):
    """For tests that count requests against a limit: windows are aligned to the clock, so with
    the default 60 s one a test whose requests straddled a minute (likelier on a busy machine,
    where they are slower) saw its counts reset halfway and got 200 where it expected 429. A
    window of 10^9 s does not turn during a run; its Redis keys are deleted afterwards."""
    settings.CONNECT_RATE_LIMIT_WINDOW_SECONDS = int(UNTURNING_WINDOW_SECONDS)
    yield int(UNTURNING_WINDOW_SECONDS)
    forget_rate_limit_counts()


def test_decide_reports_the_tighter_bucket():
    decision = decide([(3, 10), (50, 52)], window=60, now=120.5)
    assert decision == RateDecision(allowed=True, limit=52, remaining=2, reset_seconds=60)


def test_decide_refuses_past_any_limit_and_says_when_to_retry():
    decision = decide([(11, 10), (11, 1000)], window=60, now=170.0)
    assert not decision.allowed and decision.remaining == 0 and decision.reset_seconds == 10
    assert ("Retry-After", "10") in decision.headers()


def test_limit_reached_exactly_is_still_allowed():
    assert decide([(10, 10)], window=60, now=0).allowed


def test_counts_are_per_window(db, alice_key, settings):
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 2
    principal = authenticate_bearer(f"Bearer {alice_key}")
    assert check_rate_limit_sync(principal, now=1000).allowed
    assert check_rate_limit_sync(principal, now=1001).allowed
    assert not check_rate_limit_sync(principal, now=1002).allowed
    assert check_rate_limit_sync(principal, now=1020).allowed  # the next 60 s window


def test_a_burst_counted_at_once_decides_each_request_as_if_counted_alone(db, alice_key, bob_key, settings):
    """`check_rate_limits` (a burst of stream opens): one round trip, the same decisions, in order,
    as one `check_rate_limit_sync` per request, in both buckets (alice's and bob's workspaces
    differ, so each principal's burst is compared on fresh buckets of its own)."""
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 4
    settings.CONNECT_RATE_LIMIT_PER_WORKSPACE = 6
    alone = authenticate_bearer(f"Bearer {alice_key}")
    burst = authenticate_bearer(f"Bearer {bob_key}")
    assert alone.workspace.pk != burst.workspace.pk
    one_by_one = [check_rate_limit_sync(alone, now=5000) for _ in range(3)]
    one_by_one += [check_rate_limit_sync(alone, now=5001) for _ in range(4)]
    together = check_rate_limits(burst, 3, now=5000) + check_rate_limits(burst, 4, now=5001)
    assert together == one_by_one
    assert [d.allowed for d in together] == [True] * 4 + [False] * 3


def test_limits_off_means_no_decision(db, alice_key, settings):
    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = 0
    settings.CONNECT_RATE_LIMIT_PER_WORKSPACE = 0
    assert check_rate_limit_sync(authenticate_bearer(f"Bearer {alice_key}")) is None


def get(path: str, key: str):
    return Client().get(path, headers={"Authorization": f"Bearer {key}"})


def test_every_api_response_carries_the_headers(db, alice_key):
    response = get("/api/v1/sessions", alice_key)
    assert response.status_code == 200
    assert int(response["RateLimit-Limit"]) > 0
    assert 0 <= int(response["RateLimit-Remaining"]) < int(response["RateLimit-Limit"])
    assert 1 <= int(response["RateLimit-Reset"]) <= 60
    not_found = get("/api/v1/sessions/nope", alice_key)
    assert not_found.status_code == 404 and "RateLimit-Remaining" in not_found


@override_settings(CONNECT_RATE_LIMIT_PER_CREDENTIAL=3)
def test_a_credential_past_its_limit_gets_429(db, alice, alice_key, unturning_window):
    remaining = [int(get("/api/v1/sessions", alice_key)["RateLimit-Remaining"]) for _ in range(3)]
    assert remaining == [2, 1, 0]
    refused = get("/api/v1/sessions", alice_key)
    assert refused.status_code == 429
    assert refused.json() == {"error": "rate_limited"}
    assert 1 <= int(refused["Retry-After"]) <= unturning_window
    assert refused["Retry-After"] == refused["RateLimit-Reset"]
    assert refused["RateLimit-Remaining"] == "0"
    # Another credential of the same workspace is not limited by this one's spending.
    other = factories.api_key(alice)
    assert get("/api/v1/sessions", other).status_code == 200


@override_settings(CONNECT_RATE_LIMIT_PER_WORKSPACE=4)
def test_a_workspace_past_its_limit_refuses_all_its_credentials(db, alice, alice_key, bob_key, unturning_window):
    second = factories.api_key(alice)
    assert [get("/api/v1/sessions", key).status_code for key in (alice_key, second, alice_key, second)] == [200] * 4
    assert get("/api/v1/sessions", second).status_code == 429
    assert get("/api/v1/sessions", alice_key).status_code == 429
    assert get("/api/v1/sessions", bob_key).status_code == 200  # another workspace


@override_settings(CONNECT_RATE_LIMIT_PER_CREDENTIAL=1)
def test_scope_refusals_count_and_unauthenticated_requests_do_not(db, alice, unturning_window):
    narrow = factories.api_key(alice, ["svc:boards:read"])
    assert get("/api/v1/sessions", narrow).status_code == 403
    assert get("/api/v1/sessions", narrow).status_code == 429
    unauthenticated = Client().get("/api/v1/sessions")
    assert unauthenticated.status_code == 401 and "RateLimit-Limit" not in unauthenticated


@override_settings(CONNECT_RATE_LIMIT_PER_CREDENTIAL=1)
def test_health_and_public_documents_are_not_limited(db, alice_key):
    for _ in range(3):
        for path in ("/healthz", "/readyz", "/.well-known/oauth-protected-resource", "/openapi.json"):
            response = get(path, alice_key)
            assert response.status_code == 200, path
            assert "RateLimit-Limit" not in response


def test_openapi_documents_429_and_the_headers_on_every_bearer_operation(db):
    doc = Client().get("/openapi.json").json()
    operations = [
        op
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and any("bearerAuth" in s for s in op.get("security", []))
    ]
    assert len(operations) >= 7
    for operation in operations:
        assert "429" in operation["responses"], operation["operationId"]
        assert "rate_limited" in operation["responses"]["429"]["description"]
        for status, response in operation["responses"].items():
            rate_headers = {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}
            if status == "413":
                continue  # the upload limit is checked before the credential (/mcp documents its own)
            if status == "401":  # no credential was counted, so the response carries none
                assert not rate_headers & set(response.get("headers", {})), operation["operationId"]
            else:
                assert rate_headers <= set(response["headers"]), (operation["operationId"], status)
    # `connection_limit` is the event stream's alone: a REST operation's 429 never names it.
    assert "connection_limit" not in doc["paths"]["/api/v1/sessions"]["get"]["responses"]["429"]["description"]
    assert "connection_limit" in doc["paths"]["/api/v1/events/stream"]["get"]["responses"]["429"]["description"]
