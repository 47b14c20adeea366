"""`subscriptions/listen` and `events/stream` at /mcp, end to end: `manage.py serve` instances
(two sharing the database, and Redis when REDIS_URL is set) with the event stream's small limits,
the official MCP SDK's `Client.listen`, and raw HTTP/SSE readers for what the SDK does not show
(the frames, their ids, resuming, vanishing)."""

from __future__ import annotations

import json
import threading

import pytest

from apps.events.models import Event
from apps.recordings import services as recordings
from apps.stream import slots
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from tests import factories
from tests.events.live import Reader, abort, start_server, wait_until
from tests.events.test_stream_live import server_ends, wait_closed
from tests.mcp.test_live import client_for
from tests.mcp.streams import (
    SUBSCRIPTION_ID,
    UPDATED,
    StreamReader,
    events_body,
    listen_body,
    post,
    raw_listen,
    read_updates,
)

pytestmark = pytest.mark.django_db(transaction=True)

ACK = "notifications/subscriptions/acknowledged"


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("mcp-listen")
    a = start_server(log_dir)
    b = start_server(log_dir)
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture
def streams():
    opened: list[StreamReader] = []

    def open_stream(server, key, body, **extra_headers) -> StreamReader:
        reader = StreamReader(server.url, key, body, extra_headers=extra_headers)
        opened.append(reader)
        return reader

    yield open_stream
    for reader in opened:
        reader.close()


def uri(session, tail: str = "") -> str:
    return f"connect://sessions/{session.id}{tail}"


# --- what a listen stream carries --------------------------------------------------------------

def test_listen_acknowledges_then_notifies_in_log_order(servers, streams, acme, alice_key):
    a, _ = servers
    meeting, other = factories.session(acme), factories.session(acme)
    uris = [uri(meeting), uri(meeting, "/transcript?format=text"), uri(meeting, "/transcripts/final"),
            uri(meeting, "/boards/summary")]
    reader = streams(a, alice_key, listen_body("listen-7", uris=uris, list_changed=True, toolsListChanged=True))
    assert reader.status == 200 and reader.headers["content-type"].startswith("text/event-stream")
    ack = reader.wait_for(ACK, 1)[0]
    assert reader.messages[0] is ack and ack["params"]["_meta"] == {SUBSCRIPTION_ID: "listen-7"}
    # Every URI is honored (tests/mcp/test_listen_changes.py); the tools list is not.
    assert ack["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": uris}

    recordings.append_committed_segments(session=meeting, segments=factories.segments(["one", "two"]))
    recordings.append_committed_segments(session=other, segments=factories.segments(["not watched"]))
    recordings.change_session_status(session=meeting, status="processing")
    created = factories.session(acme)
    created_event = Event.objects.get(session_id=created.id).id
    reader.wait(lambda r: created_event in [m["_sse_id"] for m in r.of("notifications/resources/list_changed")],
                what="the new session's list_changed")
    updates = reader.of(UPDATED)
    assert [m["params"]["uri"] for m in updates] == [uris[1], uris[1], uris[0]]
    log = list(Event.objects.filter(session_id=meeting.id).exclude(type="session.created").order_by("position", "id")
               .values_list("id", flat=True))
    assert [m["_sse_id"] for m in updates] == log
    assert [m["params"]["_meta"]["svc/eventId"] for m in updates] == log
    assert all(m["params"]["_meta"][SUBSCRIPTION_ID] == "listen-7" for m in reader.messages)
    # Sessions created just before the stream opened may still come live (the log's horizon had
    # not passed them yet), as on the event stream; each list_changed is a session's creation.
    changed = [m["_sse_id"] for m in reader.of("notifications/resources/list_changed")]
    creations = set(Event.objects.filter(workspace=acme, type="session.created").values_list("id", flat=True))
    assert set(changed) <= creations and changed[-1] == created_event
    assert {m["method"] for m in reader.messages} == {ACK, UPDATED, "notifications/resources/list_changed"}


@pytest.fixture
def meeting(acme):
    return factories.session(acme)


@pytest.mark.anyio
async def test_the_official_sdk_listens_and_receives_updates(servers, meeting, alice_key):
    a, _ = servers
    transcript = uri(meeting, "/transcript")
    async with client_for(a.url, alice_key) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.resources.subscribe is True
        async with client.listen(resource_subscriptions=[transcript, uri(meeting, "/boards/b")]) as subscription:
            assert subscription.honored.resource_subscriptions == [transcript, uri(meeting, "/boards/b")]
            appended = threading.Thread(target=recordings.append_committed_segments,
                                        kwargs={"session": meeting, "segments": factories.segments(["live"])})
            appended.start()
            async for event in subscription:
                assert event.uri == transcript
                break
            appended.join()
        read = await client.read_resource(transcript)
        assert "live" in read.contents[0].text


@pytest.fixture
def anyio_backend():
    return "asyncio"


# --- scopes, tenancy, generations ------------------------------------------------------------------

