"""A resume replays what was missed a chunk at a time (hub.Replay): a resuming stream holds at
most one chunk of its missed window, the next chunk is read from the log only once the client's
socket takes more, and the chunks, followed by the stream's live queue, are exactly what one read
of the whole window gives: in order, nothing missed, nothing twice, even while events are
dispatched live in the middle of the replay. The end-to-end resumes (test_stream_live.py,
test_stream_resume_order.py, test_stream_storm.py) run the same path through daphne."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.db import transaction
from django.utils import timezone

from apps.access.credentials import CredentialRef
from apps.events import selectors
from apps.stream.consumer import EventStreamConsumer
from apps.events.filters import FilterEntry, Subscription
from apps.events.models import Event
from apps.stream import resume as resume_module
from apps.stream.hub import get_hub
from apps.stream.resume import RESUME_CHUNK
from apps.stream.streams import Stream
from apps.events.representations import frame_for
from apps.events.services import record_event
from tests.hub import run_on_hub

pytestmark = pytest.mark.django_db(transaction=True)  # the hub's threads read what was committed

SEGMENTS = "transcript.segment.created"
TYPES = frozenset({SEGMENTS})
SUBSCRIPTION = Subscription(entries=(FilterEntry(SEGMENTS, "ses_a"),))


def record(workspace_id: int, count: int, start: int = 0) -> list:
    """`count` events, every third of another session (the stream's filter skips it)."""
    with transaction.atomic():
        ids = [record_event(workspace_id=workspace_id, type=SEGMENTS, session_id="ses_b" if i % 3 == 2 else "ses_a",
                            occurred_at=timezone.now(), data={"i": i}).id for i in range(start, start + count)]
    events = list(Event.objects.filter(pk__in=ids).order_by("position", "id"))  # positions as stored
    # A resume reads settled rows only. On PostgreSQL any transaction still running on the
    # server holds the horizon back, another test process's in its own database too (seen in a
    # full run: the first read found nothing settled): wait until these are below it.
    deadline = time.monotonic() + 30
    while selectors.horizon() <= events[-1].position and time.monotonic() < deadline:
        time.sleep(0.02)
    return events


def as_rows(events) -> list[tuple]:
    """Events as the follower dispatches them (Hub._poll)."""
    return [(e.workspace_id, e.type, e.session_id, (e.position, e.id), frame_for(e)) for e in events]


def one_read(workspace_id: int, after_id: str) -> list[tuple[tuple[int, str], bytes]]:
    """What the old path replayed: the whole window after `after_id` in one read, filtered."""
    place = selectors.position_of(workspace_id=workspace_id, event_id=after_id)
    events, _ = selectors.read_log(after=place, limit=100_000, workspace_id=workspace_id, types=TYPES)
    return [((e.position, e.id), frame_for(e)) for e in events if SUBSCRIPTION.matches(e.type, e.session_id)]


def make_stream(workspace_id: int) -> Stream:
    return Stream(workspace_id=workspace_id, subscription=SUBSCRIPTION, queue_size=10_000,
                  credential=CredentialRef(kind="api_key", credential_id="1", membership_id=1,
                                           workspace_id=workspace_id))


async def resumed(workspace_id: int, last_id: str):
    """A stream registered, then resumed from `last_id` (subscribe, then read: as the consumer)."""
    hub = get_hub()
    stream = make_stream(workspace_id)
    hub.register(stream)
    replay = await hub.resume(workspace_id=workspace_id, last_event_id=last_id, subscription=SUBSCRIPTION, types=TYPES)
    return hub, stream, replay


def test_the_chunks_and_the_live_queue_are_the_one_read_with_live_events_in_the_middle(acme):
    events = record(acme.id, 5 * RESUME_CHUNK + 17)
    last_id = events[10].id

    async def scenario():
        hub, stream, replay = await resumed(acme.id, last_id)
        written, held, chunks = [], [], 0
        while True:
            held.append(len(replay.items))
            written += replay.items
            replay.items = []
            chunks += 1
            if chunks == 2:
                # Committed and dispatched live mid-replay: queued, and later read by the replay too.
                late = await asyncio.to_thread(record, acme.id, 7, 10_000)
                hub.dispatch(as_rows(late))
            if replay.caught_up(stream):
                break
            await hub.resume_more(replay)
        return written, held, chunks, stream.pending()

    written, held, chunks, rest = run_on_hub(scenario())
    expected = one_read(acme.id, last_id)
    assert len(expected) > 3 * RESUME_CHUNK and max(held) <= RESUME_CHUNK and chunks >= 4
    assert b"".join(frame for _, frame in written) + rest == b"".join(frame for _, frame in expected)
    ids = [key[1] for key, _ in written]
    assert ids == [key[1] for key, _ in expected][: len(ids)] and len(set(ids)) == len(ids)


def test_the_replay_ends_where_the_live_queue_takes_over_and_drops_the_copies(acme):
    """A stream whose queue already holds the window's end stops reading: the queue has the rest."""
    events = record(acme.id, 3 * RESUME_CHUNK)
    last_id = events[0].id

    async def scenario():
        hub = get_hub()
        stream = make_stream(acme.id)
        hub.register(stream)
        hub.dispatch(as_rows(events[RESUME_CHUNK // 2:]))  # the follower was behind: live copies
        replay = await hub.resume(workspace_id=acme.id, last_event_id=last_id, subscription=SUBSCRIPTION, types=TYPES)
        written = list(replay.items)
        replay.items = []
        done = replay.caught_up(stream)
        return written, done, stream.pending(), hub.resume_reads

    written, done, rest, reads = run_on_hub(scenario())
    assert done and reads == 1
    assert b"".join(frame for _, frame in written) + rest == b"".join(frame for _, frame in one_read(acme.id, last_id))


def test_a_window_past_the_resume_limit_is_not_replayed(acme, monkeypatch):
    events = record(acme.id, RESUME_CHUNK + 30)
    monkeypatch.setattr(resume_module, "RESUME_MAX_EVENTS", RESUME_CHUNK + 10)

    async def resume(last_id):
        return await get_hub().resume(workspace_id=acme.id, last_event_id=last_id, subscription=SUBSCRIPTION,
                                      types=TYPES)

    assert run_on_hub(resume(events[0].id)) is None  # RESUME_CHUNK + 29 missed
    assert run_on_hub(resume(events[25].id)) is not None  # RESUME_CHUNK + 4


def test_a_paused_stream_reads_no_further_chunk_until_its_socket_takes_more(acme):
    """The consumer's replay: a chunk, then nothing while Twisted's flow control holds the stream
    paused (one chunk in memory at most, none read ahead), then the rest once it resumes."""
    events = record(acme.id, 3 * RESUME_CHUNK)
    last_id = events[0].id

    async def scenario():
        hub, stream, replay = await resumed(acme.id, last_id)
        consumer = EventStreamConsumer()
        writes: list[bytes] = []

        async def send_body(body, *, more_body):
            assert more_body
            writes.append(body)
            stream.paused = True  # the socket is full after each chunk

        consumer.send_body = send_body
        task = asyncio.ensure_future(consumer._replay(stream, replay))
        for _ in range(50):
            await asyncio.sleep(0.01)
        paused_writes, paused_reads = len(writes), hub.resume_reads
        stream.paused = False
        stream.wakeup.set()
        while not task.done():
            await asyncio.sleep(0.01)
            if stream.paused:
                stream.paused = False
                stream.wakeup.set()
        await task
        return paused_writes, paused_reads, writes, stream.pending(), hub.resume_reads

    paused_writes, paused_reads, writes, rest, reads = run_on_hub(scenario())
    assert paused_writes == 1 and paused_reads == 1
    assert len(writes) >= 3 and reads == len(writes)
    assert b"".join(writes) + rest == b"".join(frame for _, frame in one_read(acme.id, last_id))


def test_streams_resuming_together_share_each_chunks_read_and_its_bytes(acme):
    """A storm: streams asking from the same place while the read waits share it, chunk after
    chunk, and the subscription's frames are joined once for all of them."""
    events = record(acme.id, 2 * RESUME_CHUNK + 5)

    async def scenario():
        hub = get_hub()
        streams = [make_stream(acme.id) for _ in range(5)]
        for stream in streams:
            hub.register(stream)
        ask = lambda: hub.resume(workspace_id=acme.id, last_event_id=events[0].id,  # noqa: E731
                                 subscription=SUBSCRIPTION, types=TYPES)
        replays = await asyncio.gather(*(ask() for _ in streams))
        chunks = [[replay.data] for replay in replays]
        while not all([replay.caught_up(stream) for replay, stream in zip(replays, streams)]):
            await asyncio.gather(*(hub.resume_more(replay) for replay in replays))
            for replay, written in zip(replays, chunks):
                written.append(replay.data)
        return chunks, hub.resume_reads

    chunks, reads = run_on_hub(scenario())
    assert reads == len(chunks[0]) >= 3
    assert all(a is b for written in chunks[1:] for a, b in zip(chunks[0], written))
    assert b"".join(chunks[0]) == b"".join(frame for _, frame in one_read(acme.id, events[0].id))
