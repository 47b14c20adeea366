"""Internal events (a final revision, board versions, a session's fields edited) are rows of the
log that no public reader shows: with them in the log, the REST log (pages, cursors, filters,
one event), the SSE stream and its resume, webhooks and their recover, the MCP events extension
(list, poll, stream) and the purge's count show exactly the public events, as before."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from apps.events import filters
from apps.events.models import Event, EventType
from apps.events.services import purge_events
from apps.recordings import services as recordings
from apps.tenancy.services import issue_api_key
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.events.live import Reader
from tests.mcp.streams import StreamReader, events_body

SESSION_TYPES = [EventType.SESSION_CREATED.value, EventType.SESSION_STATUS_CHANGED.value]


def meeting_with_internal_events(ws):
    """A session's life with every kind of internal event between public ones, ending with a
    public event after the last internal one."""
    meeting = factories.session(ws, committed=["one"])
    recordings.publish_board(session=meeting, board_id="summary", payload={"v": 1}, source_revision_kind="committed")
    recordings.append_committed_segments(session=meeting, segments=factories.segments(["two"]))
    recordings.update_session(session=meeting, label="Renamed")
    recordings.change_session_status(session=meeting, status="completed")
    recordings.write_final_transcript(session=meeting, segments=factories.segments(["One.", "Two."]))
    recordings.publish_board(session=meeting, board_id="summary", payload={"v": 2}, source_revision_kind="final")
    factories.session(ws)
    return meeting


def log(ws, types, session_id: str | None = None) -> list[str]:
    events = Event.objects.filter(workspace=ws, type__in=list(types))
    if session_id is not None:
        events = events.filter(session_id=session_id)
    return list(events.order_by("position", "id").values_list("id", flat=True))


def get(client, key: str, path: str, **params):
    return client.get(path, params, headers={"Authorization": f"Bearer {key}"})


# --- REST: the log, its cursors, one event ---------------------------------------------------------

def test_the_rest_log_pages_public_events_only_and_its_cursors_cross_internal_ones(acme, alice_key):
    meeting = meeting_with_internal_events(acme)
    public, internal = log(acme, EventType.values), log(acme, filters.INTERNAL_TYPES)
    everything = log(acme, [*EventType.values, *filters.INTERNAL_TYPES])
    assert len(internal) == 4 and len(everything) == len(public) + 4
    client = Client()
    assert [i["id"] for i in get(client, alice_key, "/api/v1/events").json()["items"]] == public

    for limit in (1, 2, 3):  # pages ending on either side of internal rows
        seen, cursor = [], None
        while True:
            body = get(client, alice_key, "/api/v1/events", limit=limit, **({"after": cursor} if cursor else {})).json()
            if not body["items"]:
                break
            seen += [i["id"] for i in body["items"]]
            cursor = body["nextCursor"]
        assert seen == public
    for internal_id in internal:  # an internal id (a listen notification's) is a place in the log
        later = [i for i in everything[everything.index(internal_id) + 1:] if i in public]
        body = get(client, alice_key, "/api/v1/events", after=internal_id).json()
        assert [i["id"] for i in body["items"]] == later
        missing = get(client, alice_key, f"/api/v1/events/{internal_id}")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert get(client, alice_key, f"/api/v1/events/{public[0]}").status_code == 200
    by_session = get(client, alice_key, "/api/v1/events", sessionId=meeting.id).json()["items"]
    assert [i["id"] for i in by_session] == log(acme, EventType.values, meeting.id)
    refused = get(client, alice_key, "/api/v1/events", type="board.version.created")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_request"


# --- webhooks ---------------------------------------------------------------------------------------

def test_webhooks_queue_and_recover_public_events_only(alice, alice_key):
    now = timezone.now()
    key = issue_api_key(membership=alice, scopes=["svc:sessions:read"], name="hooks").api_key
    endpoint = WebhookEndpoint.objects.create(
        workspace=alice.workspace, name="all", url="https://hooks.example.com/in",
        filters=[{"type": t} for t in SESSION_TYPES], active=True, created_at=now - timedelta(days=1),
        updated_at=now, created_by=alice, credential_kind="api_key", credential_id=str(key.pk),
    )
    meeting_with_internal_events(alice.workspace)
    delivered = set(Delivery.objects.filter(endpoint=endpoint).values_list("event_id", flat=True))
    assert delivered == set(log(alice.workspace, SESSION_TYPES))
    response = Client().post(f"/api/v1/webhooks/{endpoint.id}/recover",
                             json.dumps({"since": (now - timedelta(hours=1)).isoformat()}),
                             content_type="application/json", headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 202 and response.json() == {"queued": 0, "more": False}


# --- retention ---------------------------------------------------------------------------------------

def test_the_purge_deletes_internal_events_past_their_retention_and_counts_public_ones(acme, settings):
    settings.CONNECT_EVENT_RETENTION_DAYS, settings.CONNECT_SEGMENT_EVENT_RETENTION_HOURS = 30, 24
    factories.aged_event(acme, EventType.SESSION_CREATED, timedelta(days=31))
    for internal_type in sorted(filters.INTERNAL_TYPES):
        factories.aged_event(acme, internal_type, timedelta(hours=25))
    kept = factories.aged_event(acme, filters.BOARD_VERSION_CREATED, timedelta(hours=23))
    newest = factories.aged_event(acme, EventType.SESSION_CREATED, timedelta(0))
    assert purge_events() == 1  # the public one; the internal ones go uncounted
    assert set(Event.objects.values_list("id", flat=True)) == {kept.id, newest.id}


# --- live: the SSE stream, its resume, the MCP events extension ---------------------------------------

@pytest.mark.django_db(transaction=True)
def test_the_stream_its_resume_and_the_events_extension_show_public_events_only(live_server_daphne, acme, alice):
    url, key = live_server_daphne.url, factories.api_key(alice, factories.READ_SCOPES)
    rpc_headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": "2025-11-25",
                   "Accept": "application/json"}

    def rpc(method: str, params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = httpx.post(f"{url}/mcp", json=body, headers=rpc_headers, timeout=20)
        assert response.status_code == 200 and "result" in response.json(), response.text
        return response.json()["result"]

    start = {t: rpc("events/poll", {"name": t, "arguments": {}, "cursor": None})["cursor"] for t in SESSION_TYPES}
    live = Reader(url, key)
    pushed = StreamReader(url, key, events_body(2, name="session.status_changed", modern=False),
                          extra_headers={"version": "2025-11-25"})
    try:
        assert live.status == 200 and pushed.status == 200
        pushed.wait_for("notifications/events/active", 1)
        meeting_with_internal_events(acme)
        public = log(acme, EventType.values)
        sessions = log(acme, SESSION_TYPES)
        live.wait(lambda r: [e.id for e in r.events] == sessions, what="the session events, and nothing else")
        assert live.types() == ["session.created", "session.status_changed", "session.created"]
        changed = pushed.wait_for("notifications/events/event", 1)
        assert [m["params"]["eventId"] for m in changed] == log(acme, [SESSION_TYPES[1]])

        every_type = [{"type": t} for t in SESSION_TYPES]
        meeting = Event.objects.get(id=public[0]).session_id
        every_type.append({"type": EventType.TRANSCRIPT_SEGMENT_CREATED, "sessionId": meeting})
        resumed = Reader(url, key, params={"filters": json.dumps(every_type)}, last_event_id=public[0])
        try:
            resumed.wait(lambda r: len(r.events) >= len(public) - 1, what="the replay")
            assert [e.id for e in resumed.events] == public[1:]
        finally:
            resumed.close()
    finally:
        live.close()
        pushed.close()

    listed = rpc("events/list", {})
    assert {e["name"] for e in listed["events"]} == set(filters.TYPE_SCOPES)
    for event_type in SESSION_TYPES:
        polled, cursor = [], start[event_type]
        while True:  # a page at a time, across the internal rows
            page = rpc("events/poll", {"name": event_type, "arguments": {}, "cursor": cursor, "maxEvents": 1})
            if not page["events"]:
                break
            polled += [e["eventId"] for e in page["events"]]
            cursor = page["cursor"]
        assert polled == log(acme, [event_type])
