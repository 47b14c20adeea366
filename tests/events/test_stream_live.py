"""The event stream end to end: `manage.py serve` instances (two sharing the database, and
Redis when REDIS_URL is set), real SSE readers over httpx, activity from a separate
`simulate_activity` process or from this process through the services."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import timedelta
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import set_token_value

from apps.stream import slots
from apps.events.models import Event
from apps.oauth.models import AccessToken
from apps.oauth.services import create_client
from apps.recordings import services as recordings
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from bench.harness import pid_holding_socket, tcp_sockets
from tests import factories
from tests.events.live import STREAM, Reader, abort, raw_stream, simulate, start_server, wait_until
from tests.servers import descendants, without_request_id

pytestmark = pytest.mark.django_db(transaction=True)

SESSION_TYPES = ["session.created", "session.status_changed", "session.status_changed"]


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("events-live")
    a = start_server(log_dir)
    b = start_server(log_dir)
    yield a, b
    a.stop()
    b.stop()


def filters(*entries: dict) -> dict:
    return {"filters": json.dumps(list(entries))}


def test_stream_format_heartbeat_and_default_subscription(servers, readers, acme, alice_key):
    a, _ = servers
    reader = readers(a, alice_key)
    assert reader.status == 200
    assert reader.headers["content-type"].startswith("text/event-stream")
    assert reader.headers["cache-control"] == "no-cache"
    assert reader.headers["x-accel-buffering"] == "no"
    simulate("acme", segments=2)
    events = reader.wait_events(3)
    # Without filters: only the session events (segments need a filter entry with sessionId).
    assert [e.event for e in events] == SESSION_TYPES
    session_id = events[0].json["sessionId"]
    stored = {e.id: e for e in Event.objects.filter(session_id=session_id)}
    for event in events:
        envelope = event.json
        assert set(envelope) == {"type", "sessionId", "occurredAt", "data"}
        assert envelope["type"] == event.event and event.id in stored
        assert envelope["occurredAt"].endswith("Z") and len(envelope["occurredAt"]) == 24
        assert envelope["data"] == stored[event.id].data
    frame = next(f for f in reader.raw_frames if f[0].startswith("id: "))
    assert [line.split(":")[0] for line in frame] == ["id", "event", "data"]
    reader.wait(lambda r: "ping" in r.comments, what="a heartbeat")


def test_segment_filter_delivers_that_session_only(servers, readers, acme, alice_key):
    a, _ = servers
    watched = factories.session(acme)
    other = factories.session(acme)
    reader = readers(a, alice_key, params=filters({"type": "transcript.segment.created", "sessionId": watched.id}))
    assert reader.status == 200
    recordings.append_committed_segments(session=other, segments=factories.segments(["not this one"]))
    recordings.append_committed_segments(session=watched, segments=factories.segments(["one", "two"]))
    events = reader.wait_events(2)
    assert [e.json["data"]["text"] for e in events] == ["one", "two"]
    assert {e.json["sessionId"] for e in events} == {watched.id}
    assert set(events[0].json["data"]) == {
        "sessionId", "occurredAt", "id", "sequence", "timestampStart", "timestampEnd",
        "speakerLabel", "text", "confidence", "createdAt",
    }
    time.sleep(0.5)  # room for a wrongly routed event to show up
    assert len(reader.events) == 2


def test_entries_are_or_matched(servers, readers, acme, alice_key):
    a, _ = servers
    session = factories.session(acme)
    reader = readers(a, alice_key, params=filters(
        {"type": "session.status_changed"},
        {"type": "transcript.segment.created", "sessionId": session.id},
    ))
    recordings.append_committed_segments(session=session, segments=factories.segments(["x"]))
    recordings.change_session_status(session=session, status="completed")
    factories.session(acme)  # session.created: not subscribed
    events = reader.wait_events(2)
    assert [e.event for e in events] == ["transcript.segment.created", "session.status_changed"]
    time.sleep(0.5)
    assert len(reader.events) == 2


def test_two_instances_both_deliver_events_from_another_process(servers, readers, acme, alice_key):
    a, b = servers
    on_a, on_b = readers(a, alice_key), readers(b, alice_key)
    simulate("acme", segments=1)
    assert [e.id for e in on_a.wait_events(3)] == [e.id for e in on_b.wait_events(3)]
    assert on_a.types() == SESSION_TYPES


def test_another_workspace_never_sees_an_event(servers, readers, acme, globex, alice_key, bob_key):
    a, b = servers
    acme_reader = readers(a, alice_key)
    globex_reader = readers(b, bob_key)
    simulate("globex", segments=1)
    globex_reader.wait_events(3)
    simulate("acme", segments=0)
    acme_events = acme_reader.wait_events(3)
    globex_sessions = {e.json["sessionId"] for e in globex_reader.events}
    assert not globex_sessions & {e.json["sessionId"] for e in acme_events}
    assert len(globex_reader.events) == 3


# --- errors before any stream byte --------------------------------------------------------

def _get(server, key: str | None, **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(server.url + STREAM, params=params, headers=headers, timeout=10)


def test_unauthenticated_gets_401_with_the_rest_header(servers, acme):
    a, _ = servers
    for key in (None, "svc_not-a-key", "garbage-token"):
        response = _get(a, key)
        assert response.status_code == 401 and response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith(
            f'Bearer resource_metadata="{settings.CONNECT_BASE_URL}/.well-known/oauth-protected-resource"'
        )
        assert ('error="invalid_token"' in response.headers["www-authenticate"]) == (key is not None)


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[]",
        "{}",
        json.dumps([{"type": "session.created"}] * 21),
        json.dumps([{"type": "board.updated"}]),
        json.dumps([{"type": "session.created", "extra": 1}]),
        json.dumps([{"type": "transcript.segment.created"}]),
        json.dumps([{"type": "transcript.segment.created", "sessionId": ""}]),
        json.dumps([{"type": "session.created", "sessionId": 7}]),
        json.dumps(["session.created"]),
    ],
)
def test_invalid_filters(servers, acme, alice_key, raw):
    a, _ = servers
    response = _get(a, alice_key, filters=raw)
    body = response.json()
    assert response.status_code == 400 and body["error"] == "invalid_filters" and body["detail"].startswith("filters")


def test_filter_cost_exceeded_reports_cost_budget_and_entries(servers, acme, alice_key):
    a, _ = servers
    entries = [{"type": "transcript.segment.created", "sessionId": f"s{i}"} for i in range(10)]
    entries.append({"type": "session.created"})
    response = _get(a, alice_key, filters=json.dumps(entries))
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "filter_cost_exceeded" and (body["cost"], body["budget"]) == (110, 100)
    assert body["entries"][0] == {"type": "transcript.segment.created", "sessionId": "s0", "cost": 10}
    assert body["entries"][-1] == {"type": "session.created", "cost": 10}


def test_ten_entries_fit_the_budget(servers, readers, acme, alice_key):
    a, _ = servers
    entries = [{"type": "transcript.segment.created", "sessionId": f"s{i}"} for i in range(10)]
    assert readers(a, alice_key, params=filters(*entries)).status == 200


def test_scope_is_checked_per_subscribed_type(servers, readers, acme, alice):
    a, _ = servers
    sessions_only = factories.api_key(alice, ["svc:sessions:read"])
    response = _get(a, sessions_only, filters=json.dumps([
        {"type": "session.created"}, {"type": "transcript.segment.created", "sessionId": "x"},
    ]))
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"
    transcripts_only = factories.api_key(alice, ["svc:transcripts:read"])
    response = _get(a, transcripts_only, filters=json.dumps([{"type": "session.status_changed"}]))
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"
    # Without filters there is never a 403: the stream carries what the scopes allow (nothing).
    reader = readers(a, transcripts_only)
    assert reader.status == 200
    factories.session(alice.workspace)
    reader.wait(lambda r: "ping" in r.comments, what="a heartbeat")
    time.sleep(0.3)
    assert reader.events == []


def test_inactive_member_is_403_forbidden_and_suspended_workspace_404(servers, acme, alice, alice_key):
    a, _ = servers
    tenancy.deactivate_member(membership=alice)
    response = _get(a, alice_key, filters="not json")  # credential checks come before filters
    assert response.status_code == 403 and without_request_id(response.json()) == {"error": "forbidden"}
    tenancy.suspend_workspace(workspace=acme)
    response = _get(a, alice_key)
    assert response.status_code == 404 and without_request_id(response.json()) == {"error": "workspace_not_found"}


def test_only_get(servers, acme, alice_key):
    a, _ = servers
    response = httpx.post(a.url + STREAM, headers={"Authorization": f"Bearer {alice_key}"})
    assert response.status_code == 405 and without_request_id(response.json()) == {"error": "method_not_allowed"}


# --- credentials --------------------------------------------------------------------------

def _oauth_token(membership, scope: str, resource: str) -> str:
    application = create_client(name="Agent", redirect_uri="https://agent.example/cb").application
    raw = "tok-" + "s" * 40
    token = AccessToken(
        user=membership.user,
        application=application,
        workspace=membership.workspace,
        expires=timezone.now() + timedelta(hours=1),
        scope=scope,
        resource=[resource],
    )
    set_token_value(token, raw)
    token.save()
    return raw


def test_oauth_token_for_the_base_url_streams_and_other_audience_is_401(servers, readers, acme, alice):
    a, _ = servers
    token = _oauth_token(alice, "svc:sessions:read", settings.CONNECT_BASE_URL)
    reader = readers(a, token)
    assert reader.status == 200
    factories.session(acme)
    assert reader.wait_events(1)[0].event == "session.created"
    AccessToken.objects.all().delete()
    mcp_token = _oauth_token(alice, "svc:sessions:read", settings.CONNECT_BASE_URL + "/mcp")
    assert _get(a, mcp_token).status_code == 401
    # A deleted (revoked) token's open stream ends.
    reader.wait(lambda r: r.ended, what="the revoked token's stream to close")


def test_revoked_key_stream_closes_and_receives_nothing_more(servers, readers, acme, alice, alice_key):
    a, b = servers
    before = {server.url: server.stats()["streams"] for server in (a, b)}
    on_a, on_b = readers(a, alice_key), readers(b, alice_key)
    factories.session(acme)
    on_a.wait_events(1), on_b.wait_events(1)
    revoked = ApiKey.objects.get(issued_by=alice)
    # A stream of another key of the workspace: the next event is delivered, to it.
    control = readers(a, factories.api_key(alice, factories.ALL_SCOPES))
    tenancy.revoke_api_key(api_key=revoked)
    on_a.wait(lambda r: r.ended, what="stream on A to close")
    on_b.wait(lambda r: r.ended, what="stream on B to close")
    factories.session(acme)
    control.wait_events(1)
    assert len(on_a.events) == 1 and len(on_b.events) == 1
    # Nothing on the servers routes to the revoked key's streams any more...
    for server in (a, b):
        wait_until(lambda: server.stats()["streams"] == before[server.url] + (server is a),
                   what="the revoked key's streams to leave the hub")
    # ...and reconnecting with its last id (as EventSource does) does not bring the event.
    for server, reader in ((a, on_a), (b, on_b)):
        again = readers(server, alice_key, last_event_id=reader.events[-1].id)
        again.wait(lambda r: r.ended, what="the refused reconnect to end")
        assert again.status == 401 and again.events == []


def test_deactivated_member_stream_closes(servers, readers, acme, alice, alice_key):
    a, _ = servers
    reader = readers(a, alice_key)
    tenancy.deactivate_member(membership=alice)
    reader.wait(lambda r: r.ended, what="stream to close")


# --- limits, slow readers, disconnects ----------------------------------------------------

def test_connection_limit_across_instances_under_concurrent_connects(servers, readers, acme, globex, alice_key, bob_key):
    a, b = servers  # limit 3 per workspace in these servers
    results: list[Reader] = []
    lock = threading.Lock()

    def connect(server):
        reader = readers(server, alice_key)
        with lock:
            results.append(reader)

    threads = [threading.Thread(target=connect, args=(s,)) for s in (a, b) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    statuses = sorted(r.status for r in results)
    assert statuses == [200] * 3 + [429] * 5, statuses
    rejected = next(r for r in results if r.status == 429)
    assert without_request_id(json.loads(rejected.body)) == {"error": "connection_limit"}
    assert slots.open_slots(workspace_id=acme.id) == 3
    # Another workspace is unaffected.
    assert readers(a, bob_key).status == 200
    # A slot frees as soon as its client leaves.
    next(r for r in results if r.status == 200).close()
    wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 2, what="the slot to free")
    assert readers(b, alice_key).status == 200


def test_slow_reader_is_disconnected_while_a_fast_one_keeps_receiving(servers, readers, acme, alice_key):
    a, _ = servers  # each stream may have 40 events waiting in these servers
    session = factories.session(acme)
    path = STREAM + "?filters=" + quote(json.dumps([{"type": "transcript.segment.created", "sessionId": session.id}]))
    slow = raw_stream(a.port, alice_key, rcvbuf=4096, path=path)
    fast = readers(a, alice_key, params={"filters": json.dumps([{"type": "transcript.segment.created", "sessionId": session.id}])})
    wait_until(lambda: a.stats()["streams"] == 2, what="both streams open")
    # Both live: the hub writes their frames straight to the connection, no task per stream.
    wait_until(lambda: a.stats()["live"] == 2, what="both streams live")
    direct_before = a.stats()["directWrites"]
    text = "x" * 40_000
    total = 240  # ~10 MB: more than loopback's socket buffers hold for the slow reader
    paused_seen = 0
    for start in range(0, total, 20):
        recordings.append_committed_segments(session=session, segments=factories.segments([text] * 20))
        # The fast reader keeps up (fewer than 40 waiting), however slow this machine is today;
        # the slow one falls further behind with every batch.
        fast.wait_events(start + 20, timeout=60)
        paused_seen = max(paused_seen, a.stats()["paused"])
    assert [e.json["data"]["sequence"] for e in fast.events] == list(range(total))
    wait_until(lambda: a.stats()["streams"] == 1, what="the slow stream to be dropped")
    # Twisted's flow control paused the slow one (its later frames queued until it overflowed);
    # the fast one is still written to directly.
    stats = a.stats()
    assert paused_seen >= 1 and stats["live"] == 1 and stats["directWrites"] > direct_before
    # The server cut the slow client off: draining its socket ends in EOF or a reset.
    slow.settimeout(10)
    try:
        while slow.recv(1 << 20):
            pass
    except ConnectionResetError:
        pass
    slow.close()


def server_ends(server, sockets) -> set[str]:
    """The inodes of the server's side of our client `sockets` (their remote port is the
    client's port), read while they are open."""
    # Only the sockets whose local port is the server's: on a shared machine another test's
    # connection may have our client's port as its own remote port.
    ends = {inode for sock in sockets for local, _, inode, _ in tcp_sockets(sock.getsockname()[1], remote=True)
            if int(local.rsplit(":", 1)[1], 16) == sock.getpeername()[1]} - {"0"}
    assert len(ends) == len(sockets), ends
    assert pid_holding_socket(descendants(server.process.pid), ends) is not None
    return ends


