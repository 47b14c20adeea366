"""django-q2 tasks: drains, the sweeper and the purge. Tasks carry no delivery: a drain claims
due deliveries from their rows, which are the truth (apps/webhooks/delivery.py)."""

from __future__ import annotations

from django.db import close_old_connections

from apps.webhooks import delivery, drain_queue, owners
from apps.webhooks.models import QueuedDrain
from apps.webhooks.services import purge_terminal_deliveries


def drain() -> int:
    """The task: attempt due deliveries until none is left or its time is up. It first marks
    that no drain is waiting, before its first claim, so a delivery committed after that
    claim's snapshot queues the next drain instead of waiting on this one."""
    close_old_connections()
    QueuedDrain.objects.filter(pk=1).update(until=None)
    return len(delivery.drain(on_backlog=drain_queue.request_drain))


def sweep() -> int:
    """Queue a drain while any delivery is due: retries whose time came, deliveries whose drain
    was lost, attempts whose worker died (their lease expired); first, the owners' upkeep
    (apps/webhooks/owners.py), which may queue some. Returns drains queued (0 or 1)."""
    owners.upkeep()
    return int(delivery.any_due() and drain_queue.request_drain())


def purge() -> int:
    return purge_terminal_deliveries()
