"""Writing what a batch's attempts did: each delivery's new state in one transaction, only where
the batch's lease still holds it (one cancelled meanwhile stays cancelled), and a log line and
the metrics per attempt. A 2xx succeeds; a receiver answer its endpoint's door makes final
(apps/webhooks/owners.py) ends the delivery at once as a dead letter with that reason; anything
else is retried on the schedule (CONNECT_WEBHOOK_RETRY_SCHEDULE) until it runs out. An owned
endpoint whose door has a `Suspend` rule is held once its recent attempts fail past it."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Collection

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from apps.core import metrics
from apps.webhooks import outbound, schedule
from apps.webhooks.models import (
    AttemptError,
    Delivery,
    DeliveryAttempt,
    DeliveryKind,
    DeliveryStatus,
    StopReason,
    WebhookEndpoint,
)
from apps.webhooks.owners import FINAL_STATUS_REASONS, Suspend

logger = logging.getLogger("connect.webhooks")


def observe(endpoint_id: str, attempted: list[tuple[Delivery, object, outbound.Outcome]],
            statuses: dict[str, str]) -> None:
    """One log line and the metrics per attempt (apps/core/metrics.py)."""
    for delivery, _, outcome in attempted:
        result = outcome.error or "succeeded"
        metrics.WEBHOOK_ATTEMPTS.labels(result).inc()
        metrics.WEBHOOK_ATTEMPT_SECONDS.observe(outcome.duration_ms / 1000)
        status = statuses.get(delivery.id, "lease_lost")
        if status == DeliveryStatus.DEAD_LETTER:
            metrics.DEAD_LETTERS.inc()
        logger.log(logging.WARNING if outcome.error else logging.INFO, "webhook attempt %s", result, extra={
            "delivery_id": delivery.id, "endpoint_id": endpoint_id, "outcome": status,
            "http_status": outcome.http_status, "duration_ms": outcome.duration_ms, "error_kind": outcome.error or None,
        })  # fmt: skip


def final(outcome: outbound.Outcome, final_statuses: Collection[int]) -> bool:
    """Whether the receiver's answer ends the delivery at once (the endpoint's door says which)."""
    return outcome.error == AttemptError.HTTP_ERROR and outcome.http_status in final_statuses


def _outcome_changes(delivery: Delivery, outcome: outbound.Outcome, now,
                     final_statuses: Collection[int]) -> tuple[str, dict]:
    number = delivery.attempt_count + 1
    changes = {"attempt_count": F("attempt_count") + 1, "last_http_status": outcome.http_status,
               "updated_at": now, "lease_until": None, "lease_token": ""}
    if not outcome.error:
        status = DeliveryStatus.SUCCEEDED
        changes.update(status=status, terminal_at=now, next_attempt_at=None)
        return status, changes
    if final(outcome, final_statuses):
        status = DeliveryStatus.DEAD_LETTER
        changes.update(status=status, terminal_at=now, next_attempt_at=None,
                       stop_reason=FINAL_STATUS_REASONS[outcome.http_status], is_dead_letter=True)
        return status, changes
    delays = settings.CONNECT_WEBHOOK_RETRY_SCHEDULE if delivery.kind == DeliveryKind.EVENT else ()
    delay = schedule.delay_after(number, delays)
    if delay is None:
        status = DeliveryStatus.DEAD_LETTER
        changes.update(status=status, terminal_at=now, next_attempt_at=None,
                       stop_reason=StopReason.MAX_ATTEMPTS, is_dead_letter=True)
    else:
        status = DeliveryStatus.RETRYING
        changes.update(status=status, next_attempt_at=now + timedelta(seconds=delay))
    return status, changes


def record(attempt_token: str, attempted: list[tuple[Delivery, object, outbound.Outcome]], *,
           final_statuses: Collection[int] = ()) -> dict[str, str]:
    """Write the attempts of one batch in one transaction, each only where `attempt_token`
    still holds its delivery (one cancelled meanwhile stays cancelled). Returns id → status
    for those written."""
    if not attempted:
        return {}
    now = timezone.now()
    ids = [delivery.id for delivery, _, _ in attempted]
    with transaction.atomic():
        held = Delivery.objects.filter(id__in=ids, lease_token=attempt_token)
        if connection.features.has_select_for_update:
            held = held.select_for_update()
        live = set(held.values_list("id", flat=True))
        groups: dict[tuple, tuple[dict, list[str]]] = {}  # one UPDATE per distinct change
        rows = []
        statuses = {}
        for delivery, started_at, outcome in attempted:
            if delivery.id not in live:
                continue
            status, changes = _outcome_changes(delivery, outcome, now, final_statuses)
            statuses[delivery.id] = status
            key = (status, outcome.http_status, delivery.attempt_count, delivery.kind)
            groups.setdefault(key, (changes, []))[1].append(delivery.id)
            rows.append(DeliveryAttempt(
                delivery_id=delivery.id, endpoint_id=delivery.endpoint_id, number=delivery.attempt_count + 1,
                started_at=started_at,
                completed_at=started_at + timedelta(milliseconds=outcome.duration_ms),
                http_status=outcome.http_status, duration_ms=outcome.duration_ms, error=outcome.error,
                error_detail=outcome.detail[:300],
            ))
        for changes, group_ids in groups.values():
            Delivery.objects.filter(id__in=group_ids, lease_token=attempt_token).update(**changes)
        DeliveryAttempt.objects.bulk_create(rows)
    return statuses


def suspend_if_failing(endpoint: WebhookEndpoint, rule: Suspend, final_statuses: Collection[int]) -> bool:
    """Hold the endpoint's delivery (`suspended_at`) when its attempts since the later of the
    rule's window and its last resumption are at least `rule.min_attempts` and more than
    `rule.failure_rate` of them failed (a final answer is the receiver's choice, not a failure).
    One count over the endpoint's attempts of the window. Returns whether this call suspended it."""
    now = timezone.now()
    since = now - timedelta(seconds=rule.window_seconds)
    if endpoint.resumed_at is not None and endpoint.resumed_at > since:
        since = endpoint.resumed_at
    failure = ~Q(error="")
    if final_statuses:
        failure &= ~Q(error=AttemptError.HTTP_ERROR, http_status__in=list(final_statuses))
    counts = DeliveryAttempt.objects.filter(endpoint_id=endpoint.id, started_at__gte=since).aggregate(
        total=Count("id"), failed=Count("id", filter=failure))
    total, failed = counts["total"], counts["failed"]
    if total < rule.min_attempts or failed <= rule.failure_rate * total:
        return False
    suspended = WebhookEndpoint.objects.filter(pk=endpoint.id, suspended_at__isnull=True).update(suspended_at=now)
    if suspended:
        logger.warning("webhook endpoint suspended", extra={"endpoint_id": endpoint.id, "attempts": total,
                                                           "failed": failed})
    return bool(suspended)
