"""The pages a person sees, in headless Chromium against a live server with DEBUG off and the
static files collected as production does: `/docs` lists the operations, the admin and the
OAuth login/consent pages have their stylesheets applied, consent names the client, the scopes
and the workspace choice, the admin's login asks for an email, and signing in without a `next`
lands on the signed-in page. Screenshots of each page are kept in the test's temp dir.
(Every admin page's layout at two screen sizes: tests/test_admin_layout.py.)"""

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
    # Members sign in with their email, and the field says so.
    assert browser.evaluate("document.querySelector('label[for=id_username]').innerText") == "Email:"
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


def test_signing_in_without_next_lands_on_the_signed_in_page(page_server, browser, tmp_path, transactional_db):
    acme = factories.workspace("acme")
    factories.tenancy.add_member(workspace=acme, email="ops@acme.test", password="ops-password-1", staff=True)

    browser.open(f"{page_server.url}/accounts/login")
    browser.submit(
        "document.querySelector('#id_username').value = 'ops@acme.test';"
        "document.querySelector('#id_password').value = 'ops-password-1';"
        "document.querySelector('form').submit();"
    )
    assert browser.evaluate("location.pathname") == "/accounts/profile/"
    browser.screenshot(tmp_path / "signed-in.png")
    assert browser.evaluate("document.querySelector('#signed-in-as').innerText") == "ops@acme.test"
    assert "Acme" in browser.evaluate("document.querySelector('main').innerText")
    links = browser.evaluate("[...document.querySelectorAll('main a')].map(a => a.getAttribute('href'))")
    assert links == ["/admin/", "/docs"], links
    assert browser.computed("button", "border-radius") == "6px"  # pages.css

    browser.submit("document.querySelector('main form button').click();")  # sign out
    assert browser.evaluate("location.pathname") == "/accounts/login"
    browser.open(f"{page_server.url}/accounts/profile/")
    assert browser.evaluate("location.pathname") == "/accounts/login"  # asked to sign in, not a JSON 404
    assert browser.evaluate("document.contentType") == "text/html"
    with page_server.client() as http:
        for path in ("/accounts/profile/", "/accounts/profile"):
            answer = http.get(path, follow_redirects=True)
            assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/html"), path
            assert str(answer.url.path) == "/accounts/login", path


def test_signed_in_page_for_a_member_who_is_not_staff(page_server, browser, tmp_path, transactional_db):
    factories.member(factories.workspace("acme"), "alice@acme.test", password="alice-password-1")
    browser.open(f"{page_server.url}/accounts/login")
    browser.submit(
        "document.querySelector('#id_username').value = 'alice@acme.test';"
        "document.querySelector('#id_password').value = 'alice-password-1';"
        "document.querySelector('form').submit();"
    )
    assert browser.evaluate("location.pathname") == "/accounts/profile/"
    links = browser.evaluate("[...document.querySelectorAll('main a')].map(a => a.getAttribute('href'))")
    assert links == ["/docs"], links  # the admin is for staff only
    browser.screenshot(tmp_path / "signed-in-member.png")