def test_tenancy_and_scopes_on_listen_and_events_stream(servers, acme, alice, globex, alice_key):
    a, _ = servers
    foreign = factories.session(globex)
    refused = post(a.url, alice_key, listen_body(uris=[uri(foreign)]))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32602
    assert refused.json()["error"]["data"] == {"uri": uri(foreign)}
    assert post(a.url, alice_key, listen_body(uris=["https://example.com/x"])).json()["error"]["code"] == -32602

    sessions_only = factories.api_key(alice, ["svc:sessions:read"])
    mine = factories.session(acme)
    refused = post(a.url, sessions_only, listen_body(uris=[uri(mine, "/transcript")]))
    assert refused.status_code == 403
    assert refused.json()["error"]["data"]["error"] == "insufficient_scope"
    transcripts_only = factories.api_key(alice, ["svc:transcripts:read"])
    assert post(a.url, transcripts_only, listen_body(list_changed=True)).status_code == 403
    refused = post(a.url, sessions_only, events_body(name="transcript.segment.created",
                                                      arguments={"sessionId": mine.id}))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == -32012
    refused = post(a.url, alice_key, events_body(name="transcript.segment.created"))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32602
    assert post(a.url, None, listen_body()).status_code == 401
    assert post(a.url, factories.api_key(alice, ["svc:ingest:write"]), listen_body()).status_code == 403


def test_generations_say_what_they_offer(servers, alice_key):
    a, _ = servers
    legacy = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "connect://sessions/x"}}
    answer = post(a.url, alice_key, legacy, version="2025-11-25").json()
    assert answer["error"]["code"] == -32601 and "not offered" in answer["error"]["message"]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t",
                                                                                                  "version": "1"}}}
    capabilities = post(a.url, alice_key, initialize, version=None).json()["result"]["capabilities"]
    assert capabilities["resources"] == {"subscribe": False, "listChanged": False}
    body = listen_body()
    legacy_listen = {**body, "params": {"notifications": {}}}
    assert post(a.url, alice_key, legacy_listen, version="2025-11-25").json()["error"]["code"] == -32601
    discover = {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": body["params"]["_meta"]}}
    result = post(a.url, alice_key, discover).json()["result"]
    assert result["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}
    modern_subscribe = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe",
                        "params": {"_meta": body["params"]["_meta"], "uri": "connect://sessions/x"}}
    refused = post(a.url, alice_key, modern_subscribe, **{"Mcp-Name": "connect://sessions/x"})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == -32601


# --- bounds and ends -------------------------------------------------------------------------------

def test_a_revoked_key_ends_its_listen_stream_with_a_result(servers, streams, acme, alice):
    a, b = servers
    key = factories.api_key(alice, factories.READ_SCOPES)
    meeting = factories.session(acme)
    on_a = streams(a, key, listen_body(5, uris=[uri(meeting)]))
    on_b = streams(b, key, events_body(6, name="session.status_changed"))
    on_a.wait_for(ACK, 1), on_b.wait_for("notifications/events/active", 1)
    tenancy.revoke_api_key(api_key=ApiKey.objects.filter(issued_by=alice).latest("created_at"))
    on_a.wait(lambda r: r.ended, what="the listen stream to end")
    on_b.wait(lambda r: r.ended, what="the events stream to end")
    assert on_a.messages[-1] == {"jsonrpc": "2.0", "id": 5, "_sse_id": None, "result": {
        "resultType": "complete", "_meta": {SUBSCRIPTION_ID: 5, "svc/reason": "credential_revoked"}}}
    terminated = on_b.of("notifications/events/terminated")
    assert terminated and terminated[0]["params"]["error"]["code"] == -32012
    assert on_b.messages[-1]["id"] == 6
    recordings.change_session_status(session=meeting, status="processing")
    assert post(a.url, key, listen_body(uris=[uri(meeting)])).status_code == 401


def test_a_deactivated_member_listen_stream_ends(servers, streams, acme, alice, alice_key):
    a, _ = servers
    reader = streams(a, alice_key, listen_body(uris=[uri(factories.session(acme))]))
    reader.wait_for(ACK, 1)
    tenancy.deactivate_member(membership=alice)
    reader.wait(lambda r: r.ended, what="the stream to end")


def test_listen_streams_count_against_the_workspace_stream_limit(servers, streams, acme, globex, alice_key, bob_key):
    a, b = servers  # 3 streams per workspace in these servers, event and MCP streams alike
    event_stream = Reader(a.url, alice_key)
    try:
        assert event_stream.status == 200
        opened = [streams(s, alice_key, listen_body(i)) for i, s in enumerate((a, b))]
        assert [r.status for r in opened] == [200, 200]
        refused = post(b.url, alice_key, listen_body(9))
        assert refused.status_code == 429 and refused.json()["error"] == "connection_limit"
        assert streams(a, bob_key, listen_body(1)).status == 200  # another workspace is unaffected
        opened[0].close()
        wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 2, what="the slot to free")
        assert streams(b, alice_key, listen_body(3)).status == 200
    finally:
        event_stream.close()


