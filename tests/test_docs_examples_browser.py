"""`/docs` as a person reads it, in headless Chromium against a live server: an operation's error
responses show examples of their own codes (Swagger UI otherwise makes one from the first branch
of the shared `Error` oneOf, `filter_cost_exceeded`, for every status)."""

from __future__ import annotations

import json

import pytest

from tests.browser import CHROMIUM, browser, page_server  # noqa: F401 - fixtures
from tests.servers import collected_static  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (.ci/run installs Debian's chromium)"),
]

OPERATION = "#operations-sessions-listSessions"


def shown_example(browser, status: int) -> dict:
    """The example body Swagger UI shows in the operation's response row for `status`."""
    row = f"{OPERATION} tr.response[data-code='{status}']"
    text = browser.wait_for(f"document.querySelector({json.dumps(row + ' .highlight-code')})?.innerText")
    return json.loads(text)


def test_the_401_of_list_sessions_shows_unauthorized(page_server, browser, tmp_path, transactional_db):
    browser.open(f"{page_server.url}/docs")
    summary = json.dumps(OPERATION + " .opblock-summary-control")
    browser.wait_for(f"document.querySelector({summary}) !== null")
    browser.evaluate(f"document.querySelector({summary}).click()")
    unauthorized = shown_example(browser, 401)
    assert unauthorized["error"] == "unauthorized" and unauthorized["detail"].startswith("Authorization: ")
    forbidden = shown_example(browser, 403)
    assert (forbidden["error"], forbidden["requiredScopes"]) == ("insufficient_scope", ["svc:sessions:read"])
    assert shown_example(browser, 404)["error"] == "not_found"
    assert shown_example(browser, 429)["error"] == "rate_limited"
    assert shown_example(browser, 400)["error"] == "invalid_request"
    page = browser.evaluate(f"document.querySelector({json.dumps(OPERATION)}).innerText")
    assert "filter_cost_exceeded" not in page
    browser.screenshot(tmp_path / "docs-list-sessions.png")
