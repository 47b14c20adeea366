"""The embedded store (no Redis): a `StreamSlot` row per open stream. The database arbitrates:
`(workspace, number)` is unique with `number` in [0, limit), so concurrent opens on any process
never hold more than the limit, and `(workspace, process, holder)` is unique, so one open never
holds two rows and no process can take another's row for its own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, Max, Min, OuterRef
from django.utils import timezone

from apps.events.models import StreamSlot
from apps.stream.slots.base import Acquire, SlotStore, lease_seconds, overdue_window

# Numbers tried from the index alone before reading every row of the workspace.
_INDEXED_TRIES = 8


class DatabaseSlots(SlotStore):
    def acquire_many(self, requests: list[Acquire]) -> list[int | None]:
        return [self.acquire(*request) for request in requests]

    def acquire(self, workspace_id: int, process: str, limit: int, holder: str) -> int | None:
        now = timezone.now()
        StreamSlot.objects.filter(workspace_id=workspace_id, lease_expires_at__lt=now).delete()
        mine = _held(workspace_id, process, holder)
        if mine is not None:
            return mine  # a retried acquire: the slot its first run took
        for number in _free_numbers(workspace_id, limit):
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
                # Another open took this number first, or this open's own row exists already.
                mine = _held(workspace_id, process, holder)
                if mine is not None:
                    return mine
        return None

    def release(self, slot_id: int) -> None:
        StreamSlot.objects.filter(pk=slot_id).delete()

    def renew(self, slot_ids: list[int]) -> int:
        now = timezone.now()
        renewed = (
            StreamSlot.objects.filter(pk__in=slot_ids).update(lease_expires_at=now + timedelta(seconds=lease_seconds()))
            if slot_ids
            else 0
        )
        StreamSlot.objects.filter(lease_expires_at__lt=now).delete()
        return renewed

    def existing(self, slot_ids: list[int]) -> set[int]:
        return set(StreamSlot.objects.filter(pk__in=slot_ids).values_list("pk", flat=True))

    def release_process(self, process: str) -> None:
        StreamSlot.objects.filter(process=process).delete()

    def count(self, workspace_id: int | None) -> int:
        slots = StreamSlot.objects.filter(lease_expires_at__gte=timezone.now())
        if workspace_id is not None:
            slots = slots.filter(workspace_id=workspace_id)
        return slots.count()

    def overdue_seconds(self, workspace_id: int) -> float | None:
        now = timezone.now()
        first = (
            StreamSlot.objects.filter(
                workspace_id=workspace_id,
                lease_expires_at__gte=now,
                lease_expires_at__lt=now + timedelta(seconds=overdue_window()),
            )
            .order_by("lease_expires_at")
            .values_list("lease_expires_at", flat=True)
            .first()
        )
        return None if first is None else (first - now).total_seconds()


def _held(workspace_id: int, process: str, holder: str) -> int | None:
    """The slot this open already holds (one read of the unique index), if any."""
    return (
        StreamSlot.objects.filter(workspace_id=workspace_id, process=process, holder=holder)
        .values_list("pk", flat=True)
        .first()
    )


def _free_numbers(workspace_id: int, limit: int) -> Iterator[int]:
    """Numbers in [0, limit) free when asked, each asked again after a concurrent open took the
    previous one. First from the (workspace, number) index alone (past the highest, below the
    lowest, or the first gap), so an open does not read every open stream's row; then, if opens
    keep racing for the same numbers, every free number from one read of the rows."""
    slots = StreamSlot.objects.filter(workspace_id=workspace_id)
    for _ in range(_INDEXED_TRIES):
        bounds = slots.aggregate(low=Min("number"), high=Max("number"))
        if bounds["low"] is None or bounds["low"] > 0:
            yield 0
        elif bounds["high"] + 1 < limit:
            yield bounds["high"] + 1
        else:
            successor_taken = StreamSlot.objects.filter(workspace_id=workspace_id, number=OuterRef("number") + 1)
            gap = slots.filter(~Exists(successor_taken)).aggregate(first=Min("number"))["first"]
            if gap is None or gap + 1 >= limit:
                return  # full
            yield gap + 1
    taken = set(slots.values_list("number", flat=True))
    yield from (number for number in range(limit) if number not in taken)
