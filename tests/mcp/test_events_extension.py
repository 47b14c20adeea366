"""The MCP Events extension (`io.modelcontextprotocol/events`) against a live `manage.py serve`,
over real HTTP JSON-RPC in both protocol generations: its declaration, `events/list` from the
wire-shape declarations, `events/poll` page by page against REST's `GET /api/v1/events` (same
events, same order), the `maxAgeMs` floor, scopes, tenancy and every bad parameter."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from apps.events.shapes import DATA_SHAPES
from apps.recordings import services
from tests import factories

MODERN, LEGACY = "2026-07-28", "2025-11-25"
ERAS = [MODERN, LEGACY]
SEGMENT = "transcript.segment.created"


@pytest.fixture
def data(live_server_daphne, transactional_db, alice, bob):
    acme = alice.workspace
    factories.session(acme, label="Before", committed=["history"])
    return {
        "url": live_server_daphne.url,
        "key": factories.api_key(alice, factories.READ_SCOPES),
        "sessions_only_key": factories.api_key(alice, ["svc:sessions:read"]),
        "acme": acme,
        "secret": factories.session(bob.workspace, label="Secret", committed=["budget secrets"]),
    }


def rpc(data: dict, version: str, method: str, params: dict | None = None, *, key: str | None = None) -> httpx.Response:
    params = dict(params or {})
    headers = {"Authorization": f"Bearer {key or data['key']}", "MCP-Protocol-Version": version,
               "Accept": "application/json"}
    if version == MODERN:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
        headers["Mcp-Method"] = method
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(f"{data['url']}/mcp", json=body, headers=headers, timeout=20)


def result(data: dict, version: str, method: str, params: dict | None = None, **kwargs) -> dict:
    response = rpc(data, version, method, params, **kwargs)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def error(data: dict, version: str, method: str, params: dict | None = None, **kwargs) -> tuple[int, dict]:
    response = rpc(data, version, method, params, **kwargs)
    body = response.json()
    assert "result" not in body, body
    return response.status_code, body["error"]


def rest_log(data: dict, key: str | None = None, **params) -> tuple[list[dict], str]:
    """Every item of REST's log after `after` (all pages, until nothing committed is left
    unsettled: another database's transaction on the same PostgreSQL holds the horizon back for a
    moment), and the cursor at its end. Once REST has an event, a poll has it too."""
    items, params = [], {"limit": 100, **params}
    while True:
        response = httpx.get(f"{data['url']}/api/v1/events", params=params,
                             headers={"Authorization": f"Bearer {key or data['key']}"}, timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["items"]
        if not page["items"] and response.headers["Events-Unsettled"] == "false":
            return items, page["nextCursor"]
        params["after"] = page["nextCursor"]


def poll_all(data: dict, version: str, name: str, cursor: str, arguments: dict | None = None) -> list[dict]:
    """Follow `hasMore` from `cursor` two events at a time: the occurrences, in order."""
    occurrences = []
    while True:
        page = result(data, version, "events/poll",
                      {"name": name, "arguments": arguments or {}, "cursor": cursor, "maxEvents": 2})
        assert len(page["events"]) <= 2 and page["truncated"] is False
        occurrences += page["events"]
        cursor = page["cursor"]
        if not page["hasMore"]:
            assert page["nextPollMs"] > 0
            return occurrences
        assert page["nextPollMs"] == 0


def as_rest_items(occurrences: list[dict], session_id: str | None = None) -> list[dict]:
    return [{"id": o["eventId"], "type": o["name"], "sessionId": o["data"]["sessionId"],
             "occurredAt": o["timestamp"], "data": o["data"]} for o in occurrences]


@pytest.mark.parametrize("version", ERAS)
def test_the_extension_is_declared_in_capabilities(data, version):
    if version == MODERN:
        capabilities = result(data, MODERN, "server/discover")["capabilities"]
    else:
        capabilities = result(data, LEGACY, "initialize", {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})["capabilities"]
    assert capabilities["extensions"] == {"io.modelcontextprotocol/events": {"listChanged": False}}
    assert capabilities["tools"] == {"listChanged": False}


@pytest.mark.parametrize("version", ERAS)
def test_events_list_describes_the_three_types_from_their_declarations(data, version):
    events = result(data, version, "events/list")["events"]
    assert [e["name"] for e in events] == ["session.created", "session.status_changed", SEGMENT]
    assert [e["delivery"] for e in events] == [["poll", "push", "webhook"], ["poll", "push", "webhook"], ["poll", "push"]]
    for descriptor in events:
        assert descriptor["payloadSchema"] == DATA_SHAPES[descriptor["name"]].json_schema(portable=True)
        assert descriptor["inputSchema"]["properties"]["sessionId"]["type"] == "string"
        assert descriptor["inputSchema"]["additionalProperties"] is False
    assert [e["inputSchema"]["required"] for e in events] == [[], [], ["sessionId"]]


def test_events_list_shows_only_the_types_the_scopes_allow(data):
    events = result(data, MODERN, "events/list", key=data["sessions_only_key"])["events"]
    assert [e["name"] for e in events] == ["session.created", "session.status_changed"]


@pytest.mark.parametrize("version", ERAS)
def test_poll_pages_are_the_rest_log_same_events_same_order(data, version):
    _, start = rest_log(data)
    acme = data["acme"]
    first = factories.session(acme, label="One", committed=["a", "b", "c"])
    second = factories.session(acme, label="Two", committed=["d"])
    services.change_session_status(session=first, status="completed")
    factories.session(acme, label="Three", completed=True)
    services.append_committed_segments(session=first, segments=factories.segments(["e", "f"]))

    for name in ("session.created", "session.status_changed"):
        rest, _ = rest_log(data, after=start, type=name)
        assert len(rest) >= 2
        assert as_rest_items(poll_all(data, version, name, start)) == rest
    for session in (first, second):
        rest, _ = rest_log(data, after=start, type=SEGMENT, sessionId=session.id)
        polled = poll_all(data, version, SEGMENT, start, {"sessionId": session.id})
        assert as_rest_items(polled) == rest and len(rest) == (5 if session is first else 1)


@pytest.mark.parametrize("version", ERAS)
def test_a_null_cursor_starts_from_now_and_then_sees_what_follows(data, version):
    rest_log(data)  # "now" is the log's settled end: the fixture's events are behind it
    page = result(data, version, "events/poll", {"name": "session.created", "cursor": None, "maxAgeMs": 86_400_000})
    assert page["events"] == [] and page["hasMore"] is False and page["truncated"] is False
    created = factories.session(data["acme"], label="Later")
    rest_log(data)
    # An absent cursor is a null one.
    assert result(data, version, "events/poll", {"name": "session.created"})["events"] == []
    later = result(data, version, "events/poll", {"name": "session.created", "cursor": page["cursor"]})
    assert [(o["name"], o["data"]["sessionId"]) for o in later["events"]] == [("session.created", created.id)]
    quiet = result(data, version, "events/poll", {"name": "session.created", "cursor": later["cursor"]})
    assert quiet["events"] == [] and quiet["cursor"]


def test_max_age_ms_skips_older_events_and_says_so(data):
    rest_log(data)
    start = result(data, MODERN, "events/poll", {"name": "session.created"})["cursor"]
    factories.aged_event(data["acme"], "session.created", timedelta(hours=2), session_id="old")
    fresh = factories.session(data["acme"], label="Fresh")
    rest_log(data)
    page = result(data, MODERN, "events/poll", {"name": "session.created", "cursor": start, "maxAgeMs": 3_600_000})
    assert [o["data"]["sessionId"] for o in page["events"]] == [fresh.id]
    assert page["truncated"] is True
    whole = result(data, MODERN, "events/poll", {"name": "session.created", "cursor": start})
    assert [o["data"]["sessionId"] for o in whole["events"]] == ["old", fresh.id] and whole["truncated"] is False


@pytest.mark.parametrize("version", ERAS)
def test_another_workspaces_session_yields_nothing_as_the_log_does(data, version):
    secret = data["secret"].id
    assert rest_log(data, type=SEGMENT, sessionId=secret)[0] == []
    page = result(data, version, "events/poll", {"name": SEGMENT, "arguments": {"sessionId": secret}, "cursor": None})
    events = poll_all(data, version, SEGMENT, page["cursor"], {"sessionId": secret})
    services.append_committed_segments(session=data["secret"], segments=factories.segments(["more secrets"]))
    events += poll_all(data, version, SEGMENT, page["cursor"], {"sessionId": secret})
    assert events == []


@pytest.mark.parametrize("version", ERAS)
def test_a_type_outside_the_scopes_is_forbidden(data, version):
    status, err = error(data, version, "events/poll", {"name": SEGMENT, "arguments": {"sessionId": "s"}},
                        key=data["sessions_only_key"])
    assert (status, err["code"]) == (403, -32012)  # a scope refusal is HTTP 403 in both generations
    assert err["data"] == {"error": "insufficient_scope", "scope": "svc:transcripts:read"}


BAD_PARAMS = [
    ({"cursor": None}, "params.name is required"),
    ({"name": "session.created", "maxEvents": 0}, "params.maxEvents must be an integer of at least 1"),
    ({"name": "session.created", "maxEvents": "5"}, "params.maxEvents must be an integer of at least 1"),
    ({"name": "session.created", "maxAgeMs": -1}, "params.maxAgeMs must be an integer of at least 0"),
    ({"name": "session.created", "cursor": "pos_!!"}, "params.cursor: not a position this service wrote"),
    ({"name": "session.created", "cursor": "evt_x"}, "params.cursor: not a cursor this server wrote"),
    ({"name": "session.created", "cursor": 5}, "params.cursor must be a cursor from a previous events/poll"),
    ({"name": "session.created", "arguments": []}, "params.arguments must be an object"),
    ({"name": "session.created", "arguments": {"sessionId": 12345}}, "params.arguments.sessionId must be a non-empty"),
    ({"name": "session.created", "arguments": {"room": "x"}}, "params.arguments.room is not an argument"),
    ({"name": SEGMENT, "arguments": {}}, "params.arguments.sessionId is required"),
]


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize(("params", "message"), BAD_PARAMS)
def test_bad_params_are_invalid_params_saying_what_was_wrong(data, version, params, message):
    status, err = error(data, version, "events/poll", params)
    assert err["code"] == -32602 and err["message"].startswith(message), err
    assert status == (400 if version == MODERN else 200)


@pytest.mark.parametrize("version", ERAS)
def test_an_unknown_event_type_is_not_found(data, version):
    status, err = error(data, version, "events/poll", {"name": "meeting.exploded", "cursor": None})
    assert (status, err["code"], err["data"]) == (200, -32011, {"name": "meeting.exploded"})


@pytest.mark.parametrize("version", ERAS)
def test_webhook_delivery_is_not_offered_for_segments(data, version):
    # Push (events/stream) is a stream: tests/mcp/test_listen.py; webhooks: test_events_subscribe.py.
    status, err = error(data, version, "events/subscribe", {"name": SEGMENT, "arguments": {"sessionId": "x"}})
    assert err["code"] == -32014 and "webhook" in err["message"]
