"""What travels on Redis after a commit (apps/events/fanout.wire_message): one message per
transaction naming its events, which every process's follower awaits until it has read them
from the log; a process of the previous release's message (one event, its frame after a header)
is read too, and anything else is ignored, never fatal to the subscription."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson

from apps.events import fanout
from apps.events.models import Event, EventType
from apps.stream.carrier import Follower


def events(n: int) -> list[Event]:
    at = datetime(2026, 12, 5, tzinfo=timezone.utc)
    return [Event(workspace_id=1, type=EventType.TRANSCRIPT_SEGMENT_CREATED, session_id="s", occurred_at=at, data={})
            for _ in range(n)]


def test_one_message_names_every_event_of_the_transaction_in_order():
    batch = events(3)
    message = fanout.wire_message(batch)
    assert orjson.loads(message) == {"i": batch[0].id, "n": [e.id for e in batch]}
    assert Follower._announced_ids(message) == [e.id for e in batch]


def test_a_previous_release_message_announces_its_one_event():
    old = orjson.dumps({"i": "evt_1", "w": 1, "t": "session.created", "s": "s"}) + b"\nid: evt_1\ndata: {}\n\n"
    assert Follower._announced_ids(old) == ["evt_1"]


def test_anything_else_on_the_channel_is_ignored(caplog):
    for data in (b"not json", b"[1, 2]", b'"n"', b"{}", b'{"n": [1]}', b'{"n": "evt_1"}', b"7"):
        assert Follower._announced_ids(data) == []
    assert "not an event announcement" in caplog.text


def test_a_commit_publishes_one_message(settings, monkeypatch):
    published = []

    class Client:
        def publish(self, channel, message):
            published.append((channel, message))

    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    monkeypatch.setattr(fanout, "redis_client", lambda: Client())
    monkeypatch.setattr(fanout, "local_wakeups", [])
    batch = events(500)
    fanout.announce_committed(batch)
    assert [orjson.loads(m)["n"] for _, m in published] == [[e.id for e in batch]]
