"""Every page of the back office as a person sees it, in headless Chromium against a live server
with DEBUG off (tests/browser.py), at 1280 x 800 and at 1024 x 768 with the apps' sidebar open:
the index, each changelist, each add form and the page of each list's first row.

On every page: nothing reaches past the right edge of the window, no changelist scrolls
sideways inside its box, and no word is broken across lines (a value with no words, such as a
URL, a hash or a JSON document in a read-only field, may wrap anywhere). The lists show their
important columns on screen, and the index's health-board link is on one line. Screenshots of
every page are kept in the test's temp dir."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests import factories
from tests.browser import CHROMIUM, Chromium, browser, page_server  # noqa: F401 - fixtures
from tests.servers import collected_static  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (.ci/run installs Debian's chromium)"),
]

PASSWORD = "staff-password-1"
SCREENS = [(1280, 800), (1024, 768)]

MEASURE = r"""(() => {
  const W = document.documentElement.clientWidth;
  const describe = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '');
  const wide = [];
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (getComputedStyle(e).visibility === 'hidden') continue;
    if (r.right > W + 1) wide.push(describe(e) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const parent = node.parentElement;
    if (!parent || parent.closest('script, style, select, textarea, pre, .readonly')) continue;
    // A word ends at a space, or after a hyphen, slash, dash or comma; a list's date is one word.
    const re = parent.closest('.when') ? /\S{2,}/g : /[^\s\-\/\u2014,]{2,}/g;
    let m;
    while ((m = re.exec(node.textContent))) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(describe(parent) + ': ' + m[0]);
    }
  }
  // Content cut off by a box that hides its overflow (an ellipsis is a deliberate cut).
  for (const e of document.querySelectorAll('#content *')) {
    const style = getComputedStyle(e);
    if (style.overflowX === 'visible' || style.textOverflow === 'ellipsis') continue;
    if (e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0 && !e.matches('.results, input, button, select, textarea') && !e.closest('.visually-hidden'))
      wide.push('cut off: ' + describe(e) + ' ' + e.scrollWidth + ' > ' + e.clientWidth);
  }
  // A table wider than its module (shown under its neighbour).
  for (const t of document.querySelectorAll('#content .module > table')) {
    if (t.getBoundingClientRect().right > t.parentElement.getBoundingClientRect().right + 1)
      wide.push('wider than its module: ' + describe(t.parentElement));
  }
  const results = document.querySelector('.results');
  if (results && results.scrollWidth > results.clientWidth) wide.push('scrolling .results ' + results.scrollWidth);
  return {inner: W, doc: document.documentElement.scrollWidth, wide: wide.slice(0, 15), broken: broken.slice(0, 15)};
})()"""


@pytest.fixture
def back_office(transactional_db):
    """A row in every list, with the long values that widen columns: names, emails, URLs, ids."""
    from apps.oauth.models import AccessToken, Grant, RefreshToken
    from apps.oauth.services import create_client
    from apps.recordings import services as recordings
    from apps.tenancy import services as tenancy
    from apps.tenancy.models import INGEST_SCOPE
    from apps.webhooks import keys
    from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint

    now = timezone.now()
    ws = tenancy.create_workspace(slug="acme-research-and-development", name="Acme Research and Development Group")
    staff = tenancy.add_member(workspace=ws, email="staff@acme.test", password=PASSWORD, staff=True)
    member = tenancy.add_member(workspace=ws, email="margaret.hamilton-longname@engineering.acme.test")
    for i in range(5):
        tenancy.issue_api_key(membership=member, scopes=factories.ALL_SCOPES, name=f"Reporting dashboard key {i}")
    tenancy.issue_api_key(membership=member, scopes=[INGEST_SCOPE], name="Recorder ingest key")
    tenancy.revoke_api_key(api_key=tenancy.issue_api_key(membership=member, scopes=["svc:sessions:read"]).api_key)
    other = tenancy.create_workspace(slug="globex", name="Globex")  # so the workspace filters show
    factories.session(other, label="Kickoff")
    for i in range(5):
        s = factories.session(ws, label=f"Quarterly planning review with the extended leadership team {i}",
                              committed=["Welcome everyone, " * 20, "Next item on the agenda"], final=["Done."])
        recordings.publish_board(session=s, board_id="summary", payload={"items": ["a" * 80]},
                                 source_revision_kind="final")
    keys.active_key()
    hook = WebhookEndpoint.objects.create(
        workspace=ws, name="orders hook for the reporting pipeline", url="https://hooks.example.com/" + "x" * 90,
        filters=[{"type": "session.created"}], created_at=now, updated_at=now, created_by=member,
        credential_kind="api_key", credential_id="x",
    )
    delivery = Delivery.objects.create(workspace=ws, endpoint=hook, event_id="evt_1", event_type="session.created",
                                       body="{}", status="dead_letter", attempt_count=1, is_dead_letter=True,
                                       created_at=now, updated_at=now)
    DeliveryAttempt.objects.create(delivery=delivery, number=1, started_at=now, completed_at=now, http_status=500,
                                   duration_ms=80, error="http_error")
    app = create_client(name="Transcript Helper for the sales team",
                        redirect_uri="http://127.0.0.1:8765/callback/with/a/rather/long/path").application
    user = member.user
    AccessToken.objects.create(user=user, application=app, token="t" * 40, workspace=ws, scope=" ".join(factories.ALL_SCOPES),
                               expires=now + timedelta(hours=1))
    RefreshToken.objects.create(user=user, application=app, token="r" * 40, workspace=ws)
    Grant.objects.create(user=user, application=app, code="c" * 40, workspace=ws, expires=now + timedelta(minutes=5),
                         redirect_uri="http://127.0.0.1:8765/callback", scope="svc:sessions:read",
                         code_challenge="x" * 43, code_challenge_method="S256")
    return staff


def log_in(browser: Chromium, server) -> None:
    browser.open(f"{server.url}/admin/login/?next=/admin/")
    browser.submit(
        "document.querySelector('#id_username').value = 'staff@acme.test';"
        f"document.querySelector('#id_password').value = {json.dumps(PASSWORD)};"
        "document.querySelector('#login-form').submit();"
    )
    assert browser.evaluate("location.pathname") == "/admin/"


def columns_on_screen(browser: Chromium) -> list[str]:
    """The changelist's column headers whose right edge is inside the list's visible box."""
    return browser.evaluate(
        "(() => { const box = document.querySelector('.results').getBoundingClientRect();"
        " return [...document.querySelectorAll('#result_list thead th')]"
        ".filter(th => th.getBoundingClientRect().right <= box.right + 1)"
        ".map(th => th.innerText.trim().toLowerCase()); })()"
    )


@pytest.mark.parametrize(("width", "height"), SCREENS, ids=[f"{w}x{h}" for w, h in SCREENS])
def test_every_admin_page_fits_the_screen(page_server, browser, back_office, tmp_path, width, height):
    browser.viewport(width, height)
    log_in(browser, page_server)
    assert browser.evaluate("document.documentElement.clientWidth") <= width

    # The index: the health board's link is one line (it was squeezed to a word a line).
    assert browser.evaluate("document.querySelector('#delivery-health-module th a').getClientRects().length") == 1
    links = browser.evaluate("[...document.querySelectorAll('#content-main a')].map(a => a.getAttribute('href'))")
    pages = ["/admin/", *sorted({link for link in links if link and link.startswith("/admin/")})]
    changelists = [p for p in pages if p.count("/") == 4 and not p.endswith("/add/")]
    assert len(changelists) >= 15, pages

    problems = {}
    for page in pages:
        targets = [page]
        browser.open(page_server.url + page)
        if page in changelists:
            assert browser.evaluate("document.querySelector('#main').classList.contains('shifted')") or (
                browser.evaluate("document.querySelector('#nav-sidebar') === null")  # a list without it
            ), page
            first = browser.evaluate("(document.querySelector('#result_list tbody a') || {}).href || ''")
            if first.startswith(page_server.url + page) and first != page_server.url + page:
                targets.append(first.removeprefix(page_server.url))
        for target in targets:
            if target != page:
                browser.open(page_server.url + target)
            browser.screenshot(tmp_path / f"{width}-{target.strip('/').replace('/', '_') or 'index'}.png")
            measured = browser.evaluate(MEASURE)
            if measured["wide"] or measured["broken"] or measured["doc"] > measured["inner"]:
                problems[target] = measured
    assert problems == {}, json.dumps(problems, indent=1)


@pytest.mark.parametrize(("width", "height"), SCREENS, ids=[f"{w}x{h}" for w, h in SCREENS])
def test_lists_show_their_important_columns(page_server, browser, back_office, tmp_path, width, height):
    browser.viewport(width, height)
    log_in(browser, page_server)
    wanted = {
        "/admin/tenancy/apikey/": ["prefix", "name", "state", "kind", "workspace"],
        "/admin/recordings/session/": ["session", "status", "workspace", "created"],
        "/admin/tenancy/membership/": ["member", "workspace", "is active"],
        "/admin/oauth/accesstoken/": ["member", "workspace", "client", "scopes", "expires"],
    }
    for page, columns in wanted.items():
        browser.open(page_server.url + page)
        browser.screenshot(tmp_path / f"{width}-{page.strip('/').replace('/', '_')}.png")
        visible = columns_on_screen(browser)
        assert all(column in visible for column in columns), (page, visible)
    # Issuing a key: each scope's choice takes the row's width, not a field label's.
    browser.open(page_server.url + "/admin/tenancy/apikey/add/")
    browser.screenshot(tmp_path / f"{width}-issue-key.png")
    widths = browser.evaluate("[...document.querySelectorAll('#id_scopes label')].map(l => l.offsetWidth)")
    assert widths and min(widths) >= 400, widths  # Django's label width (160 px) made them 4 or 5 lines
    browser.open(page_server.url + "/admin/tenancy/apikey/")
    states = browser.evaluate("[...document.querySelectorAll('#result_list td.field-state')].map(e => e.innerText)")
    assert sorted(set(states)) == ["active", "revoked"], states


def test_back_office_lists_what_staff_use(page_server, browser, back_office, tmp_path):
    log_in(browser, page_server)
    entries = browser.evaluate("[...document.querySelectorAll('#content-main .module th a')].map(a => a.innerText)")
    browser.screenshot(tmp_path / "index.png", full_page=True)
    assert "Scheduled tasks" in entries and "API keys" in entries and "OAuth access tokens" in entries
    for hidden in ("OAuth ID tokens", "Successful tasks", "Failed tasks", "Queued tasks"):
        assert hidden not in entries, entries
    with page_server.client() as http:
        assert http.get("/admin/oauth/idtoken/").status_code in (302, 404)
