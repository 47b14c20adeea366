"""A burst of stream opens (a reconnect storm) shares its hub work, and stays correct:

- its slots are taken by one job (Hub.acquire_slot → slots.acquire_slots), each open decided in
  the order it asked; an open abandoned while its slot was being taken gives the slot back;
- a key revoked mid-burst refuses every open asking after the revocation (the credential lookup
  is shared only by opens that join a job before it starts, never cached past it);
- the collector waits while opens are in progress and runs again once they pause, and a
  collector someone else disabled is left alone;
- identical opens share their parsed filters; errors are never shared.

Runs on the database store (SQLite) and, with REDIS_URL, on Redis."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest
from django.conf import settings
from django.utils import timezone

from apps.access import admission as admission_module
from apps.oauth.audience import rest_audiences
from apps.core.errors import InsufficientScope, InvalidFilters, Unauthorized
from apps.stream import consumer as consumer_module
from apps.stream import carrier
from apps.stream import slots
from apps.stream.consumer import EventStreamConsumer
from apps.stream.hub import get_hub
from apps.tenancy.models import ApiKey
from tests.hub import run_on_hub
from tests.servers import forget_rate_limit_counts

pytestmark = pytest.mark.django_db(transaction=True)  # the hub's threads read what was committed

LIMIT = 3


async def until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def block_threads(hub) -> list[tuple[threading.Event, asyncio.Future]]:
    """Both hub threads busy until each event is set: what asks meanwhile waits in one job."""
    held = []
    for _ in range(2):
        busy = threading.Event()
        held.append((busy, hub.run_db(busy.wait, 30)))
    return held


@pytest.fixture
def counted_acquires(monkeypatch):
    calls: list[int] = []
    real = slots.acquire_slots

    def counted(requests):
        calls.append(len(requests))
        return real(requests)

    monkeypatch.setattr(slots, "acquire_slots", counted)
    return calls


def test_a_bursts_slots_are_taken_by_one_job_in_the_order_the_opens_asked(acme, counted_acquires):
    async def scenario():
        hub = get_hub()
        await hub.ensure_carrier()  # as an open does first: in Redis this names the process alive
        held = block_threads(hub)
        asks = [hub.acquire_slot(workspace_id=acme.id, limit=LIMIT) for _ in range(LIMIT + 2)]
        await asyncio.sleep(0.05)
        for busy, blocker in held:
            busy.set()
            await blocker
        return await asyncio.gather(*asks)

    got = run_on_hub(scenario())
    assert counted_acquires == [LIMIT + 2]  # one job, every open in it
    assert [g is not None for g in got] == [True] * LIMIT + [False] * 2
    assert slots.open_slots(workspace_id=acme.id) == LIMIT


def test_an_open_abandoned_while_its_slot_is_taken_gives_it_back(acme, counted_acquires, settings):
    """The client goes while the burst's job holds its request: the job still takes its slot
    (the others' go with it), and the slot is released as soon as it arrives."""
    settings.CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE = LIMIT

    async def scenario():
        hub = get_hub()
        await hub.ensure_carrier()
        held = block_threads(hub)
        kept, abandoned = EventStreamConsumer(), EventStreamConsumer()
        opens = [asyncio.ensure_future(c._acquire_slot(hub, acme.id)) for c in (kept, abandoned)]
        await asyncio.sleep(0.05)
        opens[1].cancel()
        for busy, blocker in held:
            busy.set()
            await blocker
        await opens[0]
        with pytest.raises(asyncio.CancelledError):
            await opens[1]
        deadline = time.monotonic() + 30
        while await hub.run_db(slots.open_slots, workspace_id=acme.id) != 1:
            assert time.monotonic() < deadline, "the abandoned open's slot did not go"
            await asyncio.sleep(0.01)
        return kept.slot_id

    kept = run_on_hub(scenario())
    assert counted_acquires == [2]
    assert slots.existing_slots([kept]) == {kept} and slots.open_slots(workspace_id=acme.id) == 1


def test_a_key_revoked_mid_burst_refuses_every_open_that_asks_after(acme, alice_key, monkeypatch):
    """The first job of the burst looks the key up, then the key is revoked (while that job
    still runs); the opens asking from then on form the next job, which sees the revocation."""
    forget_rate_limit_counts()
    lookups: list[int] = []
    real = admission_module.authenticate_bearer

    def lookup_then_revoke(*args, **kwargs):
        lookups.append(1)
        found = real(*args, **kwargs)
        if len(lookups) == 1:
            ApiKey.objects.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        return found

    monkeypatch.setattr(admission_module, "authenticate_bearer", lookup_then_revoke)
    audiences = rest_audiences(settings.CONNECT_BASE_URL)
    authorization = f"Bearer {alice_key}"

    async def scenario():
        hub = get_hub()
        (first_busy, first_blocker), (second_busy, second_blocker) = block_threads(hub)
        before = [asyncio.ensure_future(hub.admit(authorization, audiences=audiences)) for _ in range(3)]
        await asyncio.sleep(0.05)
        first_busy.set()  # one thread takes the first job; the other stays busy
        await first_blocker
        await until(lambda: lookups, "the first job's lookup")
        after = [asyncio.ensure_future(hub.admit(authorization, audiences=audiences)) for _ in range(3)]
        admitted = await asyncio.gather(*before)
        second_busy.set()
        await second_blocker
        return admitted, await asyncio.gather(*after)

    try:
        admitted, refused = run_on_hub(scenario())
    finally:
        forget_rate_limit_counts()
    assert len(lookups) == 2
    assert all(a.error is None and a.principal is not None for a in admitted)
    assert all(isinstance(a.error, Unauthorized) and a.principal is None for a in refused)


def test_a_burst_of_opens_leaves_the_garbage_collector_alone():
    # Every request of the process shares the collector: opens never switch it off.
    assert gc.isenabled()

    async def scenario():
        hub = get_hub()
        for _ in range(carrier.BURST_OPENS * 2):
            hub.opening()
        assert gc.isenabled()
        for _ in range(carrier.BURST_OPENS * 2):
            hub.opened()
        assert gc.isenabled()

    run_on_hub(scenario())


def test_identical_opens_share_their_parsed_filters_and_errors_are_never_kept(monkeypatch):
    consumer_module._SUBSCRIPTIONS.clear()
    parsed: list[bytes] = []
    real = consumer_module._parse_subscription

    def counted(query_string, scopes):
        parsed.append(query_string)
        return real(query_string, scopes)

    monkeypatch.setattr(consumer_module, "_parse_subscription", counted)
    query = b"filters=%5B%7B%22type%22%3A%22session.created%22%7D%5D"
    sessions = frozenset({"svc:sessions:read"})
    first = consumer_module._subscription(query, sessions)
    assert consumer_module._subscription(query, sessions) is first and len(parsed) == 1
    for _ in range(2):  # other scopes: their own answer, an error each time, never kept
        with pytest.raises(InsufficientScope):
            consumer_module._subscription(query, frozenset({"svc:transcripts:read"}))
    with pytest.raises(InvalidFilters):
        consumer_module._subscription(b"filters=%5B", sessions)
    assert len(parsed) == 4 and len(consumer_module._SUBSCRIPTIONS) == 1
    monkeypatch.setattr(consumer_module, "SUBSCRIPTIONS_KEPT", 1)
    other = consumer_module._subscription(b"", sessions)  # full: cleared, then kept
    assert other.default_types and list(consumer_module._SUBSCRIPTIONS) == [(b"", sessions)]
