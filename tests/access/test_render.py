"""Rendering a refusal: one challenge for every entry point, rate headers with every refusal
that was counted, and DRF's own authentication failures rendered the same way."""

from __future__ import annotations

import orjson
from django.conf import settings
from django.test import Client
from rest_framework import exceptions as drf

from apps.access.ratelimit import RateDecision
from apps.access.render import render, www_authenticate
from apps.access.rest import exception_handler
from apps.core.errors import UNAUTHORIZED_DETAILS, ApiError, Forbidden, RateLimited, Unauthorized
from apps.mcp.consumer import answer

CHALLENGE = f'Bearer resource_metadata="{settings.CONNECT_BASE_URL}/.well-known/oauth-protected-resource"'
INVALID_TOKEN = CHALLENGE + ', error="invalid_token", error_description="The credential is invalid, expired or revoked"'


def test_the_one_challenge_names_the_root_protected_resource_document():
    assert www_authenticate() == CHALLENGE


def test_only_a_401_carries_the_challenge_and_a_counted_refusal_carries_the_rate():
    rate = RateDecision(allowed=False, limit=5, remaining=0, reset_seconds=7)
    assert render(Unauthorized()) == (401, [("WWW-Authenticate", CHALLENGE)], {"error": "unauthorized"})
    assert render(Unauthorized("missing")) == (
        401, [("WWW-Authenticate", CHALLENGE)], {"error": "unauthorized", "detail": UNAUTHORIZED_DETAILS["missing"]})
    assert render(Unauthorized("invalid"))[1] == [("WWW-Authenticate", INVALID_TOKEN)]
    status, headers, body = render(RateLimited(), rate)
    assert (status, body) == (429, {"error": "rate_limited"})
    assert headers == [("RateLimit-Limit", "5"), ("RateLimit-Remaining", "0"), ("RateLimit-Reset", "7"),
                       ("Retry-After", "7")]
    assert render(Forbidden()) == (403, [], {"error": "forbidden"})
    assert render(ApiError("filter_cost_exceeded", status=400, cost=3)) == (
        400, [], {"error": "filter_cost_exceeded", "cost": 3})


def test_drf_authentication_failures_are_the_same_401():
    for exc, reason, challenge in ((drf.NotAuthenticated(), "missing", CHALLENGE),
                                   (drf.AuthenticationFailed(), "invalid", INVALID_TOKEN)):
        response = exception_handler(exc, {})
        assert response.status_code == 401 and response["WWW-Authenticate"] == challenge
        assert orjson.loads(response.content) == {"error": "unauthorized", "detail": UNAUTHORIZED_DETAILS[reason]}
    assert not exception_handler(drf.PermissionDenied(), {}).has_header("WWW-Authenticate")


def test_rest_and_mcp_send_the_same_challenge(db):
    rest = Client().get("/api/v1/sessions")
    reply, headers = answer({"content-type": "application/json"}, b"{}", set())
    assert rest.status_code == reply.status == 401
    assert rest["WWW-Authenticate"] == headers["WWW-Authenticate"] == CHALLENGE
    assert orjson.loads(rest.content) == reply.body == {"error": "unauthorized", "detail": UNAUTHORIZED_DETAILS["missing"]}
