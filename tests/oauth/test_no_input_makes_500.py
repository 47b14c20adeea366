"""No input makes a 500 on the OAuth endpoints: token, revoke, register (and its RFC 7592
management endpoint) and authorize, through Django's whole stack (middleware, URLs, views).

Every parameter of a valid request is in turn missing, empty, repeated, oversized, of the
wrong type or encoding; then a seeded random fuzz mixes them. Each answer must be below 500
and nothing may be logged at ERROR (Django logs every 500 with its traceback)."""

from __future__ import annotations

import base64
import json
import logging
import random
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.test import Client

from apps.oauth.models import AccessToken, Application
from apps.oauth.services import create_client
from tests.oauth.flow import pkce_pair

AUTHORIZE = "/api/auth/oauth2/authorize"
TOKEN = "/api/auth/oauth2/token"
REVOKE = "/api/auth/oauth2/revoke"
REGISTER = "/api/auth/oauth2/register"
REDIRECT = "https://agent.example/cb"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
NOT_OFFERED = [
    "password",
    "client_credentials",
    "implicit",
    DEVICE_CODE,
    "urn:ietf:params:oauth:grant-type:token-exchange",
    "urn:ietf:params:oauth:grant-type:jwt-bearer",
    "urn:ietf:params:oauth:grant-type:saml2-bearer",
    "Authorization_Code",
    "authorization_code ",
]
# Values no well-behaved client sends: empty, oversized, non-ASCII, control characters,
# percent-escapes that decode to nothing valid, other parameters' syntax.
NASTY = ["", " ", "x" * 10_000, "é" * 3_000, "\u202e\ufeff", "\r\n", "%ff%fe", "%", "a=b&c", "[]", "{}",
         "null", "-1", "0", "1e309", "S256 plain", "svc:sessions:read " * 500, "http://", "//evil.example",
         "javascript:alert(1)", "https://agent.example/cb#frag", "\ud7ff", "😀" * 100]


@pytest.fixture
def application(db):
    return create_client(name="Agent", redirect_uri=REDIRECT).application


@pytest.fixture
def fuzz(caplog):
    """A client that answers 500s instead of raising them, and a check of every answer."""
    caplog.set_level(logging.ERROR)
    client = Client(raise_request_exception=False)
    seen: list[tuple[str, int]] = []

    def check(response, what: str):
        seen.append((what, response.status_code))
        assert response.status_code < 500, (what, response.status_code, response.content[:300])
        return response

    yield client, check
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert errors == [], errors[:5]
    assert seen, "no request was made"


def token_base(application) -> dict:
    return {"grant_type": "authorization_code", "code": "c0de", "redirect_uri": REDIRECT,
            "code_verifier": "v" * 50, "client_id": application.client_id}


def authorize_base(application) -> dict:
    return {"response_type": "code", "client_id": application.client_id, "redirect_uri": REDIRECT,
            "code_challenge": pkce_pair()[1], "code_challenge_method": "S256", "state": "st4te",
            "scope": "svc:sessions:read", "resource": settings.CONNECT_BASE_URL}


def variants(base: dict) -> list[dict]:
    """Each parameter missing, empty, repeated (same and different value), oversized."""
    out = []
    for name, value in base.items():
        out.append({k: v for k, v in base.items() if k != name})
        out.append({**base, name: ""})
        out.append({**base, name: [value, value]})
        out.append({**base, name: [value, value + "x"]})
        out.append({**base, name: value + "x" * 20_000})
    return out


def test_device_code_grant_without_device_code_is_unsupported_grant_type(fuzz, application):
    client, check = fuzz
    response = check(client.post(TOKEN, {"grant_type": DEVICE_CODE, "client_id": application.client_id}), "device")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "unsupported_grant_type"
    assert body["detail"] and body["error_description"] == body["detail"]
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("grant_type", NOT_OFFERED)
def test_grant_types_we_do_not_offer_are_refused_before_the_library(fuzz, application, grant_type):
    client, check = fuzz
    for extra in ({}, {"device_code": "x"}, {"subject_token": "x", "subject_token_type": "x"},
                  {"username": "alice@acme.test", "password": "alice-password-1"}):
        response = check(client.post(TOKEN, {"grant_type": grant_type, "client_id": application.client_id,
                                             **extra}), grant_type)
        assert (response.status_code, response.json()["error"]) == (400, "unsupported_grant_type")
        assert response.json()["detail"] == "grant_type: must be authorization_code or refresh_token"
    assert not AccessToken.objects.exists()


