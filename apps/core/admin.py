"""Admin helpers every app's back office shares. Nothing is registered here."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.utils.functional import cached_property


class ReadOnlyMixin:
    """A ModelAdmin or inline that shows rows and never adds, changes or deletes one: the data
    it shows changes only through the services, which record the events that go with it."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class CappedCountPaginator(Paginator):
    """Counts at most CAP rows, so an unfiltered page of a million-row table stays cheap; the
    admin then shows "CAP" as the total and pages up to it (filter to see the rest)."""

    CAP = 10_000

    @cached_property
    def count(self) -> int:
        return self.object_list[: self.CAP].count()
