"""The event stream through faults, on the real parts: a live `manage.py serve` on PostgreSQL
with a redis-server of the test's own, killed with SIGKILL and started again on the same port,
and the server's PostgreSQL backends terminated under it.

After each fault: the slots (in Redis, as in production) equal the open streams within one lease (short here,
`CONNECT_SSE_SLOT_LEASE_SECONDS`), streams that were open end so their clients resume with
`Last-Event-ID` and miss nothing, an open during a Redis outage is `503 unavailable` with
`Retry-After`, and no delivery task, queue or socket is left behind."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

import redis

from apps.core.redis_clients import redis_client
from apps.events.models import Event
from apps.stream import slots
from apps.stream.slots.redis import RedisSlots
from tests import factories
from tests.events.faults import (
    REDIS_SERVER,
    RedisServer,
    backends,
    client_sockets,
    raw_resume,
    read_until,
    terminate_backends,
)
from tests.events.live import STREAM, WAIT, abort, start_server, wait_until
from tests.servers import database_url_for_test_db, descendants, without_request_id

pytestmark = [
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="the fault cases run on PostgreSQL (DATABASE_URL), as production does",
    ),
    pytest.mark.skipif(REDIS_SERVER is None, reason="no redis-server on this machine"),
    pytest.mark.django_db(transaction=True),
]

APPLICATION_NAME = "connect-stream-faults"
LEASE = 6  # seconds (renewed every 2 s); production's is 45
STREAMS = 4


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    live = start_server(
        tmp_path_factory.mktemp("events-faults"),
        REDIS_URL=redis_server.url,
        # Named, so the test terminates the server's connections and never its own.
        DATABASE_URL=f"{database_url_for_test_db()}?application_name={APPLICATION_NAME}",
        CONNECT_SSE_SLOT_LEASE_SECONDS=str(LEASE),
        CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE=str(STREAMS + 2),
    )
    yield live
    live.stop()


@pytest.fixture
def publish(redis_server, settings):
    """Events this test commits are published on the test's own Redis, as the server's are."""
    if not redis_server.answers():
        redis_server.start()
    settings.REDIS_URL = redis_server.url  # the Redis client follows REDIS_URL (apps/core/redis_clients.py)
    yield


def slot_rows() -> int:
    """Live slots in the server's Redis; a Redis that is down holds none (no persistence: it
    comes back empty, as a crashed cache does)."""
    try:
        return slots.open_slots()
    except redis.ConnectionError:
        return 0


def slots_leased_past(moment) -> int:
    """Slots whose lease ends after `moment` (renewed since `moment - lease`)."""
    client = redis_client()
    return sum(client.zcount(key, int(moment.timestamp() * 1000), "+inf") for key in RedisSlots.keys())


def open_stream(server, key: str) -> httpx.Response:
    with httpx.stream("GET", server.url + STREAM, headers={"Authorization": f"Bearer {key}"}, timeout=30) as r:
        if r.status_code != 200:
            r.read()
        return r


def settled(server, base: dict) -> bool:
    """Nothing left of the streams that ended: the hub, its tasks and the slot rows agree."""
    stats = server.stats()
    return (
        stats["streams"] == base["streams"]
        and stats["deliveryTasks"] == base["deliveryTasks"]
        and stats["queued"] == 0
        and slot_rows() == stats["streams"]
    )


def test_a_redis_kill_ends_the_streams_leaves_no_slot_and_they_resume(
    server, redis_server, publish, readers, acme, alice_key
):
    warm = readers(server, alice_key)  # the hub, its subscription and the pools exist from here on
    assert warm.status == 200
    warm.close()
    base = server.stats()
    wait_until(lambda: settled(server, {**base, "streams": 0, "deliveryTasks": 0}), what="the first stream to end")
    base = server.stats()
    sockets_before = client_sockets(server)  # the stats request's may still be closing: at most one
    opened = [readers(server, alice_key) for _ in range(STREAMS)]
    assert [r.status for r in opened] == [200] * STREAMS
    wait_until(lambda: server.stats()["streams"] == base["streams"] + STREAMS, what="the streams to open")
    assert slot_rows() == STREAMS
    assert client_sockets(server) >= sockets_before + STREAMS
    factories.session(acme)
    last_ids = [r.wait_events(1)[-1].id for r in opened]

    redis_server.kill()
    for reader in opened:
        reader.wait(lambda r: r.ended, what="the stream to end when Redis went away")
        reader.close()  # the response ended; this also drops the client's kept-alive connection
    # Committed while Redis is down: not published, but resume finds it.
    missed = factories.session(acme)
    # Within one lease (the bound is generous for a busy machine) the slots equal the streams.
    wait_until(lambda: settled(server, base), what="slot rows to equal open streams", timeout=LEASE + WAIT)

    redis_server.start()
    # Resumed on bare sockets, so the clients can then vanish abruptly (a reset, no goodbye).
    again = [raw_resume(server.port, alice_key, last_id) for last_id in last_ids]
    missed_id = Event.objects.get(session_id=missed.id).id
    for sock in again:
        read_until(sock, f"id: {missed_id}".encode())
    assert slot_rows() == STREAMS and server.stats()["streams"] == base["streams"] + STREAMS
    live = factories.session(acme)
    live_id = Event.objects.get(session_id=live.id).id
    for sock in again:
        read_until(sock, f"id: {live_id}".encode())
    for sock in again:
        abort(sock)
    wait_until(lambda: settled(server, base), what="the vanished clients' streams to free everything")
    assert slot_rows() == 0
    wait_until(lambda: client_sockets(server) <= sockets_before, what="the server to close the sockets")


def test_opening_during_a_redis_outage_is_503_and_recovers_by_itself(
    server, redis_server, publish, readers, acme, alice_key
):
    base = server.stats()
    redis_server.kill()
    for _ in range(3):
        refused = open_stream(server, alice_key)
        assert refused.status_code == 503, refused.text
        assert without_request_id(refused.json()) == {"error": "unavailable"}
        assert refused.headers["content-type"] == "application/json"
        assert int(refused.headers["retry-after"]) >= 1
    assert slot_rows() == 0 and server.stats()["streams"] == base["streams"]

    redis_server.start()
    reader = readers(server, alice_key)  # the next open subscribes again
    assert reader.status == 200
    session = factories.session(acme)
    assert reader.wait_events(1)[0].json["sessionId"] == session.id
    assert slot_rows() == 1


def test_terminated_database_connections_heal_before_the_stream_sees_them(server, publish, readers, acme, alice_key):
    base = server.stats()
    first = readers(server, alice_key)
    assert first.status == 200
    factories.session(acme)
    last_id = first.wait_events(1)[0].id
    missed = factories.session(acme)
    first.wait_events(2)
    assert terminate_backends(APPLICATION_NAME) >= 1

    # Authentication, the slot and the resume read all meet the dead pooled connections first.
    second = readers(server, alice_key, last_event_id=last_id)
    assert second.status == 200, second.body
    assert second.wait_events(1)[0].json["sessionId"] == missed.id
    assert slot_rows() == 2

    # The hub's maintenance meets dead connections too (its credential recheck), and the slots
    # (in Redis, no database round trip) are still renewed.
    assert terminate_backends(APPLICATION_NAME) >= 1
    terminated_at = timezone.now()
    wait_until(
        lambda: slots_leased_past(terminated_at + timedelta(seconds=LEASE)) == 2,
        what="both leases renewed after the backends were terminated",
        timeout=LEASE + WAIT,
    )
    # The server holds fresh connections again: its next credential recheck (every 0.5 s here)
    # reconnects; the renewals above go to Redis and may all come first on a busy machine.
    wait_until(lambda: backends(APPLICATION_NAME) >= 1, what="the server's fresh database connections")
    for reader in (first, second):
        reader.close()
    wait_until(lambda: settled(server, base), what="the streams to free everything")


def test_a_killed_servers_slots_lapse_and_are_cleared_by_a_live_server(
    server, publish, readers, tmp_path, acme, alice_key
):
    survivor = readers(server, alice_key)  # the live server holds one stream and renews
    assert survivor.status == 200
    victim = start_server(
        tmp_path,
        REDIS_URL=settings.REDIS_URL,
        CONNECT_SSE_SLOT_LEASE_SECONDS=str(LEASE),
        CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE=str(STREAMS + 2),
    )
    try:
        sockets = [raw_resume(victim.port, alice_key, None) for _ in range(2)]
        wait_until(lambda: slot_rows() == 3, what="three slots taken")
        # SIGKILL of the whole server, as a lost machine: nothing releases, nothing renews.
        for pid in [victim.process.pid, *descendants(victim.process.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        victim.process.wait(timeout=WAIT)
    finally:
        victim.stop()
    for sock in sockets:
        sock.close()
    wait_until(lambda: slot_rows() == 1, what="the killed server's slots to lapse", timeout=LEASE + WAIT)
    assert not survivor.ended
    survivor.close()
    wait_until(lambda: slot_rows() == 0 and server.stats()["streams"] == 0, what="the survivor's stream to end")


def test_a_killed_servers_slots_free_at_once_for_its_reconnecting_clients(
    server, publish, readers, tmp_path, acme, alice_key
):
    """A host killed while its streams are open: its clients reconnect elsewhere at once and
    must not be refused (`429 connection_limit`) for the lease's remainder. The lease here is
    ten minutes, so only the dead process's Redis connection, gone with it, can free the slots.
    A live but frozen server (SIGSTOP: no renewals, no answers) keeps its slots: load is never
    taken for death."""
    limit, lease = 2, 600
    env = dict(REDIS_URL=settings.REDIS_URL, CONNECT_SSE_SLOT_LEASE_SECONDS=str(lease),
               CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE=str(limit))
    survivor = start_server(tmp_path, **env)
    victim = start_server(tmp_path, **env)
    pids = [victim.process.pid, *descendants(victim.process.pid)]
    try:
        sockets = [raw_resume(victim.port, alice_key, None) for _ in range(limit)]
        refused = open_stream(survivor, alice_key)
        assert refused.status_code == 429 and refused.json()["error"] == "connection_limit"  # across instances

        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            frozen = open_stream(survivor, alice_key)
            assert frozen.status_code == 429, frozen.text  # alive, only stalled: its slots stand
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)  # a lost machine: nothing releases, nothing renews
            except ProcessLookupError:
                pass
        victim.process.wait(timeout=WAIT)
        for sock in sockets:
            sock.close()
        # The reconnects come at once; Redis may take a moment to see the connection close.
        answers: list[int] = []
        admitted = []

        def reconnected() -> bool:
            reader = readers(survivor, alice_key)
            answers.append(reader.status)
            if reader.status == 200:
                admitted.append(reader)
            return len(admitted) == limit

        wait_until(reconnected, what="the killed server's clients to be admitted")
        assert set(answers) <= {200, 429}, answers
        assert open_stream(survivor, alice_key).status_code == 429  # and the limit holds again
    finally:
        victim.stop()
        survivor.stop()
