"""docs/api/sessions.md: the session list and the single session."""

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


# --- filters (issue 23 point 5: extensions) -------------------------------------------------

BASE = datetime(2026, 5, 1, tzinfo=timezone.utc)


def _statuses(acme) -> dict[str, list[str]]:
    """Twelve sessions a minute apart, statuses cycling recording, processing, completed, failed;
    their ids by status, newest first."""
    by_status: dict[str, list[str]] = {}
    for i, status in enumerate(["recording", "processing", "completed", "failed"] * 3):
        session = services.create_session(workspace=acme, label=f"s{i}", at=BASE + timedelta(minutes=i))
        if status != "recording":
            session = services.change_session_status(session=session, status=status)
        by_status.setdefault(status, []).insert(0, session.id)
    return by_status


def _walk(api, key, **params) -> list[str]:
    seen, cursor = [], None
    while True:
        body = api.get("/api/v1/sessions", key, limit="2", **params, **({"cursor": cursor} if cursor else {}))
        assert body.status_code == 200, body.content
        seen += [s["id"] for s in body.json()["items"]]
        cursor = body.json()["nextCursor"]
        if cursor is None:
            return seen


def test_status_filter_one_or_more_walks_every_page(api, acme, alice_key):
    ids = _statuses(acme)
    assert _walk(api, alice_key, status="completed") == ids["completed"]
    both = [i for i in _walk(api, alice_key, status=["completed", "failed"])]
    assert both == _walk(api, alice_key, status="failed,completed")  # repeated or comma-separated
    assert sorted(both) == sorted(ids["completed"] + ids["failed"]) and len(both) == 6
    items = api.get("/api/v1/sessions", alice_key, status="failed", limit="100").json()["items"]
    assert {item["status"] for item in items} == {"failed"}


def test_created_after_and_before_are_exclusive_to_the_millisecond(api, acme, alice_key):
    ids = [s.id for s in factories.sessions_at_distinct_times(acme, 6, start=BASE)]  # BASE + 0..5 min
    after = api.get("/api/v1/sessions", alice_key, createdAfter="2026-05-01T00:01:00Z").json()
    assert [s["id"] for s in after["items"]] == list(reversed(ids[2:]))
    window = _walk(api, alice_key, createdAfter="2026-05-01T00:01:00.000Z", createdBefore="2026-05-01T00:04:00Z")
    assert window == [ids[3], ids[2]]
    # An offset instead of Z is the same instant (`+` sent as %2B by the client).
    offset = api.get("/api/v1/sessions", alice_key, createdBefore="2026-05-01T02:01:00+02:00").json()
    assert [s["id"] for s in offset["items"]] == [ids[0]]


def test_created_after_a_listed_created_at_never_returns_that_session(api, acme, alice_key):
    """createdAt is on the wire in milliseconds, stored in microseconds: the filter compares
    what the client saw."""
    at = BASE + timedelta(microseconds=123_456)
    first = services.create_session(workspace=acme, label="a", at=at)
    second = services.create_session(workspace=acme, label="b", at=at + timedelta(microseconds=300))
    third = services.create_session(workspace=acme, label="c", at=at + timedelta(milliseconds=2))
    listed = api.get(f"/api/v1/sessions/{first.id}", alice_key).json()["session"]["createdAt"]
    assert listed == "2026-05-01T00:00:00.123Z"
    after = api.get("/api/v1/sessions", alice_key, createdAfter=listed).json()["items"]
    assert [s["id"] for s in after] == [third.id]  # `second` shows the same millisecond
    before = api.get("/api/v1/sessions", alice_key, createdBefore="2026-05-01T00:00:00.1235Z").json()["items"]
    assert {s["id"] for s in before} == {first.id, second.id}


def test_filters_combine(api, acme, alice_key):
    ids = _statuses(acme)  # completed at minutes 2, 6, 10
    body = api.get("/api/v1/sessions", alice_key, status="completed", createdAfter="2026-05-01T00:03:00Z",
                   createdBefore="2026-05-01T00:10:00Z").json()
    assert [s["id"] for s in body["items"]] == [ids["completed"][1]]


