"""django-q2 tasks. Each loads by id and calls the delivery code; the Delivery row, not the
task, is the truth (apps/webhooks/delivery.py)."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterable

from django.conf import settings
from django.db import close_old_connections, transaction
from django_q.brokers import get_broker
from django_q.tasks import async_task

logger = logging.getLogger("connect.webhooks")

ATTEMPT_TASK = "apps.webhooks.tasks.attempt_delivery"


_broker: tuple[int, object] | None = None


def broker():
    """django-q2's broker, one per process: `get_broker()` builds a new one (with the Redis
    broker, a new client and connection) on every call, which was a fifth of the cost of
    recording an event. A forked child builds its own."""
    global _broker
    if _broker is None or _broker[0] != os.getpid():
        _broker = (os.getpid(), get_broker())
    return _broker[1]


def queue_attempts(pairs: Iterable[tuple[str, str]]) -> None:
    """Put (delivery id, lease token) pairs on the broker. A failure here is logged, not
    raised: the deliveries are committed, and the sweeper queues them when their lease expires."""
    pairs = list(pairs)
    if not pairs:
        return
    # The ORM broker closes the database connection before each write unless it runs inside a
    # transaction (django_q/brokers/orm.py, get_connection); with CONN_MAX_AGE = 0 that was a
    # close and reopen per task in the process recording the event. One transaction per batch.
    orm = settings.Q_CLUSTER.get("orm")
    try:
        with transaction.atomic(using=orm) if orm else contextlib.nullcontext():
            for delivery_id, token in pairs:
                async_task(ATTEMPT_TASK, delivery_id, token, q_options={"save": False, "broker": broker()})
    except Exception:  # noqa: BLE001 - the broker may be down; the sweeper recovers
        logger.exception("could not queue %d webhook deliveries; the sweeper will", len(pairs))


def attempt_delivery(delivery_id: str, token: str) -> str:
    from apps.webhooks.delivery import BATCH, deliver_once

    close_old_connections()
    return deliver_once(delivery_id, token, batch=BATCH)


def sweep(limit: int = 500) -> int:
    """Queue every due delivery without a live lease: retries whose time came, deliveries
    whose queueing was lost, and attempts whose worker died."""
    from apps.webhooks.delivery import claim_due

    total = 0
    while True:
        pairs = claim_due(limit=limit)
        queue_attempts(pairs)
        total += len(pairs)
        if len(pairs) < limit:
            return total


def purge() -> int:
    from apps.webhooks.services import purge_terminal_deliveries

    return purge_terminal_deliveries()
