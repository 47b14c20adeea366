"""The hub's delivery rules without a server: a batch reaches each matching stream as one
write while it is live, and through its bounded queue (in order, deduplicated after a resume)
while it is paused, replaying or not under daphne. The live tests in test_stream_live.py run
the same rules through daphne and real sockets."""

from __future__ import annotations

import asyncio

import pytest

from apps.access.credentials import CredentialRef
from apps.events.filters import FilterEntry, Subscription
from apps.events.representations import PING
from apps.stream.hub import get_hub
from apps.stream.streams import Stream
from apps.stream.threads import DbThreads
from tests.hub import run_on_hub

SEGMENTS = "transcript.segment.created"


def make_stream(*, session_id: str = "ses_a", queue_size: int = 3, workspace_id: int = 1) -> Stream:
    return Stream(
        workspace_id=workspace_id,
        subscription=Subscription(entries=(FilterEntry(SEGMENTS, session_id),)),
        credential=CredentialRef(kind="api_key", credential_id="1", membership_id=1, workspace_id=workspace_id),
        queue_size=queue_size,
    )


def row(event_id: str, session_id: str = "ses_a", workspace_id: int = 1, position: int | None = None) -> tuple:
    """A dispatched row; its log position defaults to the id's number (evt_3 → 3)."""
    if position is None:
        position = int(event_id.removeprefix("evt_")) if event_id.removeprefix("evt_").isdigit() else 1
    return workspace_id, SEGMENTS, session_id, (position, event_id), f"<{event_id}>".encode()


def queued_ids(stream: Stream) -> list[str]:
    return [key[1] for key, _ in stream.queue]


class Socket:
    """Stands in for the daphne request's write; `pause_after` bytes fill it up."""

    def __init__(self, stream: Stream, pause_after: int | None = None) -> None:
        self.stream, self.pause_after, self.writes = stream, pause_after, []

    def __call__(self, data: bytes) -> None:
        self.writes.append(data)
        if self.pause_after is not None and sum(map(len, self.writes)) >= self.pause_after:
            self.stream.paused = True  # as Twisted's pauseProducing does, inside the write


def test_a_batch_is_one_write_per_live_stream_and_wakes_no_task():
    async def scenario():
        hub = get_hub()
        a, b, other = make_stream(), make_stream(), make_stream(session_id="ses_b")
        for stream in (a, b, other):
            hub.register(stream)
            stream.write = Socket(stream)
        hub.dispatch([row("evt_1"), row("evt_x", session_id="ses_b"), row("evt_2"), row("evt_3", workspace_id=2)])
        assert a.write.writes == b.write.writes == [b"<evt_1><evt_2>"]
        assert other.write.writes == [b"<evt_x>"]
        assert not a.wakeup.is_set() and not a.queue

    run_on_hub(scenario())


def test_the_streams_of_one_subscription_are_written_one_shared_copy_of_the_batch():
    """Routed per subscription: the batch's frames are joined once and the same bytes object is
    written to every live stream holding those filters (the daphne write then frames it once),
    a stream whose resume floor lies below the batch included; one whose floor cuts into it
    gets its own share."""
    async def scenario():
        hub = get_hub()
        a, b, resumed, cut = make_stream(), make_stream(), make_stream(), make_stream()
        for stream in (a, b, resumed, cut):
            hub.register(stream)
            stream.write = Socket(stream)
        resumed.floor = (0, "evt_0")
        cut.floor = (1, "evt_1")
        assert len(hub.groups[1]) == 1  # four streams, one subscription
        hub.dispatch([row("evt_1"), row("evt_2")])
        assert a.write.writes == [b"<evt_1><evt_2>"] and cut.write.writes == [b"<evt_2>"]
        assert a.write.writes[0] is b.write.writes[0] is resumed.write.writes[0]
        assert (a.sent, b.sent, resumed.sent, cut.sent) == (2, 2, 2, 1)
        assert hub.direct_writes == 4
        for stream in (a, b, resumed, cut):
            stream.close("client_gone")
        assert not hub.groups and not hub.routes and hub.stream_count == 0

    run_on_hub(scenario())


def test_subscriptions_that_share_a_route_each_get_the_event_once():
    async def scenario():
        hub = get_hub()
        narrow = make_stream()  # (segments, ses_a)
        both = Stream(
            workspace_id=1,
            subscription=Subscription(entries=(FilterEntry(SEGMENTS, "ses_a"), FilterEntry(SEGMENTS, None))),
            credential=CredentialRef(kind="api_key", credential_id="1", membership_id=1, workspace_id=1),
            queue_size=3,
        )
        for stream in (narrow, both):
            hub.register(stream)
            stream.write = Socket(stream)
        hub.dispatch([row("evt_1"), row("evt_2", session_id="ses_b")])
        assert narrow.write.writes == [b"<evt_1>"]
        assert both.write.writes == [b"<evt_1><evt_2>"]

    run_on_hub(scenario())


def test_a_paused_stream_queues_in_order_and_overflows_alone():
    async def scenario():
        hub = get_hub()
        slow, fast = make_stream(queue_size=3), make_stream(queue_size=3)
        for stream in (slow, fast):
            hub.register(stream)
        slow.write, fast.write = Socket(slow, pause_after=1), Socket(fast)
        hub.dispatch([row("evt_1")])  # fills the slow socket: paused by its own write
        assert slow.paused and slow.write.writes == [b"<evt_1>"]
        hub.dispatch([row("evt_2"), row("evt_3")])
        assert queued_ids(slow) == ["evt_2", "evt_3"] and slow.wakeup.is_set()
        # Resumed but not yet drained by its task: new frames queue behind, never overtake.
        slow.paused = False
        hub.dispatch([row("evt_4")])
        assert queued_ids(slow) == ["evt_2", "evt_3", "evt_4"] and len(slow.write.writes) == 1
        slow.paused = True
        hub.dispatch([row("evt_5")])
        assert slow.closed_reason == "overflow" and not slow.queue and slow.write is None
        assert hub.stream_count == 1  # unregistered at once
        hub.dispatch([row("evt_6")])
        assert fast.write.writes == [b"<evt_1>", b"<evt_2><evt_3>", b"<evt_4>", b"<evt_5>", b"<evt_6>"]
        assert fast.closed_reason is None

    run_on_hub(scenario())


