"""The connection limit's slots (apps/events/slots.py): a process that dies without releasing
its slots — SIGKILL, a lost machine — stops renewing their leases, and they lapse within a
minute; a live process's renewed slots never do. The clock is moved instead of waiting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.events import slots

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


def acquire(acme, process):
    return slots.acquire_slot(workspace_id=acme.id, process=process, limit=LIMIT)


def test_a_dead_processes_slots_lapse_within_a_minute(acme, clock):
    assert all(acquire(acme, "dead") for _ in range(LIMIT))
    assert acquire(acme, "alive") is None  # full
    # The dead process renewed last at the moment it died; nobody renews after that.
    assert slots.LEASE_SECONDS < 60
    clock(slots.LEASE_SECONDS - 1)
    assert acquire(acme, "alive") is None
    clock(2)
    assert acquire(acme, "alive") is not None
    assert slots.open_slots(workspace_id=acme.id) == 1


def test_a_live_process_keeps_its_slots_by_renewing(acme, clock):
    assert all(acquire(acme, "alive") for _ in range(LIMIT))
    for _ in range(10):  # far longer than one lease, renewed on the hub's schedule
        clock(slots.LEASE_RENEW_SECONDS)
        slots.renew_leases(process="alive")
        assert acquire(acme, "other") is None
    assert slots.open_slots(workspace_id=acme.id) == LIMIT


def test_released_slots_free_at_once_and_other_workspaces_are_apart(acme, globex, clock):
    taken = [acquire(acme, "p") for _ in range(LIMIT)]
    assert slots.acquire_slot(workspace_id=globex.id, process="p", limit=LIMIT) is not None
    slots.release_slot(taken[0])
    assert acquire(acme, "p") is not None
    slots.release_process(process="p")
    assert slots.open_slots(workspace_id=acme.id) == 0
    assert slots.open_slots(workspace_id=globex.id) == 0
