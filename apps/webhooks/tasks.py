"""django-q2 tasks: drains, the sweeper and the purge. Tasks carry no delivery: a drain claims
due deliveries from their rows, which are the truth (apps/webhooks/delivery.py)."""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.tasks import async_task

from apps.webhooks.models import QueuedDrain

logger = logging.getLogger("connect.webhooks")

DRAIN_TASK = "apps.webhooks.tasks.drain"


_broker: tuple[int, object] | None = None


def broker():
    """django-q2's broker, one per process: `get_broker()` builds a new one (with the Redis
    broker, a new client and connection) on every call, which was a fifth of the cost of
    recording an event. A forked child builds its own."""
    global _broker
    if _broker is None or _broker[0] != os.getpid():
        _broker = (os.getpid(), get_broker())
    return _broker[1]


def request_drain() -> bool:
    """Queue a drain task unless one is waiting (QueuedDrain): a burst of events queues one
    task, not one per delivery. Returns whether this call queued it. A failure is logged, not
    raised: the deliveries are committed, and the sweeper queues a drain while any is due."""
    now = timezone.now()
    flag = QueuedDrain.objects.filter(pk=1)
    if flag.filter(until__gt=now).exists():  # a read: the common case takes no write lock
        return False
    # With the ORM broker the flag and the task commit together. (It also closes the database
    # connection before each write unless inside a transaction: django_q/brokers/orm.py.)
    orm = settings.Q_CLUSTER.get("orm")
    try:
        with transaction.atomic(using=orm) if orm else contextlib.nullcontext():
            if not _take_flag(flag, now):
                return False
            async_task(DRAIN_TASK, q_options={"save": False, "broker": broker()})
    except Exception:  # noqa: BLE001 - the broker may be down; the sweeper recovers
        if not orm:
            flag.update(until=None)
        logger.exception("could not queue a webhook drain; the sweeper will")
        return False
    return True


def _take_flag(flag, now) -> bool:
    free = flag.filter(Q(until__isnull=True) | Q(until__lte=now))
    until = now + timedelta(seconds=settings.CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS)
    if free.update(until=until):
        return True
    if flag.exists():  # another process queued one just now
        return False
    QueuedDrain.objects.bulk_create([QueuedDrain(pk=1)], ignore_conflicts=True)  # a flushed database
    return bool(free.update(until=until))


def drain() -> int:
    """The task: attempt due deliveries until none is left or its time is up. It first marks
    that no drain is waiting, before its first claim, so a delivery committed after that
    claim's snapshot queues the next drain instead of waiting on this one."""
    from apps.webhooks import delivery

    close_old_connections()
    QueuedDrain.objects.filter(pk=1).update(until=None)
    return len(delivery.drain(on_backlog=request_drain))


def sweep() -> int:
    """Queue a drain while any delivery is due: retries whose time came, deliveries whose drain
    was lost, attempts whose worker died (their lease expired). Returns drains queued (0 or 1)."""
    from apps.webhooks import delivery

    return int(delivery.any_due() and request_drain())


def purge() -> int:
    from apps.webhooks.services import purge_terminal_deliveries

    return purge_terminal_deliveries()
