"""`GET /api/v1/events` and `GET /api/v1/events/{id}`: the workspace's event log, each item the
stream's envelope plus its id; scopes per type; another workspace's sessions and events give
nothing; every 400 names its parameter; `after` past retention is `410 resync_required`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from apps.events.models import Event
from apps.events.representations import event_envelope
from apps.recordings import services as recordings
from tests import factories
from tests.factories import aged_event
from tests.servers import wait_until

URL = "/api/v1/events"
SEGMENT, CREATED, CHANGED = "transcript.segment.created", "session.created", "session.status_changed"


def page(api, key, **params):
    response = api.get(URL, key, **params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"items", "nextCursor"} and body["nextCursor"]
    return body


def test_items_are_the_stream_envelope_plus_the_id_in_log_order(api, acme, alice_key):
    session = factories.session(acme, committed=["one", "two"])
    recordings.change_session_status(session=session, status="completed")
    body = page(api, alice_key)
    logged = list(Event.objects.filter(workspace=acme).order_by("position", "id"))
    assert [item["id"] for item in body["items"]] == [e.id for e in logged]
    assert [item["type"] for item in body["items"]] == [CREATED, SEGMENT, SEGMENT, CHANGED]
    for item, event in zip(body["items"], logged):
        assert {k: v for k, v in item.items() if k != "id"} == event_envelope(event)
        assert list(item) == ["id", "type", "sessionId", "occurredAt", "data"]


# Committed writes: on PostgreSQL a poller's cursor is real only across transactions.
@pytest.mark.django_db(transaction=True)
def test_a_poller_gets_nothing_until_something_new_commits_then_exactly_that(api, acme, alice_key):
    factories.session(acme)
    # On PostgreSQL a transaction elsewhere in the cluster (another test run, a bulk load) may hold
    # the log's horizon below even the first event for a while: it comes later, never skipped.
    first = wait_until(lambda: (body := page(api, alice_key))["items"] and body, what="the first event", timeout=120)
    assert len(first["items"]) == 1
    empty = page(api, alice_key, after=first["nextCursor"])
    assert empty["items"] == [] and empty["nextCursor"]
    again = page(api, alice_key, after=empty["nextCursor"])
    assert again["items"] == []
    new = factories.session(acme)
    # On PostgreSQL another transaction of the cluster (another test run) may hold the log's
    # horizon below it for a moment: the poller then gets it on a later call, never skips it.
    after = wait_until(lambda: page(api, alice_key, after=again["nextCursor"])["items"], what="the new event",
                       timeout=120)
    assert [(i["type"], i["sessionId"]) for i in after] == [(CREATED, new.id)]


# Committed writes: on PostgreSQL a poller's cursor is real only across transactions.
@pytest.mark.django_db(transaction=True)
def test_an_empty_log_still_gives_a_cursor_to_poll_from(api, acme, alice_key):
    body = page(api, alice_key)
    assert body["items"] == []
    factories.session(acme)
    items = wait_until(lambda: page(api, alice_key, after=body["nextCursor"])["items"], what="the event", timeout=120)
    assert len(items) == 1


def test_limit_pages_through_the_log_and_after_takes_an_event_id_too(api, acme, alice_key):
    for _ in range(5):
        factories.session(acme)
    ids = [e.id for e in Event.objects.filter(workspace=acme).order_by("position", "id")]
    seen, cursor = [], None
    while True:
        body = page(api, alice_key, limit=2, **({"after": cursor} if cursor else {}))
        if not body["items"]:
            break
        seen += [i["id"] for i in body["items"]]
        cursor = body["nextCursor"]
    assert seen == ids
    assert [i["id"] for i in page(api, alice_key, after=ids[1])["items"]] == ids[2:]
    assert page(api, alice_key)["items"][0]["id"] == ids[0]  # default limit 20: from the oldest


def test_type_and_session_filters(api, acme, alice_key):
    watched = factories.session(acme, committed=["a"])
    factories.session(acme, committed=["b"])
    body = page(api, alice_key, type=SEGMENT, sessionId=watched.id)
    assert [(i["type"], i["data"]["text"]) for i in body["items"]] == [(SEGMENT, "a")]
    both = page(api, alice_key, type=f"{CREATED},{CHANGED}")
    assert {i["type"] for i in both["items"]} == {CREATED}
    repeated = api.get(URL, alice_key, type=[CREATED, SEGMENT])
    assert len(repeated.json()["items"]) == 4


def test_without_type_the_log_carries_every_type_the_scopes_allow(api, acme, alice):
    factories.session(acme, committed=["a"])
    sessions_only = factories.api_key(alice, ["svc:sessions:read"])
    assert {i["type"] for i in page(api, sessions_only)["items"]} == {CREATED}
    transcripts_only = factories.api_key(alice, ["svc:transcripts:read"])
    assert {i["type"] for i in page(api, transcripts_only)["items"]} == {SEGMENT}


@pytest.mark.parametrize(
    "scopes, params",
    [
        (["svc:sessions:read"], {"type": SEGMENT}),
        (["svc:transcripts:read"], {"type": CHANGED}),
        (["svc:sessions:read"], {"type": f"{CREATED},{SEGMENT}"}),
        (["svc:boards:read"], {}),
    ],
)
def test_a_type_the_scopes_do_not_allow_is_insufficient_scope(api, acme, alice, scopes, params):
    key = factories.api_key(alice, scopes)
    response = api.get(URL, key, **params)
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"


@pytest.mark.parametrize(
    "params, detail",
    [
        ({"limit": "0"}, "limit: must be an integer from 1 to 100"),
        ({"limit": "101"}, "limit: must be an integer from 1 to 100"),
        ({"limit": "ten"}, "limit: must be an integer from 1 to 100"),
        ({"type": "board.updated"}, "type: each must be one of session.created, session.status_changed, "
                                    "transcript.segment.created"),
        ({"after": "nope"}, "after: must be an evt_ id or a nextCursor from this endpoint"),
        ({"after": "pos_%%%"}, "after: not a position this service wrote"),
        ({"after": "pos_" + "A" * 20}, "after: not a position this service wrote"),
        ({"after": "evt_" + "0" * 27}, "after: must be an evt_ id or a nextCursor from this endpoint"),
        ({"after": ""}, "after: must be 1 to 120 characters"),
        ({"sessionId": ""}, "sessionId: must be 1 to 200 characters"),
    ],
)
def test_bad_parameters_are_invalid_request_naming_the_parameter(api, acme, alice_key, params, detail):
    response = api.get(URL, alice_key, **params)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request" and response.json()["detail"] == detail


def test_another_workspaces_session_and_event_give_nothing(api, acme, globex, alice_key, bob_key):
    theirs = factories.session(globex, committed=["secret"])
    mine = factories.session(acme)
    assert page(api, alice_key, sessionId=theirs.id)["items"] == []
    their_event = Event.objects.filter(workspace=globex).first()
    response = api.get(URL, alice_key, after=their_event.id)
    assert response.status_code == 400 and response.json()["detail"] == "after: no such event in this workspace's log"
    assert api.get(f"{URL}/{their_event.id}", alice_key).status_code == 404
    assert [i["sessionId"] for i in page(api, alice_key)["items"]] == [mine.id]
    assert {i["sessionId"] for i in page(api, bob_key)["items"]} == {theirs.id}


def test_a_cursor_from_another_workspace_or_forged_reads_only_the_callers_log(api, acme, globex, alice_key, bob_key):
    """A `pos_` cursor carries no workspace: it only says where in the caller's own log to start.
    Bob's cursor, or one forged at the very start, gives Alice her events and none of Globex's."""
    from apps.events.positions import Position, encode_position
    from apps.events.retention import now_ms

    start = encode_position(Position(0, "", now_ms()))  # forged: the start of any log, within retention
    mine_before = factories.session(acme, committed=["mine before"])
    theirs = factories.session(globex, committed=["theirs"])
    bobs_cursor = page(api, bob_key, limit=1)["nextCursor"]  # Globex's first event
    mine_after = factories.session(acme, committed=["mine after"])
    for cursor in (bobs_cursor, start):
        items = page(api, alice_key, after=cursor, limit=100)["items"]
        assert items and {i["sessionId"] for i in items} <= {mine_before.id, mine_after.id}
        assert theirs.id not in {i["sessionId"] for i in items}
        assert mine_after.id in {i["sessionId"] for i in items}
    # And the other way: Alice's cursor in Bob's hands reads Globex's log only.
    alices_cursor = page(api, alice_key, limit=1)["nextCursor"]  # Alice's first event
    assert {i["sessionId"] for i in page(api, bob_key, after=start)["items"]} == {theirs.id}
    assert {i["sessionId"] for i in page(api, bob_key, after=alices_cursor)["items"]} == {theirs.id}


def test_the_scopes_hold_with_every_other_parameter(api, acme, alice):
    """`sessionId`, `after` and `limit` never widen what the scopes allow: a sessions-only key
    asking for one session's events gets its session events and none of its segments."""
    session = factories.session(acme, committed=["a", "b"])
    recordings.change_session_status(session=session, status="completed")
    sessions_only = factories.api_key(alice, ["svc:sessions:read"])
    transcripts_only = factories.api_key(alice, ["svc:transcripts:read"])
    first_segment = Event.objects.filter(workspace=acme, type=SEGMENT).order_by("position", "id").first()
    body = page(api, sessions_only, sessionId=session.id, after=first_segment.id, limit=100)
    assert [i["type"] for i in body["items"]] == [CHANGED]
    assert {i["type"] for i in page(api, transcripts_only, sessionId=session.id, limit=100)["items"]} == {SEGMENT}
    for key, denied in ((sessions_only, SEGMENT), (transcripts_only, CREATED)):
        response = api.get(URL, key, type=denied, sessionId=session.id, after=first_segment.id, limit=1)
        assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"


