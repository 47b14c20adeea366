"""Stream slots: the per-workspace connection limit, counted across processes and instances.
Synchronous; the hub runs these on its own threads. One store, chosen once from `REDIS_URL`:
Redis sorted sets in production (`redis.py`), `StreamSlot` rows embedded (`database.py`).

- A workspace never holds more live slots than its limit, however many processes and instances
  open at once: the store arbitrates (an atomic script; the database's unique constraints).
- A slot is one stream open, named by its process and its open (`holder`, unique within the
  process): an acquire run again finds the slot its first run took, never another process's.
- A slot lives as long as a stream its process's hub holds: the hub renews its live streams'
  slots by id, a slot nobody renews lapses after one lease, and a stream whose slot is gone ends.
- Redis: a process's slots go once its hub's named Redis connection is gone (a killed process).
Why: docs/decisions/stream-slots.md."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from apps.stream.slots.base import SlotId, SlotStore, lease_seconds, renew_every_seconds
from apps.stream.slots.database import DatabaseSlots
from apps.stream.slots.redis import ACQUIRE_BATCH, HUB_CLIENT_PREFIX, RedisSlots, hub_client_name

__all__ = [
    "ACQUIRE_BATCH", "HUB_CLIENT_PREFIX", "SlotId", "SlotStore", "acquire_slot", "acquire_slots",
    "evict_dead_processes", "existing_slots", "hub_client_name", "lease_seconds", "open_slots",
    "overdue_retry_after", "release_process", "release_slot", "renew_every_seconds", "renew_leases", "store",
]

_store: SlotStore | None = None
_choosing = threading.Lock()


def store() -> SlotStore:
    """This process's slot store, chosen at first use (the hub's threads ask at once)."""
    global _store
    if _store is None:
        with _choosing:
            if _store is None:
                _store = RedisSlots() if settings.REDIS_URL else DatabaseSlots()
    return _store


@receiver(setting_changed)
def _choose_again(*, setting: str, **kwargs) -> None:
    """A test that switches stores (`override_settings`) gets the one it names."""
    global _store
    if setting == "REDIS_URL":
        _store = None


def acquire_slot(*, workspace_id: int, process: str, limit: int, holder: str) -> SlotId | None:
    """A slot id, or None when the workspace already has `limit` live streams.

    Safe to run again after a failure with the same `process` and `holder` (one per stream
    open): if the first run's slot was taken but its answer lost, the retry finds and returns
    it instead of taking a second one."""
    return store().acquire_many([(workspace_id, process, limit, holder)])[0]


def acquire_slots(requests: list[tuple[int, str, int, str]]) -> list[SlotId | None]:
    """`acquire_slot` for each `(workspace_id, process, limit, holder)`, in order, as if one after
    the other: a burst of stream opens (a reconnect storm) takes its slots in one Redis script
    call per try instead of one round trip per open. Each is decided exactly as `acquire_slot`
    alone (the script runs atomically, so opens on other processes and instances interleave only
    between calls, never inside one) and is as safe to run again."""
    return store().acquire_many(requests) if requests else []


def overdue_retry_after(*, workspace_id: int) -> int | None:
    """When the workspace is at its limit: seconds until the first of its slots that missed two
    renewals lapses, or None when every slot is renewed on time. Such a slot belongs to a process
    that stopped renewing (a host cut off): its client is reconnecting elsewhere, so the refusal
    is a dependency's transient state (503 with Retry-After), not the workspace's own streams
    (429 connection_limit)."""
    seconds = store().overdue_seconds(workspace_id)
    return None if seconds is None else math.floor(seconds) + 1  # the first whole second past its lapse


def evict_dead_processes() -> int:
    """Drop every workspace's slots held by processes known to be gone (a hub runs this at its
    start: the processes a restart killed); the database store leaves them to their leases.
    How many were dropped."""
    return store().evict_dead_processes()


def release_slot(slot_id: SlotId) -> None:
    store().release(slot_id)


def renew_leases(*, slot_ids: Iterable[SlotId]) -> int:
    """Extend the leases of these slots (the live streams of one process), and drop lapsed ones.
    Returns how many were renewed."""
    return store().renew(list(slot_ids))


def existing_slots(slot_ids: Iterable[SlotId]) -> set[SlotId]:
    return store().existing(list(slot_ids))


def release_process(*, process: str) -> None:
    store().release_process(process)


def open_slots(*, workspace_id: int | None = None) -> int:
    """Live (not lapsed) slots of a workspace, or of every workspace."""
    return store().count(workspace_id)
