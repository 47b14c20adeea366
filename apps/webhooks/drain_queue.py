"""The drain queue: a burst of new deliveries queues one django-q2 drain task, not one per
delivery. `QueuedDrain` is the flag that says a drain is waiting; the sweeper queues one
whenever a delivery is due, so a lost task costs a minute, never a delivery."""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import timedelta

from django.conf import settings
from django.db import transaction
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
