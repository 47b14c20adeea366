"""What the Events extension's webhook subscriptions receive, through apps/webhooks' drains.

Bodies are `EventOccurrence`s, queued by `on_event_recorded` in the event's transaction (by
`replay` on a subscribe that resumes from a cursor), stored with `cursor` null. mcp's door
(apps/webhooks/owners.py) adds to every attempt `X-MCP-Subscription-Id` and the body's `cursor`,
the subscription's watermark written just before signing (apps/webhooks/watermark.py: everything
at or before it was acknowledged or given up on); makes 410 and 413 final for that delivery;
suspends delivery after sustained failure (`SUSPEND`, lifted by the next refresh); and runs
`upkeep` with every sweep. A subscription that starts owes a catch-up (`owe_catch_up`,
`catch_up`): what a transaction open meanwhile recorded without seeing it lies after its start;
once those transactions have ended, what matched and was not queued is queued, once, the
watermark holding at the start until then; what it cannot serve is said with a `gap` envelope.
The reasons: docs/decisions/mcp-events-delivery.md."""

from __future__ import annotations

import json
import secrets
from typing import Any, Callable, Collection, Sequence

from django.db import transaction
from django.utils import timezone

from apps.core.timestamps import iso_ms
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

# A catch-up queues at most this many events; past that it queues none and sends a `gap`.
CATCH_UP_MAX = 1000
# Suspension after sustained failure, as the extension's guidance words it: more than 95 % of
# the attempts of the last hour failed, over at least 100 of them (a blip, or a quiet
# subscription's few failures, suspends nothing). The next refresh lifts it.
SUSPEND = owners.Suspend(window_seconds=3600, min_attempts=100, failure_rate=0.95)
# What `deliveryStatus.lastError` may say (the extension's closed list); attempts map onto it.
ERROR_CATEGORIES = ("connection_refused", "timeout", "tls_error", "http_4xx", "http_5xx", "challenge_failed")

# The event types delivered by webhook: those apps/webhooks delivers.
WEBHOOK_TYPES = frozenset(SUBSCRIBABLE_TYPES)


def register(upkeep: Callable[[], object] | None = None) -> None:
    owners.register(OWNER, owners.Door(headers=headers, final_statuses=FINAL_STATUSES, render=render,
                                       suspend=SUSPEND, upkeep=upkeep))


def headers(endpoint: WebhookEndpoint) -> list[tuple[str, str]]:
    return [(SUBSCRIPTION_HEADER, endpoint.id)]


def render(endpoint: WebhookEndpoint, batch: Sequence[Delivery]):
    """Each attempt's body: the stored occurrence with `cursor` the watermark for that attempt;
    a control envelope (a body with `type`) as stored."""
    marks = watermark.Batch(endpoint, batch)

    def body(delivery: Delivery, acknowledged: Collection[str]) -> bytes:
        occurrence = json.loads(delivery.body)
        if "type" in occurrence:
            return delivery.body.encode("utf-8")
        occurrence["cursor"] = positions.encode_position(marks.at(delivery, acknowledged))
        return _text(occurrence).encode("utf-8")

    return body


def cursor_of(endpoint_id: str) -> str:
    """The subscription's watermark now, as the wire's cursor (a subscribe's answer)."""
    endpoint = WebhookEndpoint.objects.only("id", "catch_up_after").get(pk=endpoint_id)
    return positions.encode_position(watermark.current(endpoint))


def envelope_id(kind: str) -> str:
    """`webhook-id` of a control envelope: `msg_<type>_<random>`, as the extension words it."""
    return f"msg_{kind}_{secrets.token_hex(12)}"


def queue_gap(endpoint: WebhookEndpoint, cursor: positions.Position) -> None:
    """A `{"type": "gap", "cursor": <fresh>}` envelope, in the caller's transaction, drained,
    signed, headed and retried like an event delivery (its id is no event's, so the watermark
    passes over it)."""
    body = _text({"type": "gap", "cursor": positions.encode_position(cursor)})
    services.queue_delivery(endpoint=endpoint, event_id=envelope_id("gap"), event_type="gap", body=body)


def owe_catch_up(endpoint: WebhookEndpoint) -> None:
    """In the transaction that starts (or revives) a subscription, on the row it saves: a
    catch-up is owed. An event its matcher could miss belongs to a transaction running now or
    begun after (before the commit): its position is one of those running now or past the log's
    end now, so above the settled end, where the catch-up starts. Rows committed before now are
    not the subscription's (a replay from the client's cursor queues those it asks for). The end
    of the range is read after the commit (`catch_up`)."""
    end, running = event_selectors.log_snapshot()
    settled = min([end, *running])  # the log's horizon now
    endpoint.catch_up_after = positions.encode_position(positions.Position(settled - 1, "", retention.now_ms()))
    endpoint.catch_up_snapshot = {"end": end, "running": running}
    endpoint.catch_up_until = None


