"""SURVEY (temporary): every admin page at both widths, measured and screenshotted."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

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
    if (!parent || parent.closest('script, style, select, textarea, pre')) continue;
    const re = /[^\s\-\/\u2014,]{2,}/g;
    let m;
    while ((m = re.exec(node.textContent))) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(describe(parent) + ': ' + m[0]);
    }
  }
  const results = document.querySelector('.results');
  if (results && results.scrollWidth > results.clientWidth) wide.push('scrolling .results ' + results.scrollWidth);
  return {inner: W, doc: document.documentElement.scrollWidth, wide: wide.slice(0, 15), broken: broken.slice(0, 15)};
})()"""


@pytest.fixture
def back_office(transactional_db):
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


def test_survey(page_server, browser, back_office):
    out = Path(os.environ.get("SURVEY_DIR", "/tmp/survey"))
    out.mkdir(exist_ok=True)
    log_in(browser, page_server)
    links = browser.evaluate("[...document.querySelectorAll('#content-main a')].map(a => a.getAttribute('href'))")
    pages = ["/admin/"] + sorted({link for link in links if link and link.startswith("/admin/")})
    report = {}
    for width, height in ((1280, 800), (1024, 768)):
        browser.viewport(width, height)
        for page in pages:
            browser.open(page_server.url + page)
            targets = [page]
            if page.endswith("/") and page.count("/") == 4:  # a changelist: also its first row
                first = browser.evaluate("(document.querySelector('#result_list tbody th a') || {}).href || ''")
                if first:
                    targets.append(first.replace(page_server.url, ""))
            for target in targets:
                if target != page:
                    browser.open(page_server.url + target)
                name = f"{width}-" + target.strip("/").replace("/", "_")
                browser.screenshot(out / f"{name}.png")
                report[name] = browser.evaluate(MEASURE)
    (out / "report.json").write_text(json.dumps(report, indent=1))
