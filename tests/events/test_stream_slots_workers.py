"""The stream limit across the processes of one `serve --workers 2`, end to end: twenty real SSE
readers open at once for a workspace limited to 3, round after round, and never more than 3
streams are open; the 3 admitted keep their slots after the refused are gone, and closing one
frees exactly one.

Both processes count their stream opens from the same start, so the same open number comes from
each: a slot must be its process's and its open's, never the open's alone. Runs on the database
store (SQLite) and, with REDIS_URL, on Redis, like every live stream test."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings
from django.utils import timezone

from apps.events.models import StreamSlot
from apps.stream import slots
from apps.stream.slots.redis import RedisSlots
from tests.events.live import STREAM_ENV, WAIT, Reader, Server, wait_until
from tests.servers import start
from tests.servers import wait_until as poll_until

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3
OPENS = 20
# Each round is the same race (both processes' opens numbered from where they stand) and closes
# another admitted stream: one round per admitted place. The holder collision this guards
# against showed in the first round of every run.
ROUNDS = LIMIT
# A short lease, so each round sees the hub renew (and check) its slots several times: a stream
# that shares its slot with another process's stream is ended at the first check after the
# other one closes.
LEASE_SECONDS = 9


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    env = {**STREAM_ENV, "CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE": str(LIMIT),
           "CONNECT_SSE_SLOT_LEASE_SECONDS": str(LEASE_SECONDS)}
    live = start(tmp_path_factory.mktemp("slots-workers"), workers=2, base_url=settings.CONNECT_BASE_URL,
                 env=env, kind=Server)
    yield live
    live.stop()


def open_at_once(server: Server, key: str, count: int) -> list[Reader]:
    """`count` readers opened together (released by one barrier), each with its answer."""
    barrier = threading.Barrier(count)
    opened: list[Reader] = []
    lock = threading.Lock()

    def open_one() -> None:
        barrier.wait(timeout=30)
        reader = Reader(server.url, key)
        with lock:
            opened.append(reader)

    threads = [threading.Thread(target=open_one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(opened) == count
    return opened


def open_streams(readers: list[Reader]) -> list[Reader]:
    return [r for r in readers if r.status == 200 and not r.ended]


def lease_ends(workspace_id: int) -> dict[object, float]:
    """The workspace's live slots and when each one's lease ends, in the store the server uses:
    a renewal moves the end later."""
    store = slots.store()
    if isinstance(store, RedisSlots):
        from apps.core.redis_clients import redis_client

        return dict(redis_client().zrangebyscore(RedisSlots.key(workspace_id), int(time.time() * 1000), "+inf",
                                                 withscores=True))
    return {pk: ends.timestamp() for pk, ends in StreamSlot.objects.filter(
        workspace_id=workspace_id, lease_expires_at__gte=timezone.now()).values_list("pk", "lease_expires_at")}


class Renewals:
    """How often each slot live when this was made has been renewed since (its lease's end
    moved), read from the store: each process renews its own streams' slots, on its own clock."""

    def __init__(self, workspace_id: int) -> None:
        self.workspace_id = workspace_id
        self.ends = lease_ends(workspace_id)
        self.counts = dict.fromkeys(self.ends, 0)

    def each_at_least(self, times: int) -> bool:
        for slot, ends in lease_ends(self.workspace_id).items():
            if slot in self.counts and ends > self.ends[slot]:
                self.counts[slot] += 1
                self.ends[slot] = ends
        return all(n >= times for n in self.counts.values())


def keep_streaming(readers: list[Reader], workspace_id: int) -> None:
    """Each reader stays open through two renewals of every slot (a stream whose slot another
    open released is ended by the first renewal after it), a heartbeat arriving after them.
    The renewals are watched in the store, not slept for: a slot released under its stream is
    never renewed again, and its stream ends."""
    renewals = Renewals(workspace_id)
    poll_until(lambda: renewals.each_at_least(2) or any(r.ended for r in readers),
               what="two renewals of every slot", timeout=WAIT, every=0.25)
    seen = {id(r): len(r.comments) for r in readers}
    for reader in readers:
        reader.wait(lambda r: len(r.comments) > seen[id(r)] or r.ended, what="a heartbeat after the renewals")
        assert not reader.ended, "an admitted stream was ended: it lost its slot"


def test_twenty_opens_at_once_on_two_processes_never_pass_the_limit_and_keep_their_slots(server, acme, alice_key):
    assert server.process.poll() is None
    for round_ in range(ROUNDS):
        wait_until(lambda: slots.open_slots(workspace_id=acme.id) == 0, what="the last round's slots to free")
        readers = open_at_once(server, alice_key, OPENS)
        try:
            statuses = sorted(r.status for r in readers)
            admitted = [r for r in readers if r.status == 200]
            assert len(admitted) <= LIMIT, f"round {round_}: {statuses}"
            assert statuses == [200] * LIMIT + [429] * (OPENS - LIMIT), f"round {round_}: {statuses}"
            assert slots.open_slots(workspace_id=acme.id) == LIMIT

            for refused in readers:
                if refused.status != 200:
                    refused.close()
            keep_streaming(admitted, acme.id)
            assert len(open_streams(admitted)) == LIMIT
            assert slots.open_slots(workspace_id=acme.id) == LIMIT

            admitted[round_ % LIMIT].close()  # one leaves: exactly its slot frees
            wait_until(lambda: slots.open_slots(workspace_id=acme.id) == LIMIT - 1, what="one slot to free")
            staying = [r for r in admitted if not r.ended]
            assert len(staying) == LIMIT - 1
            keep_streaming(staying, acme.id)
            assert slots.open_slots(workspace_id=acme.id) == LIMIT - 1
        finally:
            for reader in readers:
                reader.close()