def catch_up(endpoint_id: str) -> str:
    """The subscription's owed catch-up, if the log allows it now: "done", "waiting" (a
    transaction that may have missed it is still running), or "none" (nothing owed). Called
    after the subscribe's commit and by every sweep until it is done; idempotent with the
    matcher and with itself: an event is queued only if the subscription has no delivery of it,
    under the subscription row's lock."""
    owed = WebhookEndpoint.objects.filter(pk=endpoint_id).values_list("catch_up_after", "catch_up_until").first()
    if owed is None or not owed[0]:
        return "none"
    after, until = owed
    if until is None:
        # Read after the commit that made the subscription visible: a row of any transaction
        # that read the database before it is below this.
        until = event_selectors.log_end()
        WebhookEndpoint.objects.filter(pk=endpoint_id, catch_up_after=after, catch_up_until__isnull=True).update(
            catch_up_until=until)
        return catch_up(endpoint_id)
    if event_selectors.horizon() < until:
        return "waiting"
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().filter(pk=endpoint_id).first()
        if endpoint is None or endpoint.catch_up_after != after or endpoint.catch_up_until != until:
            return "none"  # done meanwhile, or owed afresh (a revival): the next call sees it
        now = timezone.now()
        live = endpoint.expires_at is None or endpoint.expires_at > now
        if endpoint.deleted_at is None and endpoint.active and live:
            _queue_owed(endpoint, positions.decode_position(after), until)
        WebhookEndpoint.objects.filter(pk=endpoint_id).update(catch_up_after="", catch_up_until=None,
                                                               catch_up_snapshot=None)
    return "done"


def _queue_owed(endpoint: WebhookEndpoint, after: positions.Position, until: int) -> None:
    [entry] = endpoint.filters
    types = frozenset({entry["type"]})
    fresh = positions.Position(until - 1, "", retention.now_ms())
    if after.ms < retention.oldest_complete_ms(types):
        queue_gap(endpoint, fresh)  # the log may have lost some of them
        return
    snapshot = endpoint.catch_up_snapshot or {"end": 0, "running": []}
    running = frozenset(snapshot["running"])
    events, _ = event_selectors.read_log(after=after, limit=CATCH_UP_MAX + 1, workspace_id=endpoint.workspace_id,
                                         types=types, session_id=entry.get("sessionId"))
    below = [e for e in events if e.position < until]
    if len(below) > CATCH_UP_MAX:  # (and more may follow)
        queue_gap(endpoint, fresh)
        return
    # Not those committed before the subscription started: it was never owed them.
    owed = [e for e in below if e.position in running or e.position >= snapshot["end"]]
    queued = set(Delivery.objects.filter(endpoint_id=endpoint.id, event_id__in=[e.id for e in owed])
                 .values_list("event_id", flat=True))
    services.queue_deliveries(endpoint=endpoint, events=[(e.id, e.type, occurrence_body(e)) for e in owed
                                                         if e.id not in queued])


def catch_up_owed() -> int:
    """Every owed catch-up the log allows now (the sweep's part). Returns how many were done."""
    owing = WebhookEndpoint.objects.filter(owner=OWNER).exclude(catch_up_after="").values_list("pk", flat=True)
    return sum(catch_up(endpoint_id) == "done" for endpoint_id in list(owing))


def delivery_status(endpoint: WebhookEndpoint, *, suspended: bool) -> dict[str, Any]:
    """`deliveryStatus` of a refresh: `active` false when delivery was suspended until this
    refresh lifted it; when the last attempt failed, its category and the start of the failing
    run (`failedSince`). Categories only: never the receiver's status line, headers or body."""
    summary = selectors.attempt_summary(endpoint_id=endpoint.id)
    status: dict[str, Any] = {"active": not suspended,
                              "lastDeliveryAt": iso_ms(summary.last_success) if summary.last_success else None,
                              "lastError": None}
    if summary.last_error is not None:
        status["lastError"] = error_category(*summary.last_error)
        status["failedSince"] = iso_ms(summary.failing_since)
    return status


def error_category(error: str, http_status: int | None, detail: str) -> str:
    """An attempt's failure as one of ERROR_CATEGORIES. A redirect (never followed) is the
    receiver's answer and counts with the 4xx: the list has no 3xx."""
    if error == "timeout":
        return "timeout"
    if error in ("http_error", "redirect"):
        return "http_5xx" if (http_status or 0) >= 500 else "http_4xx"
    if detail.startswith("TLS failure"):
        return "tls_error"
    return "connection_refused"  # refused, unreachable, or an address deliveries may not reach


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
