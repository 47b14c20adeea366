"""Admin helpers every app's back office shares, and the back office's shape.

Cells: `clipped` cuts a long unbreakable value (an id, an email, a URL) with an ellipsis and
keeps the whole in its title; `short_time` writes a time to the minute. With them each
changelist fits beside the apps' sidebar and the filters at 1024 px (static/connect/admin.css).

Shape: django-q2's raw queue tables are not registered (docs/decisions/back-office-pages.md);
its schedules stay, since the periodic jobs are edited there (apps/core/periodic.py).
"""

from __future__ import annotations

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django_q import admin as q_admin  # registers django-q2's pages first
from django_q.models import Failure, OrmQ, Schedule, Success


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


def clipped(text: object, *, title: object = None, width: str = "") -> str:
    """A list cell that never widens its column past its `.clip` width (admin.css): the value
    is cut with an ellipsis, the whole in the title. `width`: a class, `wide` or `narrow`."""
    if text is None or text == "":
        return "-"
    return format_html('<span class="clip {}" title="{}">{}</span>', width, title if title is not None else text, text)


def short_time(value) -> str:
    """A list cell's time to the minute, which may wrap between date and time; the full time
    is the cell's title."""
    if value is None:
        return "-"
    local = timezone.localtime(value)
    return format_html('<span class="when" title="{}"><span>{}</span> <span>{}</span></span>', local.isoformat(),
                       local.strftime("%Y-%m-%d"), local.strftime("%H:%M"))


# --- django-q2 ------------------------------------------------------------------------------


for _model in (Success, Failure, OrmQ):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)


class ScheduleAdmin(q_admin.ScheduleAdmin):
    """The periodic jobs: what runs, how often, when next and whether the last run worked."""

    list_display = ("schedule_name", "schedule_type", "minutes", "next", "get_success")
    list_display_links = ("schedule_name",)
    list_filter = ("schedule_type",)

    @admin.display(description="name", ordering="name")
    def schedule_name(self, obj: Schedule) -> str:
        return clipped(obj.name, title=f"{obj.name}: {obj.func}", width="wide")

    @admin.display(description="next run", ordering="next_run")
    def next(self, obj: Schedule) -> str:
        return short_time(obj.next_run)


admin.site.unregister(Schedule)
admin.site.register(Schedule, ScheduleAdmin)