def test_a_listen_client_that_vanishes_frees_its_stream_slot_and_socket(servers, acme, alice_key):
    a, _ = servers
    before = a.stats()
    meeting = factories.session(acme)
    sockets = [raw_listen(a.port, alice_key, listen_body(i, uris=[uri(meeting, "/transcript")])) for i in range(3)]
    ends = server_ends(a, sockets)
    wait_until(lambda: (s := a.stats())["live"] == before["live"] + 3 and s["streamTasks"] == before["streamTasks"],
               what="three live listen streams, no task each")
    recordings.append_committed_segments(session=meeting, segments=factories.segments(["one"]))
    for sock in sockets:
        received = b""
        while UPDATED.encode() not in received:
            chunk = sock.recv(65536)
            assert chunk, "stream ended before its update"
            received += chunk
        abort(sock)
    wait_until(lambda: (s := a.stats())["streams"] == before["streams"] and s["queued"] == 0,
               what="the streams to leave the hub")
    assert a.stats()["deliveryTasks"] == before["deliveryTasks"]
    wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 0, what="slots to free")
    wait_closed(a, ends)


# --- resume ----------------------------------------------------------------------------------------

def test_a_reader_killed_and_resumed_during_a_meeting_misses_nothing_and_gets_nothing_twice(servers, acme,
                                                                                              alice_key):
    a, b = servers
    meeting = factories.session(acme)
    body = listen_body("resume", uris=[uri(meeting, "/transcript")])
    total = 60
    first = raw_listen(a.port, alice_key, body)

    def meeting_runs() -> None:
        for i in range(total // 3):
            recordings.append_committed_segments(session=meeting, segments=factories.segments([f"{i}a", f"{i}b",
                                                                                               f"{i}c"]))

    simulated = threading.Thread(target=meeting_runs)
    simulated.start()
    seen: list[dict] = []
    read_updates(first, seen, 5)
    abort(first)  # killed mid-meeting; what it had read up to its last whole frame is what it holds
    last = seen[-1]["params"]["_meta"]["svc/eventId"]
    again = raw_listen(b.port, alice_key, body, last_event_id=last)
    read_updates(again, seen, total)
    simulated.join()
    again.close()
    ids = [m["params"]["_meta"]["svc/eventId"] for m in seen]
    log = list(Event.objects.filter(session_id=meeting.id, type="transcript.segment.created")
               .order_by("position", "id").values_list("id", flat=True))
    assert len(log) == total and ids == log  # every update once, in log order, across the reconnect


# --- events/stream ----------------------------------------------------------------------------------

def test_events_stream_pushes_what_poll_reads_and_resumes_from_its_cursor(servers, streams, acme, alice_key):
    a, b = servers
    meeting = factories.session(acme)
    body = events_body("ev", name="transcript.segment.created", arguments={"sessionId": meeting.id})
    reader = streams(a, alice_key, body)
    active = reader.wait_for("notifications/events/active", 1)[0]["params"]
    assert active["truncated"] is False and active["cursor"].startswith("pos_")
    recordings.append_committed_segments(session=meeting, segments=factories.segments(["one", "two"]))
    pushed = [m["params"] for m in reader.wait_for("notifications/events/event", 2)]
    poll = {**body, "id": 2, "method": "events/poll", "params": {**body["params"], "cursor": active["cursor"]}}
    polled = post(a.url, alice_key, poll, **{"Mcp-Method": "events/poll"}).json()["result"]
    assert [{k: p[k] for k in ("eventId", "name", "timestamp", "data")} for p in pushed] == polled["events"]
    after = {**poll, "params": {**poll["params"], "cursor": pushed[-1]["cursor"]}}  # a pushed cursor polls on
    assert post(a.url, alice_key, after, **{"Mcp-Method": "events/poll"}).json()["result"]["events"] == []
    assert all(p["_meta"] == {SUBSCRIPTION_ID: "ev"} for p in pushed)
    reader.close()
    recordings.append_committed_segments(session=meeting, segments=factories.segments(["missed"]))
    resumed = streams(b, alice_key, {**body, "params": {**body["params"], "cursor": pushed[0]["cursor"]}})
    assert resumed.wait_for("notifications/events/active", 1)[0]["params"] == {
        "cursor": pushed[0]["cursor"], "truncated": False, "_meta": {SUBSCRIPTION_ID: "ev"}}
    again = resumed.wait_for("notifications/events/event", 2)
    assert [m["params"]["data"]["text"] for m in again] == ["two", "missed"]
    resumed.wait_for("notifications/events/heartbeat", 1)  # the extension's liveness message


def test_legacy_events_stream_and_a_2025_client(servers, streams, acme, alice_key):
    a, _ = servers
    body = events_body(1, name="session.created", modern=False)
    reader = streams(a, alice_key, body, version="2025-11-25")
    reader.wait_for("notifications/events/active", 1)
    created = factories.session(acme)
    event = reader.wait_for("notifications/events/event", 1)[0]["params"]
    assert (event["eventId"], event["name"]) == (Event.objects.get(session_id=created.id).id, "session.created")
    listed = post(a.url, alice_key, {"jsonrpc": "2.0", "id": 2, "method": "events/list"}, version="2025-11-25")
    assert all(e["delivery"][:2] == ["poll", "push"] for e in listed.json()["result"]["events"])
