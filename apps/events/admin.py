"""Read-only back office for the event outbox: what was recorded, newest first.

Events only come from the services, in the transaction of the change they record, so nothing
here adds, edits or deletes one. The outbox holds a row per committed segment: the list never
counts the whole table (capped count, no full count), loads each row's workspace in the same
query, and its filters are fixed choices (type) or a small table (workspaces).
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from apps.core.admin import CappedCountPaginator, ReadOnlyMixin, clipped, short_time
from apps.events.models import Event


@admin.register(Event)
class EventAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["event_id", "type", "session", "workspace", "occurred"]
    list_display_links = ["event_id"]
    list_filter = ["type", "workspace"]
    list_select_related = ["workspace"]
    search_fields = ["=session_id", "=id"]
    search_help_text = "An exact session id (or event id)."
    # Newest first. Ids are time-sortable (milliseconds, then a per-process counter) and made
    # when the event is recorded, so id order is occurredAt order, and the primary key (or the
    # (workspace, id) index when filtered by workspace) serves it without sorting the table.
    ordering = ["-id"]
    paginator = CappedCountPaginator
    show_full_result_count = False
    fields = ["id", "type", "workspace", "session_id", "occurred_at", "pretty_data"]
    readonly_fields = fields

    @admin.display(description="id", ordering="id")
    def event_id(self, obj: Event) -> str:
        return clipped(obj.id, width="narrow")

    @admin.display(description="session", ordering="session_id")
    def session(self, obj: Event) -> str:
        return clipped(obj.session_id, width="narrow")

    @admin.display(description="occurred", ordering="occurred_at")
    def occurred(self, obj: Event) -> str:
        return short_time(obj.occurred_at)

    @admin.display(description="data (as sent in the envelope's `data`)")
    def pretty_data(self, obj: Event) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.data, indent=2, ensure_ascii=False))