def test_one_event_reads_as_its_list_item(api, acme, alice, alice_key):
    factories.session(acme, committed=["a"])
    items = page(api, alice_key)["items"]
    for item in items:
        response = api.get(f"{URL}/{item['id']}", alice_key)
        assert response.status_code == 200 and response.json() == item
    assert api.get(f"{URL}/evt_unknown", alice_key).status_code == 404
    sessions_only = factories.api_key(alice, ["svc:sessions:read"])
    segment = next(i for i in items if i["type"] == SEGMENT)
    response = api.get(f"{URL}/{segment['id']}", sessions_only)
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"


@override_settings(CONNECT_EVENT_RETENTION_DAYS=30, CONNECT_SEGMENT_EVENT_RETENTION_HOURS=24)
def test_retention_boundaries(api, acme, alice_key):
    """An event past its type's retention reads 404 even before the purge deletes it; an
    `after` whose events may be purged for the requested types is 410 resync_required."""
    old_session = aged_event(acme, CREATED, timedelta(days=31))
    young_session = aged_event(acme, CREATED, timedelta(days=29))
    old_segment = aged_event(acme, SEGMENT, timedelta(hours=25))
    young_segment = aged_event(acme, SEGMENT, timedelta(hours=23))
    assert api.get(f"{URL}/{old_session.id}", alice_key).status_code == 404
    assert api.get(f"{URL}/{old_segment.id}", alice_key).status_code == 404
    assert api.get(f"{URL}/{young_session.id}", alice_key).status_code == 200
    assert api.get(f"{URL}/{young_segment.id}", alice_key).status_code == 200

    def status(after, **params):
        response = api.get(URL, alice_key, after=after, **params)
        assert response.status_code in (200, 410) and response.json().get("error", "resync_required") == "resync_required"
        return response.status_code

    assert status(old_session.id, type=CREATED) == 410
    assert status(young_session.id, type=CREATED) == 200
    # 29 days back is within the session events' retention but not the segments': segments
    # after it may be gone, so a reader of both must resync.
    assert status(young_session.id) == 410
    assert status(young_segment.id) == 200
    assert status(old_segment.id, type=SEGMENT) == 410
    # An id of a purged event (no row left) is told apart by its time only.
    Event.objects.filter(pk=old_session.pk).delete()
    assert status(old_session.id, type=CREATED) == 410


