"""`client.events.stream()` against a live `serve`: every event once, in order, across a server
restart (resume with Last-Event-ID) and across a gap longer than the resume window (caught up
from the event log after `: resume-unavailable`); a silent connection is dropped after the
heartbeat timeout; refusals are typed; `close()` ends it; the async stream under asyncio,
cancelled."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from datetime import timedelta

import connect_client
import pytest

from apps.events.models import Event as EventRow
from tests import factories
from tests.events.live import WAIT, simulate

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SESSION_TYPES = [{"type": "session.created"}, {"type": "session.status_changed"}]


class Follow:
    """A client stream iterated on its own thread, recording what it hands out."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.events: list = []
        self.error: BaseException | None = None
        self.done = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self.stream:
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()
        except BaseException as error:  # noqa: BLE001 - reported to the test
            self.error = error
        finally:
            with self._cond:
                self.done = True
                self._cond.notify_all()

    def wait(self, predicate, what: str, timeout: float = 3 * WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                if self.done:
                    raise AssertionError(f"stream ended while waiting for {what}: {self.error!r}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; got {len(self.events)} events")
                self._cond.wait(remaining)

    def wait_count(self, n: int) -> None:
        self.wait(lambda f: len(f.events) >= n, f"{n} events")

    def stop(self) -> None:
        self.stream.close()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "close() did not end the iteration"
        assert self.error is None, self.error


def log_ids(workspace, types=("session.created", "session.status_changed")) -> list[str]:
    """Every event of `types` the log holds, in the log's order (the order the stream sends)."""
    return [e.id for e in EventRow.objects.filter(workspace_id=workspace.id, type__in=types).order_by("position", "id")]


def wait_connections(stream, n: int) -> None:
    deadline = time.monotonic() + 3 * WAIT
    while stream.connections < n:
        assert time.monotonic() < deadline, f"the stream did not reconnect ({stream.connections} connections)"
        time.sleep(0.05)


def test_every_event_once_in_order_across_a_server_restart(live, client, acme):
    stream = client.events.stream(filters=SESSION_TYPES, min_backoff=0.2, max_backoff=1.0)
    follow = Follow(stream)
    wait_connections(stream, 1)
    for _ in range(3):
        factories.session(acme, completed=True)  # created + status_changed
    follow.wait_count(6)

    # While it is down, `simulate_activity` (its own process) records sessions that go from
    # recording through processing to completed.
    live.restart(lambda: simulate(acme.slug, sessions=2, segments=2))
    expected = log_ids(acme)
    assert len(expected) == 6 + 2 * 3
    follow.wait_count(len(expected))
    assert stream.connections >= 2 and stream.catch_ups == 0  # resumed by the server, not the log
    factories.session(acme)
    follow.wait_count(len(expected) + 1)
    follow.stop()
    ids = [e.id for e in follow.events]
    assert ids == log_ids(acme) and len(set(ids)) == len(expected) + 1
    assert stream.last_event_id == ids[-1]
    assert all(isinstance(e, connect_client.Event) and e.occurred_at.tzinfo is not None for e in follow.events)


def test_a_gap_longer_than_the_resume_window_is_filled_from_the_log(live, client, acme):
    stream = client.events.stream(filters=SESSION_TYPES, min_backoff=0.2, max_backoff=1.0)
    follow = Follow(stream)
    wait_connections(stream, 1)
    factories.session(acme, completed=True)
    follow.wait_count(2)

    def while_down():
        for _ in range(25):
            factories.session(acme, completed=True)
        time.sleep(2.5)  # older than the window below

    live.restart(while_down, CONNECT_SSE_RESUME_SECONDS="1")
    try:
        follow.wait_count(52)
        assert stream.catch_ups >= 1  # the server said resume-unavailable; the log filled the gap
        factories.session(acme)
        follow.wait_count(53)
        follow.stop()
        ids = [e.id for e in follow.events]
        assert ids == log_ids(acme) and len(set(ids)) == 53
    finally:
        live.restart()


def test_past_the_log_too_on_resync_is_called(live, client, acme):
    old = factories.aged_event(acme, "session.created", timedelta(days=31))
    resyncs = []
    stream = client.events.stream(last_event_id=old.id, on_resync=resyncs.append, min_backoff=0.2)
    follow = Follow(stream)
    deadline = time.monotonic() + 3 * WAIT
    while not resyncs:
        assert time.monotonic() < deadline, "on_resync was not called"
        time.sleep(0.05)
    assert isinstance(resyncs[0], connect_client.ResyncRequired)
    factories.session(acme)  # and the stream goes on live
    follow.wait_count(1)
    follow.stop()

    raising = Follow(client.events.stream(last_event_id=old.id, min_backoff=0.2))  # default: raise
    raising.wait(lambda f: f.done, "the stream to end")
    assert isinstance(raising.error, connect_client.ResyncRequired)


def test_refusals_are_raised_not_retried(live, client, alice):
    with pytest.raises(connect_client.InvalidFilters):
        next(iter(client.events.stream(filters=[{"type": "nope"}])))
    with pytest.raises(connect_client.FilterCostExceeded) as caught:
        next(iter(client.events.stream(filters=[{"type": "session.created", "sessionId": f"s{i}"} for i in range(11)])))
    assert (caught.value.cost, caught.value.budget) == (110, 100) and len(caught.value.entries) == 11
    only_sessions = factories.api_key(alice, ["svc:sessions:read"])
    with connect_client.Connect(live.url, api_key=only_sessions) as narrow:
        with pytest.raises(connect_client.InsufficientScope):
            next(iter(narrow.events.stream(filters=[{"type": "transcript.segment.created", "sessionId": "s"}])))


class SilentServer:
    """Answers every connection with a stream's headers and `: connected`, then says nothing:
    a peer that died without a FIN or RST (a real server always pings, so this one is a stub)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"d\r\n: connected\n\n\r\n")
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_silent_connection_is_dropped_after_the_heartbeat_timeout():
    server = SilentServer()
    try:
        with connect_client.Connect(server.url, api_key="svc_x") as client:
            stream = client.events.stream(heartbeat_timeout=0.5, min_backoff=0.1, max_backoff=0.2)
            follow = Follow(stream)
            wait_connections(stream, 3)  # each one dropped after 0.5 s of silence, then reopened
            follow.stop()
            assert follow.events == []
    finally:
        server.close()


def session_in_a_thread(workspace) -> str:
    """A session recorded from a worker thread, whose database connection is closed after (an
    open one would keep PostgreSQL from dropping the test database)."""
    from django.db import connection

    try:
        return factories.session(workspace).id
    finally:
        connection.close()


def test_the_async_client_reads_streams_and_is_cancellable(live, key, acme):
    made = factories.sessions_at_distinct_times(acme, 3)

    async def scenario():
        async with connect_client.AsyncConnect(live.url, api_key=key) as client:
            assert [s.id async for s in client.sessions.list(limit=2)] == [s.id for s in reversed(made)]
            assert (await client.sessions.get(made[0].id)).label == "Session 0"
            page = await client.sessions.list(limit=1).page()
            assert len(page.items) == 1 and page.next_cursor
            with pytest.raises(connect_client.NotFound):
                await client.sessions.get("missing")
            log = client.events.list(type="session.created")
            assert [e.session_id async for e in log] == [s.id for s in made]

            received = []
            stream = client.events.stream(filters=SESSION_TYPES, min_backoff=0.2)

            async def consume():
                async for event in stream:
                    received.append(event)

            task = asyncio.create_task(consume())
            while stream.connections < 1:
                await asyncio.sleep(0.05)
            new_id = await asyncio.to_thread(session_in_a_thread, acme)
            deadline = time.monotonic() + 3 * WAIT
            while new_id not in {e.session_id for e in received}:
                assert time.monotonic() < deadline, "the async stream did not deliver the new session"
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return received, new_id

    received, new_id = asyncio.run(scenario())
    # (a stream may also carry events committed an instant before it opened: docs/events.md)
    assert [e.type for e in received if e.session_id == new_id] == ["session.created"]
    assert len({e.id for e in received}) == len(received)
    deadline = time.monotonic() + 3 * WAIT
    while live.server.stats()["streams"]:  # the cancelled stream's connection was closed
        assert time.monotonic() < deadline, live.server.stats()
        time.sleep(0.1)
