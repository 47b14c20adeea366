"""Reads of webhook endpoints and deliveries. The REST reads take `workspace=`: another
workspace's endpoint or delivery is indistinguishable from a missing one (`NotFound`), and so is
an endpoint another app owns (`WebhookEndpoint.owner`) and its deliveries: the REST API shows
only its own endpoints; an owner shows its own through its wire."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.core.cursors import InvalidCursor, decode_cursor, encode_cursor
from apps.core.errors import NotFound
from apps.core.timestamps import parse_iso
from apps.tenancy.models import Workspace
from apps.webhooks.models import TERMINAL_STATUSES, Delivery, DeliveryAttempt, WebhookEndpoint

RETENTION_DAYS = 30


def live_endpoints(*, workspace: Workspace) -> QuerySet[WebhookEndpoint]:
    """The REST API's endpoints: not deleted, and not owned by another app."""
    return WebhookEndpoint.objects.filter(workspace=workspace, deleted_at__isnull=True, owner="")


def deliverable_endpoints(*, workspace_id: Any, owner: str, now: datetime) -> QuerySet[WebhookEndpoint]:
    """The endpoints of `owner` ("" for REST's) a new event may be queued for: active, not
    deleted, not past `expires_at`."""
    return WebhookEndpoint.objects.filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now),
        workspace_id=workspace_id, owner=owner, active=True, deleted_at__isnull=True,
    )


def get_endpoint(*, workspace: Workspace, endpoint_id: str) -> WebhookEndpoint:
    try:
        return live_endpoints(workspace=workspace).get(id=endpoint_id)
    except WebhookEndpoint.DoesNotExist:
        raise NotFound() from None


def _keyset(queryset: QuerySet, listing: str, workspace: Workspace, cursor: str | None) -> QuerySet:
    if not cursor:
        return queryset
    key = decode_cursor(listing, workspace.id, cursor)
    try:
        created_at, last_id = parse_iso(key[0]), str(key[1])
    except (IndexError, TypeError, ValueError):
        raise InvalidCursor() from None
    return queryset.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=last_id))


def _page(queryset: QuerySet, listing: str, workspace: Workspace, limit: int) -> tuple[list[Any], str | None]:
    page = list(queryset.order_by("-created_at", "-id")[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    last = page[-1]
    return page, encode_cursor(listing, workspace.id, [last.created_at.isoformat(), last.id])


def endpoints_page(*, workspace: Workspace, limit: int, cursor: str | None = None):
    """Newest first, keyset-paginated on (created_at, id)."""
    endpoints = _keyset(live_endpoints(workspace=workspace), "webhooks", workspace, cursor)
    return _page(endpoints, "webhooks", workspace, limit)


def retained_deliveries(*, workspace: Workspace) -> QuerySet[Delivery]:
    """Deliveries inside the retention window: terminal ones older than 30 days are gone
    (404) even before the purge job deletes them; pending and retrying never expire."""
    cutoff = timezone.now() - timedelta(days=RETENTION_DAYS)
    return Delivery.objects.filter(workspace=workspace, endpoint__owner="").exclude(
        status__in=TERMINAL_STATUSES, terminal_at__lt=cutoff
    )


def deliveries_page(
    *,
    workspace: Workspace,
    limit: int,
    cursor: str | None = None,
    endpoint_id: str | None = None,
    status: str | None = None,
    event_type: str | None = None,
    event_id: str | None = None,
    kind: str | None = None,
):
    deliveries = retained_deliveries(workspace=workspace).select_related("endpoint")
    for field, value in (
        ("endpoint_id", endpoint_id),
        ("status", status),
        ("event_type", event_type),
        ("event_id", event_id),
        ("kind", kind),
    ):
        if value is not None:
            deliveries = deliveries.filter(**{field: value})
    deliveries = _keyset(deliveries, "webhook-deliveries", workspace, cursor)
    return _page(deliveries, "webhook-deliveries", workspace, limit)


def get_delivery(*, workspace: Workspace, delivery_id: str) -> Delivery:
    try:
        return retained_deliveries(workspace=workspace).select_related("endpoint").get(id=delivery_id)
    except Delivery.DoesNotExist:
        raise NotFound() from None


def delivery_attempts(*, delivery: Delivery) -> list[DeliveryAttempt]:
    return list(DeliveryAttempt.objects.filter(delivery=delivery).order_by("number"))


class AttemptSummary(NamedTuple):
    last_success: datetime | None  # when the last 2xx answer came
    last_error: tuple[str, int | None, str] | None  # the last attempt's (error, status, detail), if it failed
    failing_since: datetime | None  # the first failed attempt after the last success, if the last failed


def attempt_summary(*, endpoint_id: str) -> AttemptSummary:
    """How an endpoint's deliveries are going, from its attempts (kept as long as their
    deliveries): three probes of `attempt_endpoint_started`."""
    attempts = DeliveryAttempt.objects.filter(endpoint_id=endpoint_id)
    success = attempts.filter(error="").order_by("-started_at").values_list("started_at", "completed_at").first()
    last = attempts.order_by("-started_at").values_list("error", "http_status", "error_detail").first()
    if last is None or not last[0]:
        return AttemptSummary(success[1] if success else None, None, None)
    failing = attempts.exclude(error="")
    if success is not None:
        failing = failing.filter(started_at__gt=success[0])
    since = failing.order_by("started_at").values_list("started_at", flat=True).first()
    return AttemptSummary(success[1] if success else None, last, since)