def wait_closed(server, ends: set[str]) -> None:
    """Until no process of the server holds any of those sockets: exactly these descriptors, so a
    connection the server opens meanwhile (a Redis or database pool growing) cannot hide one."""
    wait_until(lambda: pid_holding_socket(descendants(server.process.pid), ends) is None,
               what="the server to close the sockets")


def test_abrupt_disconnect_frees_slot_queue_task_and_socket(servers, acme, alice_key):
    a, _ = servers
    before = a.stats()
    sockets = [raw_stream(a.port, alice_key) for _ in range(3)]
    ends = server_ends(a, sockets)
    stats = a.stats()
    assert stats["streams"] == before["streams"] + 3
    # Live under daphne, a stream has no task of its own: its consumer ends once it is open.
    wait_until(lambda: (s := a.stats())["streamTasks"] == before["streamTasks"] and s["live"] == before["live"] + 3,
               what="the consumers of three live streams to end")
    assert a.stats()["deliveryTasks"] == before["deliveryTasks"]
    assert slots.open_slots(workspace_id=acme.id) == 3
    for sock in sockets:
        abort(sock)
    wait_until(
        lambda: (s := a.stats())["streams"] == before["streams"] and s["deliveryTasks"] == before["deliveryTasks"],
        what="streams and delivery tasks to end",
    )
    assert a.stats()["queued"] == 0
    wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 0, what="slots to free")
    wait_closed(a, ends)


