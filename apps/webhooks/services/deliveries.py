"""Writes to deliveries: created `pending` and due (for an event, a test, a replay), cancelled,
purged. After commit a drain task is queued on django-q2 unless one is already waiting
(apps/webhooks/drain_queue.py); if that is lost, the sweeper queues one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Iterable

from django.db import transaction
from django.utils import timezone

from apps.core.errors import NotAllowed
from apps.core.ids import new_id
from apps.core.timestamps import iso_ms
from apps.webhooks import drain_queue
from apps.webhooks import filters as webhook_filters
from apps.webhooks.models import ACTIVE_STATUSES, Delivery, DeliveryKind, DeliveryStatus, WebhookEndpoint
from apps.webhooks.representations import request_body
from apps.webhooks.selectors import RETENTION_DAYS, deliverable_endpoints

TEST_EVENT_TYPE = "webhook.test"


def cancel_active_deliveries(*, endpoint_ids: Iterable[str], reason: str) -> int:
    """Pending and retrying deliveries become `cancelled`. An attempt in flight finishes, but
    its result no longer changes a cancelled delivery (it writes only under its lease)."""
    now = timezone.now()
    return Delivery.objects.filter(endpoint_id__in=list(endpoint_ids), status__in=ACTIVE_STATUSES).update(
        status=DeliveryStatus.CANCELLED,
        stop_reason=reason,
        terminal_at=now,
        updated_at=now,
        lease_until=None,
        lease_token="",
    )


def new_delivery(*, endpoint: WebhookEndpoint, event_id: str, event_type: str, kind: str, body: str, now,
                  replay_of: Delivery | None = None) -> Delivery:
    return Delivery(
        workspace_id=endpoint.workspace_id,
        endpoint=endpoint,
        event_id=event_id,
        event_type=event_type,
        kind=kind,
        body=body,
        status=DeliveryStatus.PENDING,
        next_attempt_at=now,
        replay_of=replay_of,
        created_at=now,
        updated_at=now,
    )


def resume_endpoint(*, endpoint: WebhookEndpoint) -> bool:
    """Lift a suspension (apps/webhooks/owners.py `Suspend`), in the caller's transaction, on
    the row the caller holds: its held deliveries are due at once, their attempt counts as they
    were (time held does not use up the retry schedule), and the failure window starts afresh.
    Returns whether it was suspended."""
    if endpoint.suspended_at is None:
        return False
    now = timezone.now()
    endpoint.suspended_at, endpoint.resumed_at = None, now
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(suspended_at=None, resumed_at=now)
    Delivery.objects.filter(endpoint_id=endpoint.pk, status__in=ACTIVE_STATUSES).update(next_attempt_at=now,
                                                                                     updated_at=now)
    drain_after_commit()
    return True


def drain_after_commit() -> None:
    transaction.on_commit(drain_queue.request_drain)


def create_event_deliveries(
    *, workspace_id: Any, event_id: str, event_type: str, session_id: str, occurred_at, data: dict[str, Any]
) -> list[Delivery]:
    """One delivery per deliverable REST endpoint of the workspace (owned ones get only what
    their owner queues) whose filters match, written in the caller's transaction (the event's),
    the body fixed now. One INSERT, so no savepoint of its own: every recorded event passes here,
    a segment's too, and a SAVEPOINT/RELEASE pair was two of the nine round trips of a segment
    append."""
    if event_type not in webhook_filters.SUBSCRIBABLE_TYPES:
        return []
    now = timezone.now()
    endpoints = deliverable_endpoints(workspace_id=workspace_id, owner="", now=now)
    facts = event_facts(event_type=event_type, session_id=session_id, data=data)
    matching = [e for e in endpoints if webhook_filters.filters_match(e.filters, facts)]
    if not matching:
        return []
    body = request_body(event_id=event_id, event_type=event_type, occurred_at=iso_ms(occurred_at), data=data)
    deliveries = [
        new_delivery(endpoint=e, event_id=event_id, event_type=event_type, kind=DeliveryKind.EVENT, body=body, now=now)
        for e in matching
    ]
    Delivery.objects.bulk_create(deliveries)
    drain_after_commit()
    return deliveries


def event_facts(*, event_type: str, session_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """What a filter entry is matched against (webhook_filters.filters_match)."""
    return {"type": event_type, "sessionId": session_id, "status": data.get("status")}


def queue_delivery(*, endpoint: WebhookEndpoint, event_id: str, event_type: str, body: str) -> Delivery:
    """One event delivery of a body another app shaped for its own wire (the MCP events
    extension's), to an endpoint that app owns, written in the caller's transaction and then
    drained, signed, retried and guarded like every delivery. The caller picks the endpoint from
    `selectors.deliverable_endpoints(owner=…)`, so an expired one is never given one."""
    delivery = new_delivery(endpoint=endpoint, event_id=event_id, event_type=event_type,
                             kind=DeliveryKind.EVENT, body=body, now=timezone.now())
    delivery.save(force_insert=True)
    drain_after_commit()
    return delivery


def queue_deliveries(*, endpoint: WebhookEndpoint, events: Iterable[tuple[str, str, str]]) -> int:
    """`queue_delivery` of several (event id, event type, body) at once, in their order: one
    INSERT and one drain request. Returns how many."""
    now = timezone.now()
    deliveries = [new_delivery(endpoint=endpoint, event_id=event_id, event_type=event_type, kind=DeliveryKind.EVENT,
                               body=body, now=now) for event_id, event_type, body in events]
    if deliveries:
        Delivery.objects.bulk_create(deliveries)
        drain_after_commit()
    return len(deliveries)


@transaction.atomic
def send_test_delivery(*, endpoint: WebhookEndpoint) -> Delivery:
    """A signed `webhook.test` request: kind `test`, one attempt, terminal after it."""
    now = timezone.now()
    event_id = new_id("evt_")
    body = request_body(
        event_id=event_id,
        event_type=TEST_EVENT_TYPE,
        occurred_at=iso_ms(now),
        data={"webhookId": endpoint.id, "message": "This is a test delivery from Connect."},
    )
    delivery = new_delivery(
        endpoint=endpoint, event_id=event_id, event_type=TEST_EVENT_TYPE, kind=DeliveryKind.TEST, body=body, now=now
    )
    delivery.save(force_insert=True)
    drain_after_commit()
    return delivery


@transaction.atomic
def replay_delivery(*, delivery: Delivery) -> Delivery:
    """A new delivery (new `dlv_` id) of the same event and body, with the normal retry
    policy. `409 not_allowed` unless the original is terminal, an event delivery, and its
    endpoint is live and active."""
    endpoint = WebhookEndpoint.objects.get(pk=delivery.endpoint_id)
    if (
        not delivery.is_terminal
        or delivery.kind != DeliveryKind.EVENT
        or endpoint.deleted_at is not None
        or not endpoint.active
    ):
        raise NotAllowed()
    replay = new_delivery(
        endpoint=endpoint,
        event_id=delivery.event_id,
        event_type=delivery.event_type,
        kind=DeliveryKind.EVENT,
        body=delivery.body,
        now=timezone.now(),
        replay_of=delivery,
    )
    replay.save(force_insert=True)
    drain_after_commit()
    return replay



def purge_terminal_deliveries(*, older_than_days: int = RETENTION_DAYS, batch_size: int = 1000) -> int:
    """Delete terminal deliveries (and their attempts) past the retention window, in batches
    so no transaction holds locks for long. Pending and retrying deliveries never expire."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted = 0
    while True:
        ids = list(
            Delivery.objects.filter(terminal_at__lt=cutoff)
            .exclude(status__in=ACTIVE_STATUSES)
            .values_list("id", flat=True)[:batch_size]
        )
        if not ids:
            return deleted
        with transaction.atomic():
            Delivery.objects.filter(replay_of_id__in=ids).update(replay_of=None)
            Delivery.objects.filter(id__in=ids).delete()
        deleted += len(ids)
