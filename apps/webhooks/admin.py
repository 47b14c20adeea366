"""Back office for webhooks: deliveries (dead letters first, with their attempts and a replay
action through the API's service), endpoints and signing keys (public halves only).

Deliveries can number in the hundreds of thousands: the list never counts them all (capped
count), loads endpoint and workspace in the same query, and its filters list fixed choices or
small tables — never `SELECT DISTINCT` over deliveries."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from apps.core.admin import CappedCountPaginator, ReadOnlyMixin, short_time
from apps.core.errors import NotAllowed
from apps.events.models import EventType
from apps.events.retention import retention as event_retention
from apps.webhooks import health, services
from apps.webhooks.filters import SUBSCRIBABLE_TYPES
from apps.webhooks.models import Delivery, DeliveryAttempt, SigningKey, StopReason, WebhookEndpoint
from apps.webhooks.services import TEST_EVENT_TYPE


class EventTypeFilter(admin.SimpleListFilter):
    title = "event type"
    parameter_name = "event_type"

    def lookups(self, request, model_admin):
        return [(t, t) for t in (*SUBSCRIBABLE_TYPES, TEST_EVENT_TYPE)]

    def queryset(self, request, queryset):
        return queryset.filter(event_type=self.value()) if self.value() else queryset


class AttemptInline(ReadOnlyMixin, admin.TabularInline):
    model = DeliveryAttempt
    fields = ["number", "started_at", "completed_at", "http_status", "duration_ms", "what_happened"]
    readonly_fields = fields
    extra = 0

    @admin.display(description="error")
    def what_happened(self, obj: DeliveryAttempt) -> str:
        """The sentence (host, port, what failed); the code alone for attempts recorded before it."""
        return obj.error_detail or obj.get_error_display() or "-"


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyMixin, admin.ModelAdmin):
    # Seven narrow columns after the id, readable at 1280 px beside the filters
    # (templates/admin/webhooks/delivery/change_list.html cuts long ids and names with an
    # ellipsis; the full value is the cell's title and on the delivery's page).
    list_display = ["delivery_id", "endpoint_name", "status", "event", "attempts", "http_status",
                    "next_attempt", "created"]
    list_filter = [
        "status", EventTypeFilter, "kind", "workspace", "endpoint", ("created_at", admin.DateFieldListFilter),
    ]
    list_select_related = ["endpoint", "workspace"]
    search_fields = ["=id", "=event_id"]
    paginator = CappedCountPaginator
    show_full_result_count = False
    exclude = ["body", "lease_token", "is_dead_letter"]
    readonly_fields = ["id", "workspace", "endpoint", "event_id", "event_type", "kind", "status", "attempt_count",
                       "last_http_status", "next_attempt_at", "terminal_at", "stopped", "lease_until",
                       "replay_of", "created_at", "updated_at", "request_body"]
    inlines = [AttemptInline]
    actions = ["replay"]

    # Dead letters first, then newest first: one index (delivery_dead_first) serves it.
    ordering = ["-is_dead_letter", "-created_at", "-id"]

    @admin.display(description="stop reason")
    def stopped(self, obj: Delivery) -> str:
        """The reason's code and what it means (a 410 or 413 an owner made final, say)."""
        if not obj.stop_reason:
            return "-"
        meaning = StopReason(obj.stop_reason).label if obj.stop_reason in StopReason.values else ""
        return f"{obj.stop_reason}: {meaning}" if meaning else obj.stop_reason

    @admin.display(description="request body")
    def request_body(self, obj: Delivery) -> str:
        return obj.body

    @admin.display(description="delivery", ordering="id")
    def delivery_id(self, obj: Delivery) -> str:
        return format_html('<span class="clip" title="{}">{}</span>', obj.id, obj.id)

    @admin.display(description="endpoint", ordering="endpoint__name")
    def endpoint_name(self, obj: Delivery) -> str:
        endpoint = obj.endpoint
        return format_html('<span class="clip" title="{} ({}) in {}">{}</span>', endpoint.name, endpoint.id,
                           obj.workspace.slug, endpoint.name)

    @admin.display(description="event type", ordering="event_type")
    def event(self, obj: Delivery) -> str:
        return format_html('<span class="clip" title="{}">{}</span>', obj.event_type, obj.event_type)

    @admin.display(description="attempts", ordering="attempt_count")
    def attempts(self, obj: Delivery) -> int:
        return obj.attempt_count

    @admin.display(description="HTTP", ordering="last_http_status")
    def http_status(self, obj: Delivery) -> str:
        return str(obj.last_http_status) if obj.last_http_status is not None else "-"

    @admin.display(description="next attempt", ordering="next_attempt_at")
    def next_attempt(self, obj: Delivery) -> str:
        return short_time(obj.next_attempt_at)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Delivery) -> str:
        return short_time(obj.created_at)

    def get_urls(self):
        board = self.admin_site.admin_view(self.health_view)
        return [path("health/", board, name="webhooks_delivery_health"), *super().get_urls()]

    def health_view(self, request):
        """The delivery health board (apps/webhooks/health.py): staff with permission to view
        deliveries; `?workspace=` and `?endpoint=` narrow it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        workspace_id = request.GET.get("workspace") or None
        endpoint_id = request.GET.get("endpoint") or None
        data = health.board(workspace_id=workspace_id, endpoint_id=endpoint_id)
        services.reconcile_installations([row.endpoint for row in data.rows])
        changelist = reverse("admin:webhooks_delivery_changelist")
        week = data.week_since.strftime("%Y-%m-%d %H:%M:%S+00:00")
        for row in data.rows:
            row.dead_letters_url = changelist + "?" + urlencode({
                "status__exact": "dead_letter", "endpoint__id__exact": row.endpoint.id, "created_at__gte": week})
            row.deliveries_url = changelist + "?" + urlencode({"endpoint__id__exact": row.endpoint.id})
        context = {
            **self.admin_site.each_context(request),
            "title": "Delivery health",
            "opts": self.opts,
            "board": data,
            "outcomes": [(status.value, status.label, color) for status, color in health.OUTCOMES],
            "workspace_id": workspace_id or "",
            "endpoint_id": endpoint_id or "",
            "max_endpoints": health.MAX_ENDPOINTS,
        }
        return TemplateResponse(request, "admin/webhooks/delivery/health.html", context)

    @admin.action(description="Replay selected deliveries (new delivery, same event)")
    def replay(self, request, queryset):
        replayed, refused = 0, 0
        for delivery in queryset.select_related("endpoint"):
            try:
                services.replay_delivery(delivery=delivery)
                replayed += 1
            except NotAllowed:
                refused += 1
        self.message_user(request, f"{replayed} delivery(ies) replayed.", messages.SUCCESS)
        if refused:
            self.message_user(
                request,
                f"{refused} not replayed: not terminal, a test delivery, or the endpoint is deleted or inactive.",
                messages.WARNING,
            )


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["id", "name", "url", "workspace", "state", "created"]
    list_filter = ["active", "disabled_reason", "signing", ("deleted_at", admin.EmptyFieldListFilter), "workspace"]
    list_select_related = ["workspace"]
    search_fields = ["=id", "name", "url"]
    show_full_result_count = False
    actions = ["recover"]

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: WebhookEndpoint) -> str:
        deleted = f" (deleted {timezone.localtime(obj.deleted_at):%Y-%m-%d %H:%M})" if obj.deleted_at else ""
        return format_html("{}{}", short_time(obj.created_at), deleted)

    @admin.display(description="state", ordering="active")
    def state(self, obj: WebhookEndpoint) -> str:
        """Active, or why not: an installation that stopped holding is said in words, with the
        way back (the API's PATCH `active: true` with a valid credential)."""
        if obj.active:
            return "active"
        reason = obj.get_disabled_reason_display() if obj.disabled_reason else "inactive"
        short = {"installation_unauthorized": "installation gone", "endpoint_disabled": "disabled"}.get(
            obj.disabled_reason or "", "inactive")
        return format_html('<span class="disabled-reason" title="{}: {}">inactive: {}</span>', obj.disabled_reason,
                           reason, short)

    def get_changelist_instance(self, request):
        """The page's endpoints are checked first (one batch): an expired installation, which no
        save announced, reads inactive here as it does in REST."""
        changelist = super().get_changelist_instance(request)
        services.reconcile_installations(list(changelist.result_list))
        return changelist

    def get_object(self, request, object_id, from_field=None):
        endpoint = super().get_object(request, object_id, from_field)
        return services.reconcile_installations([endpoint])[0] if endpoint is not None else None

    @admin.action(description="Recover missed deliveries of the selected endpoints (whole retention window)")
    def recover(self, request, queryset):
        """The API's recover (POST /api/v1/webhooks/{id}/recover) over the retention window."""
        since = timezone.now() - event_retention(EventType.SESSION_CREATED) + timedelta(minutes=1)
        queued, refused, more = 0, 0, False
        for endpoint in queryset:
            try:
                count, rest = services.recover_deliveries(endpoint=endpoint, since=since)
            except NotAllowed:
                refused += 1
                continue
            queued, more = queued + count, more or rest
        self.message_user(request, f"{queued} delivery(ies) queued.", messages.SUCCESS)
        if more:
            self.message_user(request, f"Capped at {services.RECOVER_MAX} per endpoint: run it again for the rest.",
                              messages.WARNING)
        if refused:
            self.message_user(request, f"{refused} endpoint(s) skipped: inactive or deleted.", messages.WARNING)


@admin.register(SigningKey)
class SigningKeyAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["kid", "status", "created_at", "retiring_at", "retired_at"]
    list_filter = ["status"]
    # Only public fields: the sealed private half is never shown, not even encrypted.
    fields = ["kid", "status", "public_key", "created_at", "retiring_at", "retired_at"]
    readonly_fields = fields
