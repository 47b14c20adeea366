"""What the Events extension's webhook subscriptions receive, through apps/webhooks' drains.

Bodies are `EventOccurrence`s, queued by `on_event_recorded` in the event's transaction (and by
`replay` on a subscribe that resumes from a cursor), stored with `cursor` null. The door this
module registers for the endpoints mcp owns (apps/webhooks/owners.py) adds, to every attempt:
`X-MCP-Subscription-Id`, the subscription's id; the body's `cursor`, written just before signing
as the subscription's watermark (apps/webhooks/watermark.py: every event at or before it was
acknowledged or given up on, so a client that persists the latest one it received and resumes
from it, by `events/poll` or a subscribe with `cursor`, misses nothing); and 410 and 413 as final
for that delivery, never retried, the subscription unchanged. The reasons:
docs/decisions/mcp-events-delivery.md."""

from __future__ import annotations

import json
from typing import Any, Collection, Sequence

from django.utils import timezone

from apps.events import positions, retention
from apps.events import selectors as event_selectors
from apps.events.representations import event_envelope
from apps.webhooks import owners, selectors, services, watermark
from apps.webhooks.filters import SUBSCRIBABLE_TYPES, filters_match
from apps.webhooks.models import Delivery, WebhookEndpoint

OWNER = "mcp"  # WebhookEndpoint.owner of a subscription
SUBSCRIPTION_HEADER = "X-MCP-Subscription-Id"
# The receiver answers that end a delivery at once: 413 (the body is too large for it) and 410
# (it does not want this one); the subscription goes on either way.
FINAL_STATUSES = frozenset({410, 413})
# A resuming subscribe replays at most this many events; past that it starts from now and says
# `truncated` (the client reads the rest with events/poll from its cursor).
REPLAY_MAX = 500

# The event types delivered by webhook: those apps/webhooks delivers.
WEBHOOK_TYPES = frozenset(SUBSCRIBABLE_TYPES)


def register() -> None:
    owners.register(OWNER, owners.Door(headers=headers, final_statuses=FINAL_STATUSES, render=render))


def headers(endpoint: WebhookEndpoint) -> list[tuple[str, str]]:
    return [(SUBSCRIPTION_HEADER, endpoint.id)]


def render(endpoint: WebhookEndpoint, batch: Sequence[Delivery]):
    """Each attempt's body: the stored occurrence with `cursor` the watermark for that attempt."""
    marks = watermark.Batch(endpoint.id, batch)

    def body(delivery: Delivery, acknowledged: Collection[str]) -> bytes:
        occurrence = json.loads(delivery.body)
        occurrence["cursor"] = positions.encode_position(marks.at(delivery, acknowledged))
        return _text(occurrence).encode("utf-8")

    return body


def cursor_of(endpoint_id: str) -> str:
    """The subscription's watermark now, as the wire's cursor (a subscribe's answer)."""
    return positions.encode_position(watermark.current(endpoint_id))


def _text(occurrence: dict[str, Any]) -> str:
    return json.dumps(occurrence, separators=(",", ":"), ensure_ascii=False)


def occurrence_body(event) -> str:
    """The `EventOccurrence` of one event as stored: the same `eventId`, `name`, `timestamp` and
    `data` as `events/poll` and REST's log; `cursor` is written per attempt."""
    envelope = event_envelope(event)
    return _text({"eventId": event.id, "name": event.type, "timestamp": envelope["occurredAt"],
                  "data": envelope["data"], "cursor": None})


def on_event_recorded(sender, event, **kwargs) -> None:  # noqa: ARG001 - signal
    """Inside record_event's transaction: one delivery per live subscription the event matches."""
    if event.type not in WEBHOOK_TYPES:
        return
    body = None
    facts = services.event_facts(event_type=event.type, session_id=event.session_id, data=event.data)
    for endpoint in selectors.deliverable_endpoints(workspace_id=event.workspace_id, owner=OWNER,
                                                    now=timezone.now()):
        if not filters_match(endpoint.filters, facts):
            continue
        body = body or occurrence_body(event)
        services.queue_delivery(endpoint=endpoint, event_id=event.id, event_type=event.type, body=body)


def replay(endpoint: WebhookEndpoint, *, after: positions.Position, max_age_ms: int | None) -> bool:
    """Queue, in the caller's transaction, the subscription's events after `after` in log order,
    none older than `max_age_ms`. Every committed one is read, settled or not: none of them can
    have seen the subscription when it was recorded, so none is queued twice. Returns
    `truncated`: whether events were skipped (past retention, under the age floor, or more than
    REPLAY_MAX: then none is replayed and delivery starts from now)."""
    [entry] = endpoint.filters
    types = frozenset({entry["type"]})
    truncated = after.ms < retention.oldest_complete_ms(types)
    events, _ = event_selectors.read_log(after=None if truncated else after, limit=REPLAY_MAX + 1,
                                         workspace_id=endpoint.workspace_id, types=types,
                                         session_id=entry.get("sessionId"), settled=False)
    if len(events) > REPLAY_MAX:
        return True
    floor = None if max_age_ms is None else retention.now_ms() - max_age_ms
    young = [e for e in events if floor is None or (positions.event_id_ms(e.id) or 0) >= floor]
    services.queue_deliveries(endpoint=endpoint, events=[(e.id, e.type, occurrence_body(e)) for e in young])
    return truncated or len(young) < len(events)
