"""The pages a person sees, in headless Chromium against a live server with DEBUG off and the
static files collected as production does: `/docs` lists the operations, the admin and the
OAuth login/consent pages have their stylesheets applied, consent names the client, the scopes
and the workspace choice. Screenshots of each page are kept in the test's temp dir."""

from __future__ import annotations

import re

import pytest

from tests import factories
from tests.browser import CHROMIUM, browser, page_server  # noqa: F401 - fixtures
from tests.oauth.flow import authorize_params, authorize_url, pkce_pair, register
from tests.servers import collected_static  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (.ci/run installs Debian's chromium)"),
]


def test_docs_lists_the_operations_offline(page_server, browser, tmp_path, transactional_db):
    browser.open(f"{page_server.url}/docs")
    browser.wait_for("document.querySelectorAll('.opblock').length >= 7")
    paths = browser.evaluate("[...document.querySelectorAll('.opblock-summary-path')].map(e => e.innerText)")
    assert "/api/v1/sessions" in [p.replace("\u200b", "") for p in paths]
    # Swagger UI's stylesheet is applied: a GET operation's block is tinted, not plain.
    assert browser.computed(".opblock.opblock-get", "background-color") not in ("", "rgba(0, 0, 0, 0)")
    # Every script and stylesheet came from this server (the page works offline).
    sources = browser.evaluate("[...document.querySelectorAll('script[src], link[href]')].map(e => e.src || e.href)")
    assert sources and all(s.startswith(page_server.url) for s in sources), sources
    browser.screenshot(tmp_path / "docs.png")


def test_admin_login_is_styled(page_server, browser, tmp_path, transactional_db):
    browser.open(f"{page_server.url}/admin/login/")
    assert browser.evaluate("document.querySelector('#id_username') !== null")
    # Django admin's header colour, from its base.css (the unstyled page has none).
    assert browser.computed("#header", "background-color") == "rgb(65, 118, 144)"
    assert browser.evaluate("document.querySelector('#site-name').innerText") == "Connect administration"
    browser.screenshot(tmp_path / "admin-login.png")


def test_member_logs_in_and_sees_a_styled_consent_page(page_server, browser, tmp_path, transactional_db):
    acme = factories.workspace("acme")
    factories.workspace("globex")  # not the member's: must not be offered
    factories.member(acme, "alice@acme.test", password="alice-password-1")
    callback = f"{page_server.url}/healthz"  # a loopback URL on this server, so the redirect lands
    with page_server.client() as http:
        registered = register(http, redirect_uris=[callback], client_name="Transcript Helper")
        assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    _, challenge = pkce_pair()
    params = authorize_params(
        client_id, challenge, resource=page_server.url, scope="svc:sessions:read svc:transcripts:read",
        redirect_uri=callback,
    )

    browser.open(authorize_url(page_server.url, params))
    assert "/accounts/login" in browser.evaluate("location.pathname")
    assert browser.computed("body", "background-color") == "rgb(245, 246, 248)"  # pages.css
    assert browser.computed("button.primary", "background-color") == "rgb(36, 82, 214)"
    browser.screenshot(tmp_path / "login.png")
    browser.submit(
        "document.querySelector('#id_username').value = 'alice@acme.test';"
        "document.querySelector('#id_password').value = 'alice-password-1';"
        "document.querySelector('form').submit();"
    )

    assert browser.evaluate("location.pathname").startswith("/api/auth/oauth2/authorize")
    heading = browser.evaluate("document.querySelector('h1').innerText")
    assert "Transcript Helper" in heading
    scopes = browser.evaluate("[...document.querySelectorAll('ul.scopes li')].map(e => e.innerText)")
    assert scopes == [
        "Read sessions and receive session events",
        "Read and search transcripts and receive transcript events",
    ]
    choices = browser.evaluate(
        "[...document.querySelectorAll('input[name=workspace]')].map(e => e.closest('label').innerText.trim())"
    )
    assert any("Acme" in c for c in choices) and not any("Globex" in c for c in choices)
    assert browser.computed("main", "background-color") == "rgb(255, 255, 255)"
    assert browser.computed("button.primary", "color") == "rgb(255, 255, 255)"
    browser.screenshot(tmp_path / "consent.png")

    browser.submit(
        "document.querySelector('input[name=workspace]').checked = true;"
        "document.querySelector('button[name=allow]').click();"
    )
    landed = browser.evaluate("location.href")
    assert landed.startswith(callback) and re.search(r"[?&]code=[^&]+", landed) and "state=st4te" in landed


def test_static_files_are_compressed_and_cached_for_ever(page_server, transactional_db):
    with page_server.client() as http:
        html = http.get("/admin/login/").text
        css = re.search(r'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', html)
        assert css, "the admin page links the hashed stylesheet"
        hashed = http.get(css.group(1), headers={"Accept-Encoding": "gzip"})
        assert hashed.status_code == 200
        assert hashed.headers["Content-Encoding"] == "gzip"
        assert "immutable" in hashed.headers["Cache-Control"] and "max-age=31536000" in hashed.headers["Cache-Control"]
        plain = http.get("/static/admin/css/base.css")
        assert plain.status_code == 200 and "immutable" not in plain.headers["Cache-Control"]
        assert http.get("/static/admin/css/nothing.css").status_code == 404
