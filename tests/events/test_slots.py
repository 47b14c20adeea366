"""The connection limit's slots (apps/stream/slots/): a process that dies without releasing
its slots — SIGKILL, a lost machine — stops renewing their leases, and they lapse within a
minute; the slots of a live process's open streams, renewed by id, never do, and a slot whose
stream is gone lapses even while its process lives. The clock is moved instead of waiting.

Every rule runs on both stores: the database's rows (embedded default) and Redis (production,
a real redis-server of the test's own). In Redis a process counts as alive while it holds its
named connection (`connected`); one killed outright loses it, and its slots go at once."""

from __future__ import annotations

import secrets
import threading
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from apps.events import fanout
from apps.stream import slots
from apps.events.models import StreamSlot
from apps.stream.slots import database as database_store
from tests.redis_server import REDIS_SERVER, RedisServer

pytestmark = pytest.mark.django_db

LIMIT = 3
PROCESSES = ("dead", "alive", "live", "other", "p")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    if REDIS_SERVER is None:
        pytest.skip("no redis-server on this machine")
    server = RedisServer(tmp_path_factory.mktemp("slots-redis"))
    yield server
    server.stop()


@pytest.fixture(params=["database", "redis"], autouse=True)
def store(request, settings):
    """The store under test; in Redis every process these tests name holds its hub connection
    (alive, maybe not renewing: a frozen or cut-off host) unless a test drops it."""
    fanout._publisher = None
    if request.param == "database":
        settings.REDIS_URL = None
        yield {}
    else:
        server = request.getfixturevalue("redis_server")
        settings.REDIS_URL = server.url
        redis.Redis.from_url(server.url).flushdb()
        connections = {name: redis.Redis.from_url(server.url, client_name=slots.hub_client_name(name))
                       for name in PROCESSES}
        for connection in connections.values():
            connection.ping()
        yield connections
        for connection in connections.values():
            connection.close()
    fanout._publisher = None


@pytest.fixture
def clock(monkeypatch):
    start = timezone.now()
    state = {"now": start}
    monkeypatch.setattr(timezone, "now", lambda: state["now"])

    def advance(seconds: float):
        state["now"] += timedelta(seconds=seconds)

    return advance