@pytest.mark.parametrize("path", [TOKEN, REVOKE])
def test_a_repeated_parameter_is_invalid_request(fuzz, application, path):
    client, check = fuzz
    data = {"grant_type": "authorization_code", "token": "t", "client_id": [application.client_id, "other"]}
    response = check(client.post(path, data), path)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["detail"].startswith("client_id:")


@pytest.mark.parametrize("path", [TOKEN, REVOKE, REGISTER])
def test_a_wrong_method_is_our_405(fuzz, db, path):
    client, check = fuzz
    response = check(client.get(path), path)
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed" and response.json()["detail"] == "method: use POST"
    assert "POST" in response["Allow"]


def test_consent_post_for_an_unregistered_client_or_redirect_is_an_error_page(fuzz, application, alice):
    client, check = fuzz
    client.force_login(alice.user)
    form = {**authorize_base(application), "allow": "Authorize", "workspace": alice.workspace_id}
    for edited in ({"client_id": "nobody"}, {"client_id": ""}, {"redirect_uri": "https://evil.example/cb"}):
        response = check(client.post(AUTHORIZE, {**form, **edited}), str(edited))
        assert response.status_code == 400, edited
        assert "Location" not in response
        assert "cannot be completed" in response.content.decode()


def test_a_registration_update_cannot_make_a_confidential_client(fuzz, db):
    client, check = fuzz
    registered = check(client.post(REGISTER, {"redirect_uris": [REDIRECT], "client_name": "A"},
                                   content_type="application/json"), "register").json()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}
    for metadata in ({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"},
                     {"redirect_uris": [REDIRECT], "client_name": "nul\u0000"}):
        response = check(client.put(f"{REGISTER}/{registered['client_id']}", metadata,
                                    content_type="application/json", **auth), "update")
        assert (response.status_code, response.json()["error"]) == (400, "invalid_client_metadata")
    # Omitted, the method stays `none` (DOT's own default would be client_secret_basic).
    response = check(client.put(f"{REGISTER}/{registered['client_id']}", {"redirect_uris": [REDIRECT]},
                                content_type="application/json", **auth), "update")
    assert response.status_code == 200
    assert Application.objects.get(client_id=registered["client_id"]).client_type == "public"


def test_every_parameter_missing_empty_repeated_or_oversized(fuzz, application, alice):
    client, check = fuzz
    for data in variants(token_base(application)):
        response = check(client.post(TOKEN, data), f"token {sorted(data)}")
        assert response.json()["error"]
    for data in variants({"token": "t" * 40, "token_type_hint": "access_token", "client_id": application.client_id}):
        check(client.post(REVOKE, data), f"revoke {sorted(data)}")
    for logged_in in (False, True):
        if logged_in:
            client.force_login(alice.user)
        for query in variants(authorize_base(application)):
            check(client.get(AUTHORIZE, query), f"authorize {sorted(query)}")
            check(client.post(AUTHORIZE, {**query, "allow": "Authorize"}), f"consent {sorted(query)}")
    body = {"redirect_uris": [REDIRECT], "client_name": "A", "grant_types": ["authorization_code"],
            "response_types": ["code"], "token_endpoint_auth_method": "none", "scope": "svc:sessions:read"}
    for name in body:
        for value in (None, "", 0, 1.5, True, [], {}, ["x"], [1, None], "x" * 20_000, ["x" * 20_000], "\u0000"):
            response = check(client.post(REGISTER, {**body, name: value}, content_type="application/json"), name)
            assert response.status_code in (201, 400), (name, value, response.status_code)


def test_wrong_types_and_encodings(fuzz, application):
    client, check = fuzz
    form = "application/x-www-form-urlencoded"
    raw_bodies = [b"", b"\xff\xfe\xfd", b"grant_type=authorization_code&code=%ff%fe", b"grant_type=%", b"===&&&",
                  b"grant_type=authorization_code&" + b"a=b&" * 5_000, b"grant_type[]=x", "é=é".encode("latin-1"),
                  b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)]
    for path in (TOKEN, REVOKE, AUTHORIZE):
        for raw in raw_bodies:
            check(client.post(path, raw, content_type=form), f"{path} raw")
        check(client.post(path, json.dumps(token_base(application)), content_type="application/json"), path)
        check(client.post(path, b"--x\r\n", content_type="multipart/form-data; boundary=x"), path)
        check(client.put(path, "x", content_type=form), path)
        check(client.delete(path), path)
    for query in ("client_id=%ff%fe&response_type=code", "response_type=%&client_id=%", "state=%00", "=&&=x",
                  f"client_id={application.client_id}&redirect_uri=%E9%ZZ&response_type=code",
                  "resource=%C0%AF&resource=&resource=" + "x" * 5_000):
        check(client.get(f"{AUTHORIZE}?{query}"), f"authorize raw {query[:60]}")
        check(client.post(f"{TOKEN}?{query}", token_base(application)), f"token raw {query[:60]}")
        check(client.post(f"{REVOKE}?{query}", {"token": "t"}), f"revoke raw {query[:60]}")
        check(client.post(f"{REGISTER}?{query}", {"redirect_uris": [REDIRECT]}, content_type="application/json"),
              f"register raw {query[:60]}")
    for raw in (b"", b"\xff", b"[]", b"null", b'"x"', b"1", b"{" * 2_000, b'{"a":"\\ud800"}', b"x" * 100_000):
        check(client.post(REGISTER, raw, content_type="application/json"), "register raw")
    check(client.get(REGISTER), "register get")
    for header in ("Basic !!!", "Basic " + base64.b64encode(b"\xff:\xfe").decode(), "Basic",
                   "Basic " + base64.b64encode(b"no-colon").decode(), "Bearer x", "Basic " + "A" * 10_000,
                   "Basic " + base64.b64encode(f"{application.client_id}:".encode()).decode()):
        check(client.post(TOKEN, token_base(application), HTTP_AUTHORIZATION=header), "basic")
        check(client.post(REVOKE, {"token": "t"}, HTTP_AUTHORIZATION=header), "basic revoke")
        check(client.get(f"{REGISTER}/{application.client_id}", HTTP_AUTHORIZATION=header), "management")