def test_frames_the_resume_replay_covered_are_dropped_on_the_direct_path():
    async def scenario():
        hub = get_hub()
        stream = make_stream()
        hub.register(stream)
        hub.dispatch([row("evt_2")])  # while replaying: queued
        stream.floor = (2, "evt_2")  # the replay reached evt_2's place in the log
        stream.write = Socket(stream)
        assert queued_ids(stream) == ["evt_2"]  # the task drops it when it drains
        stream.queue.clear()
        hub.dispatch([row("evt_1"), row("evt_3")])
        hub.dispatch([row("evt_2")])
        assert stream.write.writes == [b"<evt_3>"]

    run_on_hub(scenario())


def test_the_floor_is_a_place_in_the_log_not_an_id():
    """Ids are made before commit: a later id can sit lower in the log. The floor compares
    (position, id), and a floor at the end of a position covers every id there."""
    async def scenario():
        hub = get_hub()
        stream = make_stream(queue_size=10)
        hub.register(stream)
        stream.write = Socket(stream)
        stream.floor = (5, "\U0010ffff")  # everything up to and including position 5
        hub.dispatch([row("evt_z", position=4), row("evt_b", position=5), row("evt_a", position=6)])
        assert stream.write.writes == [b"<evt_a>"]

    run_on_hub(scenario())


def test_without_a_direct_write_everything_goes_through_the_queue():
    async def scenario():
        hub = get_hub()
        stream = make_stream(queue_size=10)
        hub.register(stream)
        hub.dispatch([row("evt_1"), row("evt_2")])
        stream.ping()
        assert queued_ids(stream) == ["evt_1", "evt_2"] and stream.ping_due and stream.wakeup.is_set()

    run_on_hub(scenario())


def test_pings_go_straight_to_a_live_stream_and_wait_for_a_paused_one():
    async def scenario():
        live, paused = make_stream(), make_stream()
        live.write, paused.write = Socket(live), Socket(paused)
        paused.paused = True
        for stream in (live, paused):
            stream.ping()
        assert live.write.writes == [PING] and not live.ping_due
        assert paused.write.writes == [] and paused.ping_due and paused.wakeup.is_set()

    run_on_hub(scenario())


def test_a_failing_write_closes_that_stream_only():
    async def scenario():
        hub = get_hub()
        broken, fine = make_stream(), make_stream()
        for stream in (broken, fine):
            hub.register(stream)

        def explode(data: bytes) -> None:
            raise RuntimeError("Request.write called on a request after Request.finish was called.")

        broken.write, fine.write = explode, Socket(fine)
        hub.dispatch([row("evt_1")])
        assert broken.closed_reason == "write_failed" and broken.wakeup.is_set()
        assert fine.write.writes == [b"<evt_1>"] and hub.stream_count == 1

    run_on_hub(scenario())


@pytest.mark.parametrize("closed_reason", ["client_gone", "credential_revoked"])
def test_a_closed_stream_gets_nothing(closed_reason):
    async def scenario():
        hub = get_hub()
        stream = make_stream()
        hub.register(stream)
        socket = stream.write = Socket(stream)
        stream.close(closed_reason)
        hub.dispatch([row("evt_1")])
        stream.ping()
        assert socket.writes == [] and not stream.queue and hub.stream_count == 0

    run_on_hub(scenario())


def test_database_jobs_finished_together_wake_the_loop_once_and_keep_their_results():
    """`_DbThreads`: jobs that finished while the loop was busy are settled by one wake-up of the
    loop (a burst of stream opens), each with its own result or exception; jobs still run when
    nobody awaits them (a cancelled waiter)."""
    import threading
    import time

    async def scenario():
        loop = asyncio.get_running_loop()
        threads = DbThreads(loop, workers=2, name="test-db")
        wakeups = []
        original = loop.call_soon_threadsafe

        def counted(callback, *args, **kwargs):
            wakeups.append(callback)
            return original(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted
        ran = []
        lock = threading.Lock()

        def job(n):
            with lock:
                ran.append(n)
            if n == 7:
                raise ValueError("seven")
            return n * n

        try:
            futures = [threads.submit(lambda n=n: job(n)) for n in range(50)]
            futures[3].cancel()  # nobody waits for this one; it runs anyway
            deadline = time.monotonic() + 30
            while len(threads.finished) < 50:  # every job done while the loop is busy (here)
                assert time.monotonic() < deadline
                time.sleep(0.01)
            results = await asyncio.gather(*(f for i, f in enumerate(futures) if i != 3), return_exceptions=True)
        finally:
            loop.call_soon_threadsafe = original
            threads.shutdown()
        return wakeups, sorted(ran), results

    wakeups, ran, results = asyncio.run(scenario())
    assert len(wakeups) == 1 and ran == list(range(50))
    expected = [n * n for n in range(50) if n != 3]
    assert [r if not isinstance(r, ValueError) else "seven" for r in results] == \
        [e if e != 49 else "seven" for e in expected]
