"""The delivery health board and the deliveries changelist as a person sees them: headless
Chromium at 1280 px against a live server with DEBUG off and the static files collected as
production does (tests/browser.py). Screenshots are kept in the test's temp dir."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint
from tests import factories
from tests.browser import CHROMIUM, Chromium, browser, page_server  # noqa: F401 - fixtures
from tests.servers import collected_static  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (.ci/run installs Debian's chromium)"),
]

PASSWORD = "staff-password-1"


@pytest.fixture
def staff_member(transactional_db):
    ws = factories.workspace("acme")
    return factories.tenancy.add_member(workspace=ws, email="staff@acme.test", password=PASSWORD, staff=True)


def log_in(browser: Chromium, server, next_path: str) -> None:
    browser.open(f"{server.url}/admin/login/?next={next_path}")
    browser.submit(
        f"document.querySelector('#id_username').value = 'staff@acme.test';"
        f"document.querySelector('#id_password').value = {json.dumps(PASSWORD)};"
        "document.querySelector('#login-form').submit();"
    )
    assert browser.evaluate("location.pathname") == next_path


def endpoint(member, name: str) -> WebhookEndpoint:
    now = timezone.now()
    return WebhookEndpoint.objects.create(
        workspace=member.workspace, name=name, url="https://hooks.example.com/" + "x" * 60,
        filters=[{"type": "session.created"}], created_at=now, updated_at=now, created_by=member,
        credential_kind="api_key", credential_id="x",
    )


def sideways(browser: Chromium) -> dict:
    return browser.evaluate(
        "({inner: window.innerWidth, doc: document.documentElement.scrollWidth,"
        " results: document.querySelector('.results') ? document.querySelector('.results').scrollWidth : 0,"
        " resultsBox: document.querySelector('.results') ? document.querySelector('.results').clientWidth : 0})"
    )


def test_board_draws_each_endpoints_day_offline(page_server, browser, tmp_path, staff_member):
    now = timezone.now()
    hook = endpoint(staff_member, "orders hook")
    endpoint(staff_member, "quiet hook")
    rows = []
    for h in range(0, 20, 2):  # deliveries every other hour, a dead letter in some
        for i in range(3 + h % 5):
            status = "dead_letter" if i == 0 and h % 4 == 0 else "succeeded"
            rows.append(Delivery(workspace_id=hook.workspace_id, endpoint=hook, event_id=f"evt_{h}_{i}",
                                 event_type="session.created", body="{}", status=status, attempt_count=1,
                                 is_dead_letter=status == "dead_letter", terminal_at=now,
                                 created_at=now - timedelta(hours=h, minutes=1), updated_at=now))
    Delivery.objects.bulk_create(rows)
    DeliveryAttempt.objects.bulk_create([
        DeliveryAttempt(delivery=d, number=1, started_at=d.created_at, completed_at=d.created_at,
                        http_status=200 if d.status == "succeeded" else 500, duration_ms=80,
                        error="" if d.status == "succeeded" else "http_error")
        for d in rows
    ])
    path = "/admin/webhooks/delivery/health/"
    log_in(browser, page_server, path)
    browser.screenshot(tmp_path / "board.png")

    section = f"#health-{hook.id}"
    assert browser.evaluate("document.querySelector('h1').innerText") == "Delivery health"
    # The chart is an SVG drawn by the server: as many bars as (hour, outcome) pairs with rows,
    # laid out at its size, the succeeded ones green and the dead letters red.
    bars = browser.evaluate(f"[...document.querySelectorAll('{section} svg.hourly rect.bar')]"
                            ".map(r => [getComputedStyle(r).fill, r.getBoundingClientRect().height])")
    fills = [fill for fill, _ in bars]
    assert fills.count("rgb(46, 125, 50)") == 10 and fills.count("rgb(198, 40, 40)") == 5, fills
    assert all(height > 0 for _, height in bars)
    box = browser.evaluate(f"(() => {{ const r = document.querySelector('{section} svg.hourly')"
                           ".getBoundingClientRect(); return [r.width, r.height]; })()")
    assert box[0] >= 300 and box[1] >= 60
    assert browser.evaluate(f"document.querySelector('{section} .total').innerText") == str(len(rows))
    assert "p50 ≤ 100 ms" in browser.evaluate(f"document.querySelector('{section} .durations').innerText")
    assert browser.evaluate(f"document.querySelector('{section} .dead-letters').innerText") == "5"
    assert "http_error (HTTP 500)" in browser.evaluate(f"document.querySelector('{section} .last-error').innerText")
    assert "no deliveries in 24 h" in browser.evaluate("document.body.innerText")  # the quiet hook
    # Nothing was fetched from anywhere but this server, and the page has no script of its own.
    sources = browser.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert all(s.startswith(page_server.url) for s in sources), sources
    assert browser.evaluate("document.querySelectorAll('#content-main script').length") == 0
    assert browser.computed("#header", "background-color") == "rgb(65, 118, 144)"  # admin CSS applied
    measured = sideways(browser)
    assert measured["doc"] <= measured["inner"], measured

    # The filter: one endpoint.
    browser.submit(f"document.querySelector('#board-endpoint').value = {json.dumps(hook.id)};"
                   "document.querySelector('.board-filters').submit();")
    assert browser.evaluate("document.querySelectorAll('section.endpoint-health').length") == 1
    # The dead letters link opens the changelist filtered to them.
    browser.submit(f"document.querySelector('{section} .dead-letters').click();")
    assert browser.evaluate("location.pathname") == "/admin/webhooks/delivery/"
    statuses = browser.evaluate("[...document.querySelectorAll('#result_list td.field-status')].map(e => e.innerText)")
    assert statuses == ["Dead Letter"] * 5 or statuses == ["dead_letter"] * 5, statuses
    browser.screenshot(tmp_path / "board-dead-letters.png")


def test_deliveries_changelist_fits_1280px(page_server, browser, tmp_path, staff_member):
    now = timezone.now()
    hooks = [endpoint(staff_member, f"{'very long endpoint name ' * 8}{i}") for i in range(3)]
    Delivery.objects.bulk_create([
        Delivery(id=f"dlv_{i:04d}" + "w" * 32, workspace_id=staff_member.workspace_id, endpoint=hooks[i % 3],
                 event_id=f"evt_{i}", event_type="transcript.segments_appended" + "_x" * 6, body="{}",
                 status=["retrying", "dead_letter", "succeeded"][i % 3], attempt_count=i % 8,
                 last_http_status=503, is_dead_letter=i % 3 == 1,
                 next_attempt_at=now + timedelta(minutes=i) if i % 3 == 0 else None,
                 created_at=now - timedelta(seconds=i), updated_at=now)
        for i in range(150)
    ])
    path = "/admin/webhooks/delivery/"
    log_in(browser, page_server, path)
    browser.screenshot(tmp_path / "deliveries.png")

    assert browser.evaluate("window.innerWidth") == 1280
    assert browser.evaluate("document.querySelectorAll('#result_list tbody tr').length") == 100
    headers = browser.evaluate("[...document.querySelectorAll('#result_list thead th')].map(e => e.innerText.trim())")
    for column in ("DELIVERY", "ENDPOINT", "STATUS", "EVENT TYPE", "ATTEMPTS", "HTTP", "NEXT ATTEMPT", "CREATED"):
        assert column in [h.split("\n")[-1].upper() for h in headers], headers
    # No sideways scrolling: not the page, not the table's own scrolling box.
    measured = sideways(browser)
    assert measured["doc"] <= measured["inner"] and measured["results"] <= measured["resultsBox"], measured
    # Every column is on screen, and the long id and name are cut, their full text in the title.
    right = browser.evaluate("Math.max(...[...document.querySelectorAll('#result_list tr:first-child > *')]"
                             ".map(e => e.getBoundingClientRect().right))")
    assert right <= 1280
    first = browser.evaluate("(() => { const e = document.querySelector('#result_list tbody .field-delivery_id .clip');"
                             " return [e.title, e.scrollWidth > e.clientWidth]; })()")
    assert first[0].startswith("dlv_") and len(first[0]) == 40 and first[1]
    cells = browser.evaluate("[...document.querySelectorAll('#result_list tbody tr:first-child td')]"
                             ".map(e => e.innerText.trim())")
    assert "503" in cells and any(c.startswith(str(now.year)) for c in cells), cells