NAMES = ["grant_type", "code", "redirect_uri", "code_verifier", "client_id", "client_secret", "refresh_token",
         "scope", "resource", "token", "token_type_hint", "device_code", "subject_token", "response_type",
         "code_challenge", "code_challenge_method", "state", "nonce", "prompt", "claims", "request",
         "request_uri", "max_age", "allow", "workspace", "audience", "x" * 300, "é"]
GRANTS = ["authorization_code", "refresh_token", *NOT_OFFERED]


def random_value(rng: random.Random, application) -> str:
    return rng.choice([*NASTY, application.client_id, REDIRECT, rng.choice(GRANTS), "code", "S256", "plain",
                       settings.CONNECT_BASE_URL, "none", "login", "create", "none login", pkce_pair()[1]])


def random_params(rng: random.Random, application) -> dict:
    params: dict[str, list[str]] = {}
    for _ in range(rng.randint(0, 8)):
        name = rng.choice(NAMES)
        params.setdefault(name, []).extend(random_value(rng, application) for _ in range(rng.choice((1, 1, 1, 2))))
    return params


def random_json(rng: random.Random, depth: int = 0):
    kind = rng.randint(0, 7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice(NASTY)
    if kind == 1:
        return rng.choice([None, True, 0, -1, 2**70, 1.5])
    if kind == 2:
        return REDIRECT
    if kind == 3:
        return rng.choice(GRANTS)
    if kind == 4:
        return rng.choice(["none", "client_secret_basic", "code", "token"])
    if kind == 5:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["redirect_uris", "client_name", "grant_types", "response_types", "token_endpoint_auth_method",
            "scope", "client_uri", "logo_uri", "contacts", "jwks"]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 6))}


def test_seeded_random_fuzz(fuzz, application, alice):
    client, check = fuzz
    rng = random.Random(7)
    registered = client.post(REGISTER, {"redirect_uris": [REDIRECT]}, content_type="application/json").json()
    management = f"{REGISTER}/{registered['client_id']}"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}
    for i in range(400):
        if i == 200:
            client.force_login(alice.user)
        params = random_params(rng, application)
        target = rng.randrange(6)
        raw = rng.choice(["", "", "", "", "%", "a=%zz", "x=%e9", "%%%", "b=%4"])  # a raw query of its own
        if target == 0:
            params.setdefault("grant_type", [rng.choice(GRANTS)])
            check(client.post(f"{TOKEN}?{raw}", params), f"token {raw} {params}")
        elif target == 1:
            check(client.post(f"{REVOKE}?{raw}", params), f"revoke {raw} {params}")
        elif target == 2:
            query = "&".join(filter(None, [urlencode(params, doseq=True), raw]))
            check(client.get(f"{AUTHORIZE}?{query}"), f"authorize {query}")
        elif target == 3:
            check(client.post(f"{AUTHORIZE}?{raw}", params), f"consent {raw} {params}")
        elif target == 4:
            check(client.post(REGISTER, json.dumps(random_json(rng)), content_type="application/json"), "register")
        else:
            body = json.dumps(random_json(rng))
            check(client.generic(rng.choice(["GET", "PUT"]), management, body, content_type="application/json",
                                 **auth), f"management {body[:200]}")