def test_abrupt_disconnect_while_events_are_written_directly_frees_everything(servers, acme, alice_key):
    a, _ = servers
    before = a.stats()
    session = factories.session(acme)
    path = STREAM + "?filters=" + quote(json.dumps([{"type": "transcript.segment.created", "sessionId": session.id}]))
    sockets = [raw_stream(a.port, alice_key, path=path) for _ in range(3)]
    ends = server_ends(a, sockets)
    wait_until(lambda: a.stats()["live"] == before["live"] + 3, what="three live streams")
    recordings.append_committed_segments(session=session, segments=factories.segments(["one", "two"]))
    for sock in sockets:
        received = b""
        while b'"two"' not in received:
            chunk = sock.recv(65536)
            assert chunk, "stream ended before its events"
            received += chunk
        assert received.index(b'"one"') < received.index(b'"two"')
    for sock in sockets:
        abort(sock)
    # Frames for the vanished clients: written to dead connections, never an error elsewhere.
    recordings.append_committed_segments(session=session, segments=factories.segments(["after"]))
    wait_until(
        lambda: (s := a.stats())["streams"] == before["streams"] and s["deliveryTasks"] == before["deliveryTasks"],
        what="streams and delivery tasks to end",
    )
    stats = a.stats()
    assert (stats["queued"], stats["live"], stats["paused"]) == (0, before["live"], before["paused"])
    wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 0, what="slots to free")
    wait_closed(a, ends)


