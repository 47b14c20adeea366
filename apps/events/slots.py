"""Stream slots: the per-workspace connection limit, counted across processes and instances
in the database (see models.StreamSlot). Synchronous; the hub runs these on its own threads.

A slot row lives exactly as long as a stream the hub of its process holds: the consumer takes
it before the stream is registered and releases it however the consumer ends, and the hub
renews the leases of its live streams' slots only, by id (`renew_leases`). A row nobody renews
(a killed process, an acquire whose answer was lost) lapses after one lease
(`CONNECT_SSE_SLOT_LEASE_SECONDS`, 45 s by default: "within a minute"), and every renewal also
deletes the lapsed rows of any workspace, so the row count follows the open streams. The other
way round, an open stream whose row is gone (its renewals stalled for a lease) is ended by the
hub, and its client resumes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.events.models import StreamSlot


def lease_seconds() -> float:
    return settings.CONNECT_SSE_SLOT_LEASE_SECONDS


def renew_every_seconds() -> float:
    """Three renewals per lease: a live slot survives two missed ones (a busy loop, a database
    hiccup) before it could lapse."""
    return lease_seconds() / 3


def acquire_slot(*, workspace_id: int, process: str, limit: int, holder: str) -> int | None:
    """A slot id, or None when the workspace already has `limit` live streams.

    Safe to run again after a failure with the same `holder` (one per stream open): if the
    first run's row was committed but its answer lost (the connection died at COMMIT), the
    retry finds and returns that row instead of taking a second slot."""
    now = timezone.now()
    StreamSlot.objects.filter(workspace_id=workspace_id, lease_expires_at__lt=now).delete()
    taken = set()
    for pk, number, row_holder in StreamSlot.objects.filter(workspace_id=workspace_id).values_list(
        "pk", "number", "holder"
    ):
        if row_holder == holder:
            return pk
        taken.add(number)
    for number in range(limit):
        if number in taken:
            continue
        try:
            with transaction.atomic():
                slot = StreamSlot.objects.create(
                    workspace_id=workspace_id,
                    number=number,
                    process=process,
                    holder=holder,
                    lease_expires_at=now + timedelta(seconds=lease_seconds()),
                )
            return slot.pk
        except IntegrityError:
            continue  # another connect, here or elsewhere, took this number first
    return None


def overdue_retry_after(*, workspace_id: int) -> int | None:
    """When the workspace is at its limit: seconds until the first of its rows that missed two
    renewals lapses, or None when every row is renewed on time. Such a row belongs to a process
    that died (a host stopped mid-stream): its client is reconnecting elsewhere, so the refusal
    is a dependency's transient state (503 with Retry-After), not the workspace's own streams
    (429 connection_limit)."""
    now = timezone.now()
    overdue = (
        StreamSlot.objects.filter(
            workspace_id=workspace_id,
            lease_expires_at__gte=now,
            lease_expires_at__lt=now + timedelta(seconds=lease_seconds() - 2 * renew_every_seconds()),
        )
        .order_by("lease_expires_at")
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    if overdue is None:
        return None
    return math.floor((overdue - now).total_seconds()) + 1  # the first whole second past its lapse


def release_slot(slot_id: int) -> None:
    StreamSlot.objects.filter(pk=slot_id).delete()


def renew_leases(*, slot_ids: Iterable[int]) -> int:
    """Extend the leases of these slots (the live streams of one process), then delete every
    lapsed row. Returns how many were renewed."""
    now = timezone.now()
    ids = list(slot_ids)
    renewed = (
        StreamSlot.objects.filter(pk__in=ids).update(lease_expires_at=now + timedelta(seconds=lease_seconds()))
        if ids
        else 0
    )
    StreamSlot.objects.filter(lease_expires_at__lt=now).delete()
    return renewed


def existing_slots(slot_ids: Iterable[int]) -> set[int]:
    return set(StreamSlot.objects.filter(pk__in=list(slot_ids)).values_list("pk", flat=True))


def release_process(*, process: str) -> None:
    StreamSlot.objects.filter(process=process).delete()


def open_slots(*, workspace_id: int) -> int:
    return StreamSlot.objects.filter(workspace_id=workspace_id, lease_expires_at__gte=timezone.now()).count()
