"""The pure rules: which audiences and redirect URIs Connect accepts."""

from __future__ import annotations

import pytest

from apps.oauth.audience import audience_for_request, token_serves
from apps.oauth.redirect_uris import redirect_uri_problem

BASE = "https://connect.example"


@pytest.mark.parametrize(
    "resources, expected",
    [
        ([BASE], BASE),
        ([BASE + "/"], BASE),
        ([BASE + "/mcp"], BASE + "/mcp"),
        ([BASE + "/mcp/"], BASE + "/mcp"),
        ([BASE, BASE + "/"], BASE),
        ([], None),
        ([""], None),
        (["https://evil.example"], None),
        ([BASE + "/api/v1"], None),
        ([BASE, BASE + "/mcp"], None),
    ],
)
def test_authorization_request_must_name_one_of_our_audiences(resources, expected):
    assert audience_for_request(resources, base_url=BASE) == expected


def test_token_serves_only_its_exact_audience():
    assert token_serves([BASE], BASE)
    assert token_serves([BASE + "/"], BASE)
    assert not token_serves([BASE + "/mcp"], BASE)
    assert not token_serves([BASE], BASE + "/mcp")
    assert not token_serves([], BASE)  # DOT would call an empty list unrestricted; we do not


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example/callback",
        "https://app.example:8443/cb?x=1",
        "http://127.0.0.1/cb",
        "http://127.0.0.1:53682/cb",
        "http://[::1]:8080/cb",
        "http://localhost:3000/callback",
        "com.example.app:/oauth2redirect",
        "cursor://anysphere.cursor-mcp/oauth/callback",
    ],
)
def test_allowed_redirect_uris(uri):
    assert redirect_uri_problem(uri) is None


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "http://example.com/callback",
        "http://192.168.1.10/cb",
        "https://app.example/cb#fragment",
        "https://user@app.example/cb",
        "/relative/callback",
        "https:///no-host",
    ],
)
def test_refused_redirect_uris(uri):
    assert redirect_uri_problem(uri) is not None
