"""The face every rate-limit counter store shows (redis_store, database_store, file_store):
add hits to buckets of a window and read their new counts, or take one hit back."""

from __future__ import annotations

from typing import Protocol


class CountersUnavailable(Exception):
    """The store cannot count now (Redis down, the file unusable or full)."""


class CounterStore(Protocol):
    def add(self, names: list[str], start: int, window: int, hits: int = 1) -> list[int]:
        """Add `hits` to each bucket in the window beginning at `start`; their new counts."""

    def refund(self, names: list[str], start: int, window: int) -> None:
        """Take one hit back from each bucket of that window; never below zero, and nothing
        for a window or bucket that holds no hits."""
