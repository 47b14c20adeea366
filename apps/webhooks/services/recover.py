"""Recover: queue again, for one endpoint, the events of a time window that never reached it."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from apps.core.errors import NotAllowed, invalid
from apps.events import selectors as event_selectors
from apps.events.models import EventType
from apps.events.representations import event_envelope
from apps.events.retention import retention as event_retention
from apps.webhooks import filters as webhook_filters
from apps.webhooks.models import Delivery, DeliveryKind, DeliveryStatus, WebhookEndpoint
from apps.webhooks.representations import request_body
from apps.webhooks.services.deliveries import drain_after_commit, event_facts, new_delivery

# Deliveries one recover call queues at most; the caller calls again for the rest.
RECOVER_MAX = 1000
RECOVER_CHUNK = 500
# A delivery's last state that recover repeats: it did not reach the receiver and nothing will
# retry it. Succeeded, pending and retrying deliveries are left alone (so a second call over the
# same window queues nothing twice).
RECOVERABLE = (DeliveryStatus.DEAD_LETTER, DeliveryStatus.CANCELLED)


@transaction.atomic
def recover_deliveries(*, endpoint: WebhookEndpoint, since: datetime, until: datetime | None = None,
                       limit: int | None = None) -> tuple[int, bool]:
    """Queue, for this endpoint, a new delivery (original event id, normal retry policy) of
    every event recorded in [since, until) that matches its filters and whose last delivery to
    it did not succeed: a `dead_letter` or `cancelled` one (the same signed body again), or none
    at all for an event recorded after the endpoint was created (it was inactive then; its body
    is built from the event's data, fixed at commit). Events from before the endpoint existed
    were never its to miss. At most `limit` per call: returns (queued, more). `409 not_allowed`
    for an inactive or deleted endpoint."""
    limit = RECOVER_MAX if limit is None else limit
    endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    if not endpoint.active or endpoint.deleted_at is not None:
        raise NotAllowed()
    now = timezone.now()
    oldest = now - event_retention(EventType.SESSION_CREATED)
    if since < oldest:
        raise invalid("since", "must be within the event log's retention (CONNECT_EVENT_RETENTION_DAYS)")
    until = min(until or now, now)
    if until <= since:
        raise invalid("until", "must be after since")
    start = max(since, endpoint.created_at)
    queued: list[Delivery] = []
    for events in event_selectors.events_recorded_between(
        workspace_id=endpoint.workspace_id, types=webhook_filters.SUBSCRIBABLE_TYPES,
        start_ms=int(start.timestamp() * 1000), end_ms=int(until.timestamp() * 1000), chunk=RECOVER_CHUNK,
    ):
        matching = [e for e in events if webhook_filters.filters_match(
            endpoint.filters, event_facts(event_type=e.type, session_id=e.session_id, data=e.data))]
        last = _last_deliveries(endpoint, [e.id for e in matching])
        for event in matching:
            previous = last.get(event.id)
            if previous is not None and previous.status not in RECOVERABLE:
                continue
            if len(queued) == limit:
                _queue(queued)
                return len(queued), True
            envelope = event_envelope(event)
            queued.append(new_delivery(
                endpoint=endpoint, event_id=event.id, event_type=event.type, kind=DeliveryKind.EVENT, now=now,
                body=previous.body if previous is not None else request_body(
                    event_id=event.id, event_type=event.type, occurred_at=envelope["occurredAt"],
                    data=envelope["data"]),
                replay_of=previous,
            ))
    _queue(queued)
    return len(queued), False


def _last_deliveries(endpoint: WebhookEndpoint, event_ids: list[str]) -> dict[str, Delivery]:
    last: dict[str, Delivery] = {}
    for delivery in Delivery.objects.filter(endpoint=endpoint, event_id__in=event_ids,
                                            kind=DeliveryKind.EVENT).order_by("created_at", "id"):
        last[delivery.event_id] = delivery
    return last


def _queue(deliveries: list[Delivery]) -> None:
    if deliveries:
        Delivery.objects.bulk_create(deliveries)
        drain_after_commit()
