"""The connection limit's slots (apps/events/slots.py): a process that dies without releasing
its slots — SIGKILL, a lost machine — stops renewing their leases, and they lapse within a
minute; the slots of a live process's open streams, renewed by id, never do, and a slot whose
stream is gone lapses even while its process lives. The clock is moved instead of waiting."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.events import slots
from apps.events.models import StreamSlot

pytestmark = pytest.mark.django_db

LIMIT = 3


@pytest.fixture
def clock(monkeypatch):
    start = timezone.now()
    state = {"now": start}
    monkeypatch.setattr(slots.timezone, "now", lambda: state["now"])

    def advance(seconds: float):
        state["now"] += timedelta(seconds=seconds)

    return advance


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
    # Renewal also deletes every lapsed row, any process's, any workspace's.
    assert list(StreamSlot.objects.values_list("pk", flat=True)) == [held]
    assert orphan not in (None, held) and elsewhere is not None


def test_a_retried_acquire_finds_its_own_row(acme, clock):
    first = acquire(acme, "p", holder="one-open")
    assert acquire(acme, "p", holder="one-open") == first
    assert StreamSlot.objects.count() == 1
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
