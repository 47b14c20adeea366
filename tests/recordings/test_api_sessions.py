"""Contract §2.1 and §4.1: the session list and the single session."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from apps.core.cursors import CURSOR_DETAIL
from apps.recordings import services
from tests import factories

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SESSION_FIELDS = {"id", "label", "memo", "status", "startedAt", "endedAt", "createdAt", "updatedAt"}


def test_session_has_all_eight_fields_with_iso_ms_timestamps(api, acme, alice_key):
    session = factories.session(acme, label="Kickoff", committed=["hi"], completed=True)
    body = api.get(f"/api/v1/sessions/{session.id}", alice_key).json()
    assert set(body) == {"session"}
    item = body["session"]
    assert set(item) == SESSION_FIELDS
    assert item["id"] == session.id and item["label"] == "Kickoff" and item["status"] == "completed"
    for field in ("startedAt", "endedAt", "createdAt", "updatedAt"):
        assert ISO_MS.match(item[field]), item[field]


def test_nullable_fields_are_present_as_null(api, acme, alice_key):
    session = services.create_session(workspace=acme, label=None, memo=None)
    item = api.get(f"/api/v1/sessions/{session.id}", alice_key).json()["session"]
    assert item["label"] is None and item["memo"] is None and item["endedAt"] is None
    assert set(item) == SESSION_FIELDS


def test_unknown_session_is_not_found(api, alice_key):
    response = api.get("/api/v1/sessions/does-not-exist", alice_key)
    assert response.status_code == 404
    assert response.json() == {"error": "not_found"}


def test_list_is_newest_first_with_default_limit_20(api, acme, alice_key):
    created = factories.sessions_at_distinct_times(acme, 25)
    body = api.get("/api/v1/sessions", alice_key).json()
    assert set(body) == {"items", "nextCursor"}
    assert [s["id"] for s in body["items"]] == [s.id for s in reversed(created)][:20]
    assert isinstance(body["nextCursor"], str)


def test_last_page_has_null_cursor(api, acme, alice_key):
    factories.sessions_at_distinct_times(acme, 3)
    body = api.get("/api/v1/sessions", alice_key, limit="3").json()
    assert len(body["items"]) == 3 and body["nextCursor"] is None


def test_empty_workspace_lists_nothing(api, alice_key):
    assert api.get("/api/v1/sessions", alice_key).json() == {"items": [], "nextCursor": None}


@pytest.mark.parametrize("limit", ["0", "101", "-1", "abc", "1.5", "10.0", "", " 5", "1e1"])
def test_invalid_limit_is_invalid_request(api, alice_key, limit):
    response = api.get("/api/v1/sessions", alice_key, limit=limit)
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "detail": "limit: must be an integer from 1 to 100"}


@pytest.mark.parametrize("limit", ["1", "100"])
def test_limit_bounds_are_accepted(api, acme, alice_key, limit):
    factories.sessions_at_distinct_times(acme, 2)
    assert api.get("/api/v1/sessions", alice_key, limit=limit).status_code == 200


@pytest.mark.parametrize("cursor", ["", "garbage", "eyJ3IjoiYSJ9:xx:yy"])
def test_bad_cursor_is_invalid_request(api, alice_key, cursor):
    response = api.get("/api/v1/sessions", alice_key, cursor=cursor)
    assert response.status_code == 400
    detail = "cursor: must not be empty" if cursor == "" else CURSOR_DETAIL
    assert response.json() == {"error": "invalid_request", "detail": detail}


def test_tampered_cursor_is_invalid_request(api, acme, alice_key):
    factories.sessions_at_distinct_times(acme, 3)
    cursor = api.get("/api/v1/sessions", alice_key, limit="1").json()["nextCursor"]
    tampered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    assert api.get("/api/v1/sessions", alice_key, cursor=tampered).json() == {"error": "invalid_request", "detail": CURSOR_DETAIL}


def test_cursor_of_another_workspace_is_invalid_request(api, acme, globex, alice_key, bob_key):
    factories.sessions_at_distinct_times(globex, 3)
    foreign = api.get("/api/v1/sessions", bob_key, limit="1").json()["nextCursor"]
    response = api.get("/api/v1/sessions", alice_key, cursor=foreign)
    assert response.status_code == 400 and response.json() == {"error": "invalid_request", "detail": CURSOR_DETAIL}


def test_cursor_of_another_listing_is_invalid_request(api, acme, alice_key):
    from apps.core.cursors import encode_cursor

    cursor = encode_cursor("search", acme.id, ["2026-01-01T00:00:00+00:00", "x"])
    assert api.get("/api/v1/sessions", alice_key, cursor=cursor).status_code == 400


def test_cursor_walk_sees_every_session_exactly_once_while_sessions_are_added(api, acme, alice_key):
    # Several sessions share a created_at, so the id tie-break of the keyset is exercised too.
    base = datetime(2026, 3, 1, tzinfo=timezone.utc)
    existing = {
        services.create_session(workspace=acme, label=f"s{i}", at=base + timedelta(seconds=i // 3)).id
        for i in range(47)
    }
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "5", **({"cursor": cursor} if cursor else {})}
        body = api.get("/api/v1/sessions", alice_key, **params).json()
        seen += [s["id"] for s in body["items"]]
        pages += 1
        services.create_session(workspace=acme, label=f"new during page {pages}")
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)), "a session was seen twice"
    assert existing <= set(seen), "a session was skipped"
    assert pages == 10


def test_unknown_query_parameters_are_ignored(api, acme, alice_key):
    factories.sessions_at_distinct_times(acme, 1)
    assert api.get("/api/v1/sessions", alice_key, foo="bar").status_code == 200
