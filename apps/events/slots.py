"""Stream slots: the per-workspace connection limit, counted across processes and instances
in the database (see models.StreamSlot). Synchronous; the hub runs these on its own thread."""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.events.models import StreamSlot

# A process renews its leases every LEASE_RENEW_SECONDS; a killed one's slots lapse after
# LEASE_SECONDS (the "within a minute").
LEASE_SECONDS = 45
LEASE_RENEW_SECONDS = 15


def acquire_slot(*, workspace_id: int, process: str, limit: int) -> int | None:
    """A slot id, or None when the workspace already has `limit` live streams."""
    now = timezone.now()
    StreamSlot.objects.filter(workspace_id=workspace_id, lease_expires_at__lt=now).delete()
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
                    lease_expires_at=now + timedelta(seconds=LEASE_SECONDS),
                )
            return slot.pk
        except IntegrityError:
            continue  # another connect, here or elsewhere, took this number first
    return None


def release_slot(slot_id: int) -> None:
    StreamSlot.objects.filter(pk=slot_id).delete()


def renew_leases(*, process: str) -> int:
    return StreamSlot.objects.filter(process=process).update(
        lease_expires_at=timezone.now() + timedelta(seconds=LEASE_SECONDS)
    )


def release_process(*, process: str) -> None:
    StreamSlot.objects.filter(process=process).delete()


def open_slots(*, workspace_id: int) -> int:
    return StreamSlot.objects.filter(workspace_id=workspace_id, lease_expires_at__gte=timezone.now()).count()
