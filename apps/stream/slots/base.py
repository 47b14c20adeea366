"""What every slot store is: the interface the public functions delegate to, and the lease."""

from __future__ import annotations

from abc import ABC, abstractmethod

from django.conf import settings

SlotId = int | str  # a StreamSlot pk, or "<workspace>|<process>|<holder>" in Redis
Acquire = tuple[int, str, int, str]  # (workspace_id, process, limit, holder): one stream open


def lease_seconds() -> float:
    return settings.CONNECT_SSE_SLOT_LEASE_SECONDS


def renew_every_seconds() -> float:
    """Three renewals per lease: a live slot survives two missed ones (a busy loop, a database
    hiccup) before it could lapse."""
    return lease_seconds() / 3


def overdue_window() -> float:
    """A slot whose lease ends sooner than this missed two renewals."""
    return lease_seconds() - 2 * renew_every_seconds()


class SlotStore(ABC):
    """One store of every workspace's slots. A slot is one stream open, named by its process and
    its `holder` (unique within the process): acquiring again with both finds the slot the first
    run took, never another process's."""

    @abstractmethod
    def acquire_many(self, requests: list[Acquire]) -> list[SlotId | None]:
        """Each request decided in order, as if one after the other: a slot id, or None when its
        workspace already holds its limit of live slots."""

    @abstractmethod
    def release(self, slot_id: SlotId) -> None: ...

    @abstractmethod
    def renew(self, slot_ids: list[SlotId]) -> int:
        """Extend these slots' leases and drop lapsed slots; how many were renewed."""

    @abstractmethod
    def existing(self, slot_ids: list[SlotId]) -> set[SlotId]: ...

    @abstractmethod
    def release_process(self, process: str) -> None: ...

    @abstractmethod
    def count(self, workspace_id: int | None) -> int:
        """Live (not lapsed) slots of a workspace, or of every workspace."""

    @abstractmethod
    def overdue_seconds(self, workspace_id: int) -> float | None:
        """Seconds until the first of the workspace's slots that missed two renewals lapses."""

    def evict_dead_processes(self) -> int:
        """Drop the slots of processes known to be gone; how many. A store that cannot tell
        leaves them to their leases."""
        return 0