def test_the_purge_and_the_reader_agree(api, acme, alice_key):
    from apps.events.services import purge_events

    aged_event(acme, CREATED, timedelta(days=31))
    kept = aged_event(acme, CREATED, timedelta(days=1))
    purge_events()
    assert [i["id"] for i in page(api, alice_key)["items"]] == [kept.id]


def test_openapi_documents_both_paths_the_410_and_the_retention(client):
    doc = client.get("/openapi.json").json()
    listing = doc["paths"]["/api/v1/events"]["get"]
    single = doc["paths"]["/api/v1/events/{id}"]["get"]
    assert listing["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/EventPage"}
    assert "410" in listing["responses"] and "resync_required" in listing["responses"]["410"]["description"]
    for operation in (listing, single):
        assert "CONNECT_EVENT_RETENTION_DAYS" in operation["description"]
        assert "CONNECT_SEGMENT_EVENT_RETENTION_HOURS" in operation["description"]
    assert {p["name"] for p in listing["parameters"]} >= {"type", "sessionId", "after", "limit"}
    schemas = doc["components"]["schemas"]
    assert schemas["ResyncRequiredError"]["properties"]["error"] == {"type": "string", "const": "resync_required"}
    assert list(schemas["Event"]["properties"]) == ["id", "type", "sessionId", "occurredAt", "data"]
    assert schemas["EventPage"]["properties"]["nextCursor"]["type"] == "string"  # not nullable
    recover = doc["paths"]["/api/v1/webhooks/{id}/recover"]["post"]
    assert set(recover["responses"]) >= {"202", "400", "409"}
