"""`subscriptions/listen` on what the log records as internal events, against a live `manage.py
serve`: a final revision landing, board versions and a session's fields edited notify exactly
the URIs whose reads they change, in log order; a reader resumed from an internal event's id
misses nothing and gets nothing twice; the official SDK's `Client.listen` receives them;
tenancy and scopes as for the other URIs."""

from __future__ import annotations

import json
import threading

import pytest

from apps.events import filters
from apps.events.models import Event
from apps.recordings import services as recordings
from tests import factories
from tests.events.live import abort
from tests.mcp.test_live import client_for
from tests.mcp.streams import (
    SUBSCRIPTION_ID,
    UPDATED,
    StreamReader,
    listen_body,
    post,
    raw_listen,
    read_updates,
)

pytestmark = pytest.mark.django_db(transaction=True)

ACK = "notifications/subscriptions/acknowledged"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def uris_of(meeting) -> dict[str, str]:
    base = f"connect://sessions/{meeting.id}"
    return {"S": base, "T": f"{base}/transcript", "C": f"{base}/transcripts/committed",
            "F": f"{base}/transcripts/final?format=text", "B": f"{base}/boards/summary",
            "B1": f"{base}/boards/summary/versions/1", "O": f"{base}/boards/other"}


def board(meeting, board_id: str, v: int) -> None:
    recordings.publish_board(session=meeting, board_id=board_id, payload={"v": v}, source_revision_kind="final")


# Each step of a meeting, and the URIs (of `uris_of`) whose reads it changes, in subscription order.
STEPS = [
    (lambda m: recordings.append_committed_segments(session=m, segments=factories.segments(["live"])), ["T", "C"]),
    (lambda m: board(m, "summary", 1), ["B", "B1"]),
    (lambda m: recordings.update_session(session=m, label="Renamed"), ["S"]),
    (lambda m: recordings.change_session_status(session=m, status="completed"), ["S"]),
    (lambda m: recordings.write_final_transcript(session=m, segments=factories.segments(["Final."])), ["T", "F"]),
    (lambda m: board(m, "summary", 2), ["B", "B1"]),  # version 1 stops being the current one
    (lambda m: board(m, "other", 1), ["O"]),
    (lambda m: board(m, "summary", 3), ["B"]),
]


def expected(meeting, steps) -> list[tuple[str, str]]:
    """(event id, URI) of each notification `steps` make, from the log: one event per step."""
    ids = list(Event.objects.filter(session_id=meeting.id).exclude(type=filters.SESSION_CREATED)
               .order_by("position", "id").values_list("id", flat=True))
    assert len(ids) == len(steps)
    uris = uris_of(meeting)
    return [(event_id, uris[name]) for event_id, (_, names) in zip(ids, steps) for name in names]


def updates(reader: StreamReader) -> list[tuple[str, str]]:
    return [event_and_uri(m) for m in reader.of(UPDATED)]


def test_final_revision_boards_and_field_edits_notify_the_uris_they_change(live_server_daphne, acme, alice_key):
    meeting = factories.session(acme)
    uris = list(uris_of(meeting).values())
    reader = StreamReader(live_server_daphne.url, alice_key, listen_body("changes", uris=uris))
    try:
        ack = reader.wait_for(ACK, 1)[0]
        assert ack["params"]["notifications"] == {"resourceSubscriptions": uris}  # every URI honored
        for step, _ in STEPS:
            step(meeting)
        want = expected(meeting, STEPS)
        reader.wait(lambda r: len(r.of(UPDATED)) >= len(want), what="every update")
        assert updates(reader) == want
        assert [m["_sse_id"] for m in reader.of(UPDATED)] == [event_id for event_id, _ in want]
        assert all(m["params"]["_meta"][SUBSCRIPTION_ID] == "changes" for m in reader.messages)
    finally:
        reader.close()


def event_and_uri(message: dict) -> tuple[str, str]:
    return message["params"]["_meta"]["svc/eventId"], message["params"]["uri"]


def test_a_reader_resumed_from_an_internal_event_misses_nothing_and_gets_nothing_twice(live_server_daphne, acme,
                                                                                        alice_key):
    server = live_server_daphne
    meeting = factories.session(acme)
    body = listen_body("resume", uris=list(uris_of(meeting).values()))
    first = raw_listen(server.port, alice_key, body)
    for step, _ in STEPS[:3]:
        step(meeting)
    seen: list[tuple[str, str]] = []
    read_updates(first, seen, 5, keep=event_and_uri)
    abort(first)
    last = seen[-1][0]
    assert Event.objects.get(id=last).type == filters.SESSION_UPDATED  # the last it holds is internal
    for step, _ in STEPS[3:7]:  # while it is away
        step(meeting)
    again = raw_listen(server.port, alice_key, body, last_event_id=last)
    STEPS[7][0](meeting)  # live, after the replay
    want = expected(meeting, STEPS)
    read_updates(again, seen, len(want), keep=event_and_uri)
    again.close()
    assert seen == want


@pytest.fixture
def recorded(acme):
    return factories.session(acme, completed=True)


@pytest.mark.anyio
async def test_the_official_sdk_listen_receives_the_final_revision_and_board_updates(live_server_daphne, recorded,
                                                                                      alice_key):
    meeting = recorded
    uris = uris_of(meeting)
    final, summary = f"connect://sessions/{meeting.id}/transcripts/final", uris["B"]

    def meeting_ends() -> None:
        recordings.write_final_transcript(session=meeting, segments=factories.segments(["We decided."]))
        board(meeting, "summary", 1)

    async with client_for(live_server_daphne.url, alice_key) as client:
        async with client.listen(resource_subscriptions=[final, summary]) as subscription:
            assert subscription.honored.resource_subscriptions == [final, summary]
            ended = threading.Thread(target=meeting_ends)
            ended.start()
            heard = set()
            async for event in subscription:
                heard.add(event.uri)
                if heard == {final, summary}:
                    break
            ended.join()
        assert "We decided." in (await client.read_resource(final)).contents[0].text
        assert json.loads((await client.read_resource(summary)).contents[0].text)["board"]["version"] == 1


def test_board_and_final_uris_keep_tenancy_and_scopes(live_server_daphne, acme, globex, alice, alice_key):
    url = live_server_daphne.url
    foreign = factories.session(globex)
    for tail in ("/boards/summary", "/transcripts/final", "/boards/summary/versions/1"):
        refused = post(url, alice_key, listen_body(uris=[f"connect://sessions/{foreign.id}{tail}"]))
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32602
    mine = factories.session(acme)
    no_boards = factories.api_key(alice, ["svc:sessions:read", "svc:transcripts:read"])
    refused = post(url, no_boards, listen_body(uris=[f"connect://sessions/{mine.id}/boards/summary"]))
    assert refused.status_code == 403 and refused.json()["error"]["data"]["scope"] == "svc:boards:read"

    reader = StreamReader(url, alice_key, listen_body("mine", uris=[uris_of(mine)["S"], uris_of(mine)["B"]]))
    try:
        reader.wait_for(ACK, 1)
        recordings.update_session(session=foreign, label="Theirs")  # another workspace's changes
        board(foreign, "summary", 1)
        recordings.update_session(session=mine, label="Ours")
        reader.wait_for(UPDATED, 1)
        assert updates(reader) == [(Event.objects.get(session_id=mine.id, type=filters.SESSION_UPDATED).id,
                                    uris_of(mine)["S"])]
    finally:
        reader.close()
