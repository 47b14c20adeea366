"""Deployment settings, checked in real processes: with an https base URL the cookies are
secure, HSTS is on, plain http is redirected (except the health endpoints), and
`check --deploy` prints only warnings that docs/decisions/operations.md explains."""

from __future__ import annotations

import json
import re

from tests.servers import ROOT
from tests.test_settings import run_manage

SECRET = "a-real-secret-" + "k" * 50
HTTPS = {"SECRET_KEY": SECRET, "CONNECT_BASE_URL": "https://connect.example", "ALLOWED_HOSTS": "connect.example,testserver"}

SHOW = """
import json
from django.conf import settings
from django.test import Client
names = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
         "SECURE_PROXY_SSL_HEADER"]
client = Client()
print(json.dumps({
    **{name: getattr(settings, name) for name in names},
    "healthz": client.get("/healthz").status_code,
    "api": client.get("/api/v1/sessions").status_code,
    "api_via_proxy": client.get("/api/v1/sessions", headers={"X-Forwarded-Proto": "https"}).status_code,
    "hsts": client.get("/api/v1/sessions", secure=True).headers.get("Strict-Transport-Security"),
}))
"""


def show(env: dict[str, str]) -> dict:
    result = run_manage("shell", "-v", "0", "-c", SHOW, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_https_base_url_turns_on_secure_cookies_hsts_and_redirects():
    values = show(HTTPS)
    assert values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"] and values["SECURE_SSL_REDIRECT"]
    assert values["SECURE_HSTS_SECONDS"] >= 31_536_000
    assert values["hsts"].startswith("max-age=")
    assert values["api"] == 301  # plain http is sent to https …
    assert values["healthz"] == 200  # … but a load balancer's plain-http probe is answered
    assert values["SECURE_PROXY_SSL_HEADER"] is None
    assert values["api_via_proxy"] == 301  # the proxy header is not trusted unless configured


def test_behind_a_proxy_the_forwarded_scheme_is_trusted():
    values = show({**HTTPS, "CONNECT_BEHIND_PROXY": "1"})
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["api_via_proxy"] == 401  # reached the API: https as far as Django knows


def test_http_base_url_keeps_development_defaults():
    values = show({"SECRET_KEY": SECRET, "CONNECT_BASE_URL": "http://127.0.0.1:8000"})
    assert not values["SESSION_COOKIE_SECURE"] and not values["SECURE_SSL_REDIRECT"]
    assert values["SECURE_HSTS_SECONDS"] == 0
    assert values["api"] == 401


def test_check_deploy_prints_only_explained_warnings():
    result = run_manage("check", "--deploy", env=HTTPS)
    assert result.returncode == 0, result.stderr
    printed = set(re.findall(r"\(([\w.]+\.[WE]\d+)\)", result.stdout + result.stderr))
    decisions = (ROOT / "docs" / "decisions" / "operations.md").read_text()
    unexplained = {check for check in printed if check not in decisions}
    assert not unexplained, result.stderr
    assert not {check for check in printed if ".E" in check}
