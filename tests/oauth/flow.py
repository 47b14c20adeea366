"""Drives the OAuth flow the way a browser and a public client do: register, log in,
consent, exchange. Plain httpx, so every request is visible in the test."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

AUTHORIZE = "/api/auth/oauth2/authorize"
TOKEN = "/api/auth/oauth2/token"
REVOKE = "/api/auth/oauth2/revoke"
REGISTER = "/api/auth/oauth2/register"
REDIRECT_URI = "http://127.0.0.1:8765/callback"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class FormFields(HTMLParser):
    """Collects the inputs of the first form on a page: hidden fields and radio choices."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self.radios: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs) -> None:
        if tag != "input":
            return
        a = dict(attrs)
        if a.get("type") == "radio":
            self.radios.setdefault(a["name"], []).append(a.get("value", ""))
        elif a.get("name"):
            self.fields[a["name"]] = a.get("value") or ""


def form_fields(html: str) -> FormFields:
    parser = FormFields()
    parser.feed(html)
    return parser


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def register(http: httpx.Client, redirect_uris: list[str] | None = None, **metadata) -> httpx.Response:
    body = {
        "client_name": "Test Agent",
        "redirect_uris": redirect_uris or [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
        **metadata,
    }
    return http.post(REGISTER, json=body)


@dataclass
class Browser:
    """A member's browser: keeps the session cookie, never follows redirects by itself."""

    http: httpx.Client
    logged_in: bool = field(default=False)

    def login(self, email: str, password: str, next_url: str = "/") -> httpx.Response:
        page = self.http.get("/accounts/login", params={"next": next_url})
        assert page.status_code == 200, page.text
        token = form_fields(page.text).fields["csrfmiddlewaretoken"]
        response = self.http.post(
            "/accounts/login",
            data={"username": email, "password": password, "next": next_url, "csrfmiddlewaretoken": token},
        )
        assert response.status_code == 302, "login failed"
        self.logged_in = True
        return response

    def authorize(self, params: dict) -> httpx.Response:
        return self.http.get(AUTHORIZE, params=params)

    def consent(self, page: httpx.Response, *, workspace_id: str | None, allow: bool = True) -> httpx.Response:
        fields = form_fields(page.text).fields
        data = dict(fields)
        if workspace_id is not None:
            data["workspace"] = workspace_id
        if allow:
            data["allow"] = "Authorize"
        return self.http.post(str(page.request.url), data=data)


def authorize_params(client_id: str, challenge: str, *, resource: str | None, scope: str | None = None,
                     method: str | None = "S256", state: str = "st4te", redirect_uri: str = REDIRECT_URI) -> dict:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": state,
              "code_challenge": challenge}
    if method is not None:
        params["code_challenge_method"] = method
    if resource is not None:
        params["resource"] = resource
    if scope is not None:
        params["scope"] = scope
    return params


def exchange(http: httpx.Client, client_id: str, code: str, verifier: str,
             redirect_uri: str = REDIRECT_URI, **extra) -> httpx.Response:
    return http.post(TOKEN, data={"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                                  "client_id": client_id, "redirect_uri": redirect_uri, **extra})


def refresh(http: httpx.Client, client_id: str, refresh_token: str) -> httpx.Response:
    return http.post(TOKEN, data={"grant_type": "refresh_token", "refresh_token": refresh_token,
                                  "client_id": client_id})


@dataclass
class Flow:
    """One registered public client and one member's browser against a live server."""

    base_url: str
    http: httpx.Client
    browser: Browser
    client_id: str

    def code_for(self, *, workspace_id: str, scope: str | None = None, resource: str | None = "",
                 verifier_challenge: tuple[str, str] | None = None) -> tuple[str, str]:
        """Authorize and consent; returns (code, verifier)."""
        verifier, challenge = verifier_challenge or pkce_pair()
        resource = self.base_url if resource == "" else resource
        page = self.browser.authorize(authorize_params(self.client_id, challenge, resource=resource, scope=scope))
        assert page.status_code == 200, (page.status_code, page.headers.get("location"), page.text[:500])
        done = self.browser.consent(page, workspace_id=workspace_id)
        assert done.status_code == 302, done.text[:500]
        params = query_of(done.headers["location"])
        assert "code" in params, params
        return params["code"], verifier

    def tokens(self, *, workspace_id: str, scope: str | None = None, resource: str | None = "") -> dict:
        code, verifier = self.code_for(workspace_id=workspace_id, scope=scope, resource=resource)
        response = exchange(self.http, self.client_id, code, verifier)
        assert response.status_code == 200, response.text
        return response.json()

    def api(self, path: str, access_token: str) -> httpx.Response:
        return self.http.get(path, headers={"Authorization": f"Bearer {access_token}"})


def start(live, email: str, password: str) -> Flow:
    """Register a public client and log the member in."""
    http = live.client()
    registered = register(http)
    assert registered.status_code == 201, registered.text
    browser = Browser(live.client())
    browser.login(email, password, next_url=AUTHORIZE)
    return Flow(base_url=live.url, http=http, browser=browser, client_id=registered.json()["client_id"])


def authorize_url(base_url: str, params: dict) -> str:
    return f"{base_url}{AUTHORIZE}?{urlencode(params)}"


class MemoryStorage:
    """The MCP SDK's `TokenStorage`, in memory: what an OAuth client provider keeps between calls."""

    def __init__(self) -> None:
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info