# --- resume -------------------------------------------------------------------------------

def test_resume_with_last_event_id_replays_what_was_missed_then_goes_live(servers, readers, acme, alice_key):
    a, b = servers
    session = factories.session(acme)
    segment_filter = {"type": "transcript.segment.created", "sessionId": session.id}
    first = readers(a, alice_key, params=filters(segment_filter, {"type": "session.status_changed"}))
    recordings.append_committed_segments(session=session, segments=factories.segments(["before"]))
    last_id = first.wait_events(1)[0].id
    first.close()
    # Missed while disconnected: two segments and a status change, plus another session's
    # segment the filter does not match.
    recordings.append_committed_segments(session=session, segments=factories.segments(["missed-1", "missed-2"]))
    recordings.change_session_status(session=session, status="processing")
    other = factories.session(acme)
    recordings.append_committed_segments(session=other, segments=factories.segments(["other"]))
    again = readers(b, alice_key, params=filters(segment_filter, {"type": "session.status_changed"}), last_event_id=last_id)
    replayed = again.wait_events(3)
    assert [e.event for e in replayed] == ["transcript.segment.created", "transcript.segment.created", "session.status_changed"]
    assert [e.json["data"].get("text") for e in replayed[:2]] == ["missed-1", "missed-2"]
    recordings.change_session_status(session=session, status="completed")
    live = again.wait_events(4)[3]
    assert live.json["data"]["status"] == "completed"
    assert len({e.id for e in again.events}) == len(again.events)  # no duplicates at the seam
    assert "resume-unavailable" not in again.comments


def test_unknown_or_expired_last_event_id_starts_live_with_a_comment(servers, readers, acme, globex, alice_key):
    a, _ = servers
    foreign = factories.session(globex)
    foreign_event = Event.objects.get(session_id=foreign.id)
    for last_id in ("evt_01abcdefghjkmnpqrstvwxyz0", "nonsense", foreign_event.id):
        reader = readers(a, alice_key, last_event_id=last_id)
        reader.wait(lambda r: "resume-unavailable" in r.comments, what="the resume-unavailable comment")
        factories.session(acme)
        assert reader.wait_events(1)[0].event == "session.created"
        reader.close()
        wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 0, what="slot to free")