@pytest.mark.parametrize("params, detail", [
    ({"status": "done"}, "status: must be one or more of recording, processing, completed, failed "
                         "(repeated or comma-separated)"),
    ({"status": ""}, "status: must be one or more of recording, processing, completed, failed "
                     "(repeated or comma-separated)"),
    ({"status": "completed,"}, "status: must be one or more of recording, processing, completed, failed "
                               "(repeated or comma-separated)"),
    ({"createdAfter": "yesterday"}, "createdAfter: must be an ISO 8601 timestamp with a time zone, "
                                    "e.g. 2026-01-01T00:00:00Z"),
    ({"createdBefore": "2026-05-01T00:00:00"}, "createdBefore: must be an ISO 8601 timestamp with a time zone, "
                                               "e.g. 2026-01-01T00:00:00Z"),
    ({"createdAfter": ""}, "createdAfter: must be an ISO 8601 timestamp with a time zone, e.g. 2026-01-01T00:00:00Z"),
])
def test_invalid_filters_say_which_and_why(api, alice_key, params, detail):
    response = api.get("/api/v1/sessions", alice_key, **params)
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "detail": detail}


@pytest.mark.parametrize("first, then", [
    ({"status": "completed"}, {"status": "failed"}),
    ({"status": "completed"}, {}),
    ({}, {"status": "completed"}),
    ({"createdAfter": "2026-05-01T00:00:00Z"}, {"createdAfter": "2026-05-01T00:00:01Z"}),
    ({"createdBefore": "2026-05-01T01:00:00Z"}, {}),
    ({"status": "completed,failed"}, {"status": "completed"}),
])
def test_a_cursor_replayed_with_other_filters_is_400_naming_them(api, acme, alice_key, first, then):
    _statuses(acme)
    cursor = api.get("/api/v1/sessions", alice_key, limit="1", **first).json()["nextCursor"]
    assert cursor
    response = api.get("/api/v1/sessions", alice_key, cursor=cursor, **then)
    assert response.status_code == 400
    differ = sorted(first.keys() | then.keys())
    assert response.json() == {
        "error": "invalid_request",
        "detail": f"cursor: issued for other filters ({', '.join(differ)}); send it with the filters of the page "
                  "it came from, or start again without a cursor",
    }


def test_a_cursor_with_the_same_filters_spelled_otherwise_continues(api, acme, alice_key):
    ids = _statuses(acme)
    cursor = api.get("/api/v1/sessions", alice_key, limit="1", status="completed,failed",
                     createdAfter="2026-05-01T00:00:00Z").json()["nextCursor"]
    page = api.get("/api/v1/sessions", alice_key, limit="1", status=["failed", "completed", "failed"],
                   createdAfter="2026-05-01T02:00:00+02:00", cursor=cursor)
    assert page.status_code == 200, page.content
    assert page.json()["items"][0]["id"] == ids["completed"][0]


@pytest.mark.parametrize("params, detail", [
    ({"foo": "bar"}, "foo: unknown query parameter; the parameters are cursor, limit, status, createdAfter, "
                     "createdBefore"),
    ({"label": "x", "access_token": "y"}, "label, access_token: unknown query parameters; the parameters are "
                                          "cursor, limit, status, createdAfter, createdBefore"),
    ({"svc_" + "a" * 40: ""}, "1 more not shown: unknown query parameter; the parameters are cursor, limit, "
                              "status, createdAfter, createdBefore"),
    ({"Limit": "5"}, "Limit: unknown query parameter; the parameters are cursor, limit, status, createdAfter, "
                     "createdBefore"),
])
def test_unknown_query_parameters_are_400_naming_them(api, acme, alice_key, params, detail):
    factories.sessions_at_distinct_times(acme, 1)
    response = api.get("/api/v1/sessions", alice_key, **params)
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "detail": detail}