def run_at_once(target, arguments) -> None:
    """`target(argument)` for each argument, each on a thread of its own, all joined."""
    threads = [threading.Thread(target=target, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def acquire(acme, process, holder=None):
    holder = holder or secrets.token_hex(16)
    return slots.acquire_slot(workspace_id=acme.id, process=process, limit=LIMIT, holder=holder)


def test_a_dead_processes_slots_lapse_within_a_minute(acme, clock):
    assert all(acquire(acme, "dead") for _ in range(LIMIT))
    assert acquire(acme, "alive") is None  # full
    # The dead process renewed last at the moment it died; nobody renews after that.
    assert slots.lease_seconds() == 45 < 60
    clock(slots.lease_seconds() - 1)
    assert acquire(acme, "alive") is None
    clock(2)
    assert acquire(acme, "alive") is not None
    assert slots.open_slots(workspace_id=acme.id) == 1


def test_a_live_process_keeps_its_open_streams_slots_by_renewing(acme, clock):
    held = [acquire(acme, "alive") for _ in range(LIMIT)]
    for _ in range(10):  # far longer than one lease, renewed on the hub's schedule
        clock(slots.renew_every_seconds())
        assert slots.renew_leases(slot_ids=held) == LIMIT
        assert acquire(acme, "other") is None
    assert slots.open_slots(workspace_id=acme.id) == LIMIT


def test_a_slot_whose_stream_is_gone_lapses_while_its_process_lives(acme, globex, clock):
    held = acquire(acme, "alive")
    orphan = acquire(acme, "alive")  # its consumer died without releasing it
    elsewhere = slots.acquire_slot(workspace_id=globex.id, process="dead", limit=LIMIT, holder="x")
    for _ in range(4):
        clock(slots.renew_every_seconds())
        slots.renew_leases(slot_ids=[held])
    assert slots.existing_slots([held, orphan, elsewhere]) == {held}
    assert slots.open_slots() == 1
    assert orphan not in (None, held) and elsewhere is not None


def test_a_retried_acquire_finds_its_own_row(acme, clock):
    first = acquire(acme, "p", holder="one-open")
    assert acquire(acme, "p", holder="one-open") == first
    assert slots.open_slots() == 1
    assert acquire(acme, "p", holder="another-open") not in (None, first)


def test_released_slots_free_at_once_and_other_workspaces_are_apart(acme, globex, clock):
    taken = [acquire(acme, "p") for _ in range(LIMIT)]
    assert slots.acquire_slot(workspace_id=globex.id, process="p", limit=LIMIT, holder="g") is not None
    slots.release_slot(taken[0])
    assert acquire(acme, "p") is not None
    slots.release_process(process="p")
    assert slots.open_slots(workspace_id=acme.id) == 0
    assert slots.open_slots(workspace_id=globex.id) == 0


def test_a_full_workspace_whose_slots_missed_their_renewals_is_told_when_they_lapse(acme, clock):
    """A host stopped mid-stream: its rows still fill the limit until their lease lapses, while
    its clients reconnect elsewhere. That refusal is transient (503 with Retry-After, saying
    when), not the workspace's own streams (429 connection_limit, None here)."""
    live = [acquire(acme, "live") for _ in range(LIMIT - 1)]
    dead = acquire(acme, "dead")
    assert acquire(acme, "live") is None and slots.overdue_retry_after(workspace_id=acme.id) is None

    clock(slots.renew_every_seconds())
    slots.renew_leases(slot_ids=live)
    clock(slots.renew_every_seconds())
    slots.renew_leases(slot_ids=live)
    clock(1)  # the dead host has now missed two renewals
    assert acquire(acme, "live") is None
    retry_after = slots.overdue_retry_after(workspace_id=acme.id)
    assert retry_after is not None and 1 <= retry_after <= slots.renew_every_seconds() + 1

    clock(retry_after)  # once it lapsed, the reconnect gets the dead host's place
    assert acquire(acme, "live") is not None and dead not in slots.existing_slots([dead])


@pytest.mark.django_db(transaction=True)  # the threads' own connections see the workspace
def test_a_concurrent_burst_from_two_instances_never_passes_the_limit(acme, store):
    """Two instances (own connections each: the database's, or Redis clients) open at once:
    exactly LIMIT win, whichever instance they come from."""
    barrier = threading.Barrier(12)
    won: list = []
    errors: list = []

    def open_one(process: str) -> None:
        from django.db import connection

        try:
            barrier.wait(timeout=30)
            slot = slots.acquire_slot(workspace_id=acme.id, process=process, limit=LIMIT, holder=secrets.token_hex(16))
            if slot is not None:
                won.append(slot)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=open_one, args=("alive" if n % 2 else "other",)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert len(won) == LIMIT == len(set(won)) == slots.open_slots(workspace_id=acme.id)


def test_a_killed_processes_slots_free_at_once_in_redis_and_a_frozen_ones_do_not(acme, store, clock):
    """The reconnect after a host was killed: its hub's Redis connection closed with it, so a full
    workspace's next open frees its slots on the spot, long before their leases lapse. A process
    that is alive but stalled (frozen, overloaded: no renewals) keeps its connection and its slots
    until the lease says otherwise."""
    if not store:
        pytest.skip("Redis only: the database store waits for the lease")
    frozen = [acquire(acme, "alive") for _ in range(LIMIT - 1)]
    killed = acquire(acme, "dead")
    assert acquire(acme, "other") is None  # full, every holder connected
    store["dead"].close()  # the process is gone: Redis drops its connection
    clock(1)
    taken = acquire(acme, "other")
    assert taken is not None and slots.existing_slots([killed, *frozen, taken]) == {*frozen, taken}
    assert acquire(acme, "other") is None  # the frozen process's slots stand
    assert slots.overdue_retry_after(workspace_id=acme.id) is None


def _burst(workspace_id: int, processes: list[str], limit: int) -> tuple[list, int]:
    """One open per entry of `processes`, all at once (threads released together)."""
    barrier = threading.Barrier(len(processes))
    won: list = []
    refused: list = []
    errors: list = []

    def open_one(process: str) -> None:
        try:
            barrier.wait(timeout=30)
            slot = slots.acquire_slot(workspace_id=workspace_id, process=process, limit=limit,
                                      holder=secrets.token_hex(16))
            (won if slot is not None else refused).append(slot)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    run_at_once(open_one, processes)
    assert not errors
    return won, len(refused)


def test_a_reconnect_burst_after_a_kill_fills_the_workspace_to_the_limit_and_none_is_refused(acme, store):
    """The storm after a `serve` restart (issue 26): a killed process held the whole workspace,
    and exactly `limit` of its clients reconnect at once to two live instances. None is refused:
    every refused open retries after an eviction that began after its refusal (the old code
    refused an open whose own eviction found nothing left because a concurrent open's eviction
    had just freed it all). Then a second instance is killed, and a burst larger than the room it
    left gets exactly that room: the limit holds while evictions race the opens."""
    if not store:
        pytest.skip("Redis only: the database store waits for the lease")
    limit, extra = 24, 6
    killed = [slots.acquire_slot(workspace_id=acme.id, process="dead", limit=limit, holder=secrets.token_hex(16))
              for _ in range(limit)]
    assert None not in killed and slots.open_slots(workspace_id=acme.id) == limit
    store["dead"].close()  # killed: Redis drops its hub connection
    won, refused = _burst(acme.id, ["alive", "other"] * (limit // 2), limit)
    assert refused == 0 and len(set(won)) == limit == slots.open_slots(workspace_id=acme.id)
    assert not slots.existing_slots(killed)
    assert _burst(acme.id, ["alive", "other"] * (extra // 2), limit) == ([], extra)  # full: refused
    store["other"].close()  # the second instance is killed: half the workspace is dead
    won_again, refused = _burst(acme.id, ["alive", "live"] * ((limit // 2 + extra) // 2 + 1), limit)
    assert len(won_again) == limit // 2 and refused == (limit // 2 + extra) // 2 * 2 + 2 - limit // 2
    assert slots.open_slots(workspace_id=acme.id) == limit
    assert slots.existing_slots(won) == {slot for slot in won if "|alive|" in slot}


def test_a_hub_at_its_start_frees_the_slots_of_killed_processes_in_every_workspace(acme, globex, store, clock):
    """`evict_dead_processes` (a hub's start): the killed process's slots go in every workspace;
    a live process's stay, renewed or not; the database store leaves them to their leases."""
    dead = [acquire(acme, "dead"), slots.acquire_slot(workspace_id=globex.id, process="dead", limit=LIMIT, holder="g")]
    alive = acquire(acme, "alive")
    if store:
        store["dead"].close()
    clock(1)
    freed = slots.evict_dead_processes()
    if not store:
        assert freed == 0 and slots.existing_slots([*dead, alive]) == {*dead, alive}
        clock(slots.lease_seconds() + 1)
        slots.renew_leases(slot_ids=[])  # the hub's renewal drops lapsed rows
        assert slots.existing_slots([*dead, alive]) == set()
        return
    assert freed == 2 and slots.existing_slots([*dead, alive]) == {alive}
    clock(slots.lease_seconds() + 1)  # and a killed process's slot that no eviction saw still lapses
    assert slots.existing_slots([alive]) == set()


@pytest.mark.parametrize("indexed_tries", [database_store._INDEXED_TRIES, 0])
def test_a_freed_number_in_the_middle_is_taken_again_and_the_limit_holds(acme, store, monkeypatch, indexed_tries):
    """The database store finds a free number from its index (past the highest, below the lowest,
    the first gap) instead of reading every row: the same numbers the scan (0 tries) gives."""
    if store:
        pytest.skip("the database store's numbers")
    monkeypatch.setattr(database_store, "_INDEXED_TRIES", indexed_tries)
    taken = [acquire(acme, "p") for _ in range(LIMIT)]
    assert None not in taken and acquire(acme, "p") is None
    numbers = lambda: sorted(StreamSlot.objects.filter(workspace_id=acme.id).values_list("number", flat=True))  # noqa: E731
    assert numbers() == list(range(LIMIT))
    slots.release_slot(taken[1])
    again = acquire(acme, "p")
    assert again is not None and numbers() == list(range(LIMIT)) and acquire(acme, "p") is None
    slots.release_slot(taken[0])
    assert acquire(acme, "p") is not None and numbers() == list(range(LIMIT))
    slots.release_slot(taken[-1])
    assert acquire(acme, "p") is not None and numbers() == list(range(LIMIT)) and acquire(acme, "p") is None


# --- a burst's slots in one call (slots.acquire_slots, the hub's batch) -----------------------
def _requests(workspace_id: int, process: str, count: int, limit: int = LIMIT) -> list[tuple]:
    return [(workspace_id, process, limit, secrets.token_hex(16)) for _ in range(count)]


def test_a_batch_is_decided_in_order_as_if_one_open_after_the_other(acme, globex, store):
    """One call for a burst: the first LIMIT opens of each workspace win, in the order they
    asked, the rest are refused; another workspace's opens in the same call are apart."""
    mixed = [_requests(acme.id, "alive", 1)[0] if n % 3 else _requests(globex.id, "alive", 1)[0] for n in range(9)]
    got = slots.acquire_slots(mixed)
    acme_got = [g for r, g in zip(mixed, got) if r[0] == acme.id]
    globex_got = [g for r, g in zip(mixed, got) if r[0] == globex.id]
    assert acme_got[:LIMIT] == [g for g in acme_got[:LIMIT] if g is not None] and acme_got[LIMIT:] == [None] * 3
    assert None not in globex_got and len(globex_got) == 3
    assert slots.open_slots(workspace_id=acme.id) == LIMIT == slots.open_slots(workspace_id=globex.id)
    assert slots.existing_slots([g for g in got if g is not None]) == {g for g in got if g is not None}


def test_a_retried_batch_finds_its_own_slots_and_takes_no_more(acme, store):
    """A batch whose answer was lost (a connection dropped under it) runs again with the same
    holders: each open gets the slot the first run took for it, and no open a second one."""
    burst = _requests(acme.id, "alive", LIMIT - 1)
    first = slots.acquire_slots(burst)
    again = slots.acquire_slots(burst)
    assert None not in first and again == first
    assert slots.open_slots(workspace_id=acme.id) == LIMIT - 1
    late = slots.acquire_slots(_requests(acme.id, "alive", 2))
    assert late[0] is not None and late[1] is None  # the room the first run left: one


@pytest.mark.django_db(transaction=True)  # the threads' own connections see the workspace
def test_bursts_from_two_instances_at_once_never_pass_the_limit(acme, store):
    """Two instances each take a burst's slots in one call (several calls racing per instance
    too): exactly `limit` win over all of them, whichever instance and batch they come from."""
    limit = 10
    batches = [_requests(acme.id, "alive" if n % 2 else "other", 6, limit) for n in range(6)]
    barrier = threading.Barrier(len(batches))
    won: list = []
    errors: list = []

    def run(batch) -> None:
        from django.db import connection

        try:
            barrier.wait(timeout=30)
            won.extend(slot for slot in slots.acquire_slots(batch) if slot is not None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    run_at_once(run, batches)
    assert not errors
    assert len(won) == limit == len(set(won)) == slots.open_slots(workspace_id=acme.id)


def test_a_batch_refused_by_a_killed_processes_slots_frees_them_and_takes_the_room(acme, store):
    """Redis: a killed process held the workspace; a burst's batch is refused, evicts it (its hub
    connection is gone) and takes the room in its one retry, up to the limit and no further."""
    if not store:
        pytest.skip("Redis only: the database store waits for the lease")
    killed = [acquire(acme, "dead") for _ in range(LIMIT)]
    store["dead"].close()
    got = slots.acquire_slots(_requests(acme.id, "alive", LIMIT + 2))
    assert [g is not None for g in got] == [True] * LIMIT + [False] * 2
    assert not slots.existing_slots(killed) and slots.open_slots(workspace_id=acme.id) == LIMIT


def test_a_batchs_slots_of_a_killed_process_still_lapse(acme, store, clock):
    """Taken in a batch, renewed by nobody (the process was killed and no eviction saw it): each
    lapses after its lease like a slot taken alone."""
    got = slots.acquire_slots(_requests(acme.id, "alive", LIMIT))
    assert None not in got
    clock(slots.lease_seconds() + 1)
    slots.renew_leases(slot_ids=[])  # the database store drops lapsed rows here
    assert slots.existing_slots(got) == set() and slots.open_slots(workspace_id=acme.id) == 0
    assert None not in slots.acquire_slots(_requests(acme.id, "other", LIMIT))
