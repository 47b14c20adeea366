"""A reconnect storm and a burst of abrupt disconnects, end to end against `manage.py serve`:
hundreds of clients resuming at once across a server killed outright (each from its own
`Last-Event-ID`, nothing missed and nothing twice), and what a burst of opens then resets leaves
behind (streams, tasks, stream objects, slots, the server's sockets). The full 5,000-client
storm is bench/sse.py --storm."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import time
from urllib.parse import quote

import pytest

from apps.stream import slots
from apps.events.models import Event
from apps.recordings import services as recordings
from apps.recordings.services import SegmentInput
from tests import factories
from tests.events.live import STREAM, WAIT, abort, start_server, wait_until
from bench.harness import pid_holding_socket, tcp_sockets
from tests.events.test_stream_live import wait_closed
from tests.servers import descendants

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = 150
ID = re.compile(rb"(?:^|\n)id: ([^\r\n]+)\n")


class Client:
    """One SSE client on a non-blocking socket: its status and the event ids it read, in order."""

    def __init__(self, port: int, key: str, path: str, last_event_id: str | None = None) -> None:
        self.sock = socket.socket()
        self.sock.setblocking(False)
        self.sock.connect_ex(("127.0.0.1", port))
        resume = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id else ""
        self.request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n{resume}\r\n".encode()
        self.sent = False
        self.buffer = b""
        self.status: int | None = None
        self.ended = False

    def ids(self) -> list[str]:
        return [m.decode() for m in ID.findall(self.buffer.partition(b"\r\n\r\n")[2])]


def run(clients: list[Client], until, *, what: str) -> None:
    """Drive every client (send its request once connected, read what arrives) until `until()`."""
    selector = selectors.DefaultSelector()
    for client in clients:
        selector.register(client.sock, selectors.EVENT_WRITE | selectors.EVENT_READ, client)
    deadline = time.monotonic() + WAIT
    try:
        while not until():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            for key, events in selector.select(timeout=0.2):
                client = key.data
                if not client.sent and events & selectors.EVENT_WRITE:
                    client.sock.sendall(client.request)
                    client.sent = True
                    selector.modify(client.sock, selectors.EVENT_READ, client)
                    continue
                if events & selectors.EVENT_READ:
                    try:
                        chunk = client.sock.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except ConnectionError:
                        chunk = b""
                    if not chunk:
                        client.ended = True
                        selector.unregister(client.sock)
                        continue
                    client.buffer += chunk
                    if client.status is None and b"\r\n\r\n" in client.buffer:
                        client.status = int(client.buffer.split(b" ", 2)[1])
    finally:
        selector.close()


def server_ends(server, sockets: list[socket.socket]) -> set[str]:
    """The inodes of the server's side of these client sockets: local port the server's, remote
    port one of theirs (on a busy machine another connection may share a client's port number)."""
    ports = {f"{sock.getsockname()[1]:04X}" for sock in sockets}
    ends = {inode for _, remote, inode, _ in tcp_sockets(server.port) if remote.rsplit(":", 1)[1] in ports} - {"0"}
    assert len(ends) == len(sockets), ends
    assert pid_holding_socket(descendants(server.process.pid), ends) is not None
    return ends


def kill(server) -> None:
    """The server gone at once, every process of it (SIGKILL: no goodbye, no slot released)."""
    for pid in [server.process.pid, *descendants(server.process.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.process.wait(timeout=30)


def append(session, n: int) -> None:
    """The session's n-th segment (its own time, after the ones before): one event."""
    recordings.append_committed_segments(
        session=session, segments=[SegmentInput(n * 2000, n * 2000 + 1800, f"segment {n}", "Speaker 1", 0.9)])


def segment_events(session) -> list[str]:
    return list(
        Event.objects.filter(session_id=session.id, type="transcript.segment.created")
        .order_by("position", "id")
        .values_list("id", flat=True)
    )


def test_hundreds_of_clients_resume_at_once_across_a_killed_server(acme, alice_key, tmp_path):
    # Room for the killed server's slots too: embedded, its rows stay until their lease lapses.
    env = {"CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE": str(2 * CLIENTS + 10)}
    server = start_server(tmp_path, **env)
    try:
        session = factories.session(acme)
        path = STREAM + "?filters=" + quote(json.dumps([{"type": "transcript.segment.created", "sessionId": session.id}]))
        for n in range(4):
            append(session, n)
        first = segment_events(session)
        assert len(first) == 4
        # Every client read some of the first four (live streams at first, the kill hits them open)
        # and says so with its own Last-Event-ID.
        clients = [Client(server.port, alice_key, path) for _ in range(CLIENTS)]
        run(clients, lambda: all(c.status is not None for c in clients), what="the first opens")
        assert {c.status for c in clients} == {200}
        port = server.port
        kill(server)
        for n in (4, 5):  # committed while no server runs
            append(session, n)
        server = start_server(tmp_path, port=port, **env)
        last_ids = [first[i % 4] for i in range(CLIENTS)]
        storm = [Client(port, alice_key, path, last_event_id=last) for last in last_ids]
        run(storm, lambda: all(c.status is not None for c in storm), what="every client to stream again")
        assert {c.status for c in storm} == {200}
        append(session, 6)
        log = segment_events(session)
        assert len(log) == 7
        run(storm, lambda: all(log[-1] in c.ids() or c.ended for c in storm), what="every client to get the last event")
        for client, last in zip(storm, last_ids):
            # Exactly what followed its id, in log order: nothing missed, nothing twice.
            assert client.ids() == log[log.index(last) + 1 :], (last, client.ids())
        for client in clients + storm:
            client.sock.close()
    finally:
        server.stop()


def test_a_burst_of_opens_then_resets_leaves_no_stream_task_object_slot_or_socket(acme, alice_key, tmp_path):
    burst = 60
    server = start_server(tmp_path, CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE=str(burst))
    try:
        warm = Client(server.port, alice_key, STREAM)  # the hub, its tasks and pools exist from here on
        run([warm], lambda: warm.status is not None, what="a first stream")
        abort(warm.sock)
        wait_until(lambda: server.stats()["streams"] == 0, what="the first stream to end")
        # Its objects too (they may wait for the cyclic collector), so the count below is the burst's.
        wait_until(lambda: server.stats()["streamObjects"] == 0, what="the first stream's objects to go")
        before = server.stats()
        clients = [Client(server.port, alice_key, STREAM) for _ in range(burst)]
        run(clients, lambda: all(c.status is not None for c in clients), what="the burst of opens")
        assert {c.status for c in clients} == {200}
        ends = server_ends(server, [c.sock for c in clients])
        # Open and live, and no task of their own: their consumers have ended.
        wait_until(lambda: (s := server.stats())["live"] == burst and s["streamTasks"] == before["streamTasks"],
                   what="the burst's consumers to end, their streams live")
        open_stats = server.stats()
        assert open_stats["streams"] == burst and open_stats["deliveryTasks"] == 0
        assert open_stats["tasks"] == before["tasks"]
        assert open_stats["streamObjects"] == 2 * burst  # a Stream and a LiveStream each
        # daphne's input queue of each live stream is dropped with its consumer (memory per stream):
        # the few left are other requests' (the stats reads', ones whose connection is closing).
        assert open_stats["inputQueues"] < burst // 4, open_stats
        assert slots.open_slots(workspace_id=acme.id) == burst
        for client in clients:
            abort(client.sock)
        wait_until(lambda: server.stats()["streams"] == 0, what="the streams to end")
        wait_until(lambda: server.stats()["streamObjects"] == 0, what="no stream object left")
        after = server.stats()
        assert (after["queued"], after["live"], after["paused"], after["tasks"]) == (0, 0, 0, before["tasks"])
        wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 0, what="the slots to free")
        wait_closed(server, ends)
    finally:
        server.stop()


@pytest.mark.skipif(bool(__import__("django.conf").conf.settings.REDIS_URL), reason="embedded only: Redis wakes the followers")
def test_embedded_a_commit_in_another_process_wakes_the_server_without_waiting_for_its_poll(acme, alice_key, tmp_path):
    """This test process commits; the server's follower is woken by its datagram (counted), not
    only found by the 100 ms poll, and the stream gets the event."""
    server = start_server(tmp_path)
    try:
        session = factories.session(acme)
        path = STREAM + "?filters=" + quote(json.dumps([{"type": "transcript.segment.created", "sessionId": session.id}]))
        client = Client(server.port, alice_key, path)
        run([client], lambda: client.status is not None, what="the stream to open")
        before = server.stats()["commitWakeups"]
        append(session, 0)
        run([client], lambda: len(client.ids()) == 1, what="the event")
        assert server.stats()["commitWakeups"] > before
        client.sock.close()
    finally:
        server.stop()


def test_sigterm_with_streams_open_ends_them_and_the_server_exits_by_itself(acme, alice_key, tmp_path):
    """A graceful restart: SIGTERM to `serve` with streams open ends every stream (the clients see
    their responses end and resume elsewhere) and each daphne process exits by itself, not killed
    by `serve` after its STOP_SECONDS: `serve` exits 0)."""
    server = start_server(tmp_path, CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE="50")
    clients = [Client(server.port, alice_key, STREAM) for _ in range(20)]
    try:
        run(clients, lambda: all(c.status is not None for c in clients), what="the opens")
        assert {c.status for c in clients} == {200}
        server.process.terminate()
        run(clients, lambda: all(c.ended for c in clients), what="every stream to end")
        server.process.wait(timeout=60)
        # Each response ended by the server (HTTP/1.1's last chunk), not cut by a kill.
        assert all(c.buffer.endswith(b"\r\n0\r\n\r\n") for c in clients), [c.buffer[-40:] for c in clients]
        assert server.process.returncode == 0, server.log.read_text()[-2000:]
    finally:
        for client in clients:
            client.sock.close()
        server.stop()
