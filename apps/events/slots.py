"""Stream slots: the per-workspace connection limit, counted across processes and instances
in the database (see models.StreamSlot). Synchronous; the hub runs these on its own threads.

A slot row lives exactly as long as a stream the hub of its process holds: the consumer takes
it before the stream is registered and releases it however the consumer ends, and the hub
renews the leases of its live streams' slots only, by id (`renew_leases`). A row nobody renews
(a killed process, an acquire whose answer was lost) lapses after one lease
(`CONNECT_SSE_SLOT_LEASE_SECONDS`, 45 s by default: "within a minute"), and every renewal also
deletes the lapsed rows of any workspace, so the row count follows the open streams. The other
way round, an open stream whose row is gone (its renewals stalled for a lease) is ended by the
hub, and its client resumes.

A host that dies takes its streams with it, and its clients reconnect through the balancer at
once, while its rows would still fill the workspace's limit for up to a lease. So each hub also
beats (`beat`, every `BEAT_SECONDS`: one row per process), and an acquire that finds the limit
full first reclaims the rows of processes silent for `STALE_SECONDS`. A live process whose loop
stalled that long loses its rows the same way, and its hub ends those streams at its next
renewal (clients resume): the limit holds either way."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from apps.events.models import StreamProcess, StreamSlot

BEAT_SECONDS = 2.0
STALE_SECONDS = 5 * BEAT_SECONDS  # four missed beats: a stalled loop, not a blip


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
    if len(taken) >= limit and _reclaim_silent(workspace_id, now):
        taken = set(StreamSlot.objects.filter(workspace_id=workspace_id).values_list("number", flat=True))
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


def beat(*, process: str) -> None:
    """This process is alive (its hub's maintenance loop, every BEAT_SECONDS)."""
    now = timezone.now()
    if not StreamProcess.objects.filter(process=process).update(seen_at=now):
        StreamProcess.objects.update_or_create(process=process, defaults={"seen_at": now})


def _silent_processes(workspace_id: int, since) -> models.QuerySet:
    return StreamProcess.objects.filter(
        seen_at__lt=since,
        process__in=StreamSlot.objects.filter(workspace_id=workspace_id).values("process"),
    ).values("process")


def _reclaim_silent(workspace_id: int, now) -> int:
    """Delete the workspace's rows held by processes silent for STALE_SECONDS; how many."""
    silent = _silent_processes(workspace_id, now - timedelta(seconds=STALE_SECONDS))
    deleted, _ = StreamSlot.objects.filter(workspace_id=workspace_id, process__in=silent).delete()
    return deleted


def overdue_retry_after(*, workspace_id: int) -> int | None:
    """When the workspace is at its limit: seconds until the first of its rows held by a process
    that has missed a beat is reclaimed, or that missed two renewals lapses; None when every
    row's process is on time. Such a row belongs to a process that died (a host stopped
    mid-stream): its client is reconnecting elsewhere, so the refusal is a dependency's
    transient state (503 with Retry-After), not the workspace's own streams (429
    connection_limit)."""
    now = timezone.now()
    quiet = (
        StreamProcess.objects.filter(process__in=_silent_processes(workspace_id, now - timedelta(seconds=1.5 * BEAT_SECONDS)))
        .order_by("seen_at").values_list("seen_at", flat=True).first()
    )
    if quiet is not None:
        return max(1, math.floor((quiet + timedelta(seconds=STALE_SECONDS) - now).total_seconds()) + 1)
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
    # A process silent for a whole lease holds no row any more (they lapsed): forget it.
    StreamProcess.objects.filter(seen_at__lt=now - timedelta(seconds=lease_seconds())).delete()
    return renewed


def existing_slots(slot_ids: Iterable[int]) -> set[int]:
    return set(StreamSlot.objects.filter(pk__in=list(slot_ids)).values_list("pk", flat=True))


def release_process(*, process: str) -> None:
    StreamSlot.objects.filter(process=process).delete()
    StreamProcess.objects.filter(process=process).delete()


def open_slots(*, workspace_id: int) -> int:
    return StreamSlot.objects.filter(workspace_id=workspace_id, lease_expires_at__gte=timezone.now()).count()
