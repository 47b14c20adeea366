"""One delivery attempt, and the sweeper that finds deliveries to attempt.

Leases make a delivery's attempts exclusive:
1. A queued delivery holds a *queue lease* (token T, `CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS`): it
   was put on django-q2 with T, and the sweeper leaves it alone until the lease expires.
2. `deliver_once(id, T)` swaps T for a fresh token A with one conditional UPDATE
   (`… WHERE id = ? AND lease_token = T AND lease_until > now`): of two workers holding the same
   task (a broker re-delivery, a sweeper re-queue racing a slow queue), exactly one swaps; the
   other does nothing. The attempt lease (`CONNECT_WEBHOOK_LEASE_SECONDS`, ≥ 60 s) is longer
   than the 10 s request timeout plus margin.
3. The result is written only `WHERE lease_token = A`: a delivery cancelled meanwhile stays cancelled.
4. A worker killed mid-attempt leaves a lease that expires; the sweeper re-queues the delivery
   (new token) and it is attempted again. Nothing is lost; the receiver may see the event
   twice (at least once, contract §6.2.5) and deduplicates on the event id.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.webhooks import keys, outbound, schedule, ssrf
from apps.webhooks.models import (
    ACTIVE_STATUSES,
    Delivery,
    DeliveryAttempt,
    DeliveryKind,
    DeliveryStatus,
    StopReason,
    WebhookEndpoint,
    attempt_token,
    queue_token,
)
from apps.webhooks.services import policy

USER_AGENT = "Connect-Webhooks/1.0"

_sender: outbound.Sender | None = None


def sender() -> outbound.Sender:
    """One per process, so a worker keeps its connections to receivers alive between deliveries."""
    global _sender
    if _sender is None:
        _sender = outbound.Sender(policy(), timeout=settings.CONNECT_WEBHOOK_TIMEOUT_SECONDS)
    return _sender


def claim_due(*, limit: int = 500) -> list[tuple[str, str]]:
    """The sweeper's claim: due deliveries with no live lease get a queue lease and are
    returned as (id, token) to queue. PostgreSQL skips rows another sweeper holds
    (`FOR UPDATE SKIP LOCKED`); SQLite's IMMEDIATE transactions make the select-and-update
    one writer's step (settings: `transaction_mode`), so two sweepers never claim one row."""
    now = timezone.now()
    token = queue_token()
    with transaction.atomic():
        due = (
            Delivery.objects.filter(status__in=ACTIVE_STATUSES, next_attempt_at__lte=now)
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lte=now))
            .order_by("next_attempt_at")
        )
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True)
        ids = list(due.values_list("id", flat=True)[:limit])
        if ids:
            Delivery.objects.filter(id__in=ids).update(
                lease_until=now + timedelta(seconds=settings.CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS), lease_token=token
            )
    return [(delivery_id, token) for delivery_id in ids]


def _take_attempt_lease(delivery_id: str, token: str, *, batch: int = 1) -> tuple[str | None, list[str]]:
    """Swap the queue lease `token` of `delivery_id` for an attempt lease, and take up to
    `batch - 1` more deliveries to the same endpoint that are queued but not started into it
    (their own tasks then find their token gone and skip). Returns (attempt token, ids in
    attempt order), or (None, []) when `token` no longer holds the delivery."""
    now = timezone.now()
    mine = Delivery.objects.filter(id=delivery_id, lease_token=token, lease_until__gt=now, status__in=ACTIVE_STATUSES)
    # A read first: a task whose delivery went into another worker's batch skips without
    # taking the write lock (SQLite) or a row lock (PostgreSQL).
    endpoint_id = mine.values_list("endpoint_id", flat=True).first()
    if endpoint_id is None:
        return None, []
    token_a = attempt_token()
    lease = {"lease_token": token_a, "lease_until": now + timedelta(seconds=settings.CONNECT_WEBHOOK_LEASE_SECONDS)}
    with transaction.atomic():
        if not mine.update(**lease):
            return None, []
        others: list[str] = []
        if batch > 1:
            queued = Delivery.objects.filter(
                endpoint_id=endpoint_id, status__in=ACTIVE_STATUSES, next_attempt_at__lte=now,
                lease_token__startswith="q", lease_until__gt=now,
            ).order_by("next_attempt_at")
            if connection.features.has_select_for_update_skip_locked:
                queued = queued.select_for_update(skip_locked=True)
            others = list(queued.values_list("id", flat=True)[: batch - 1])
            if others:
                Delivery.objects.filter(id__in=others).update(**lease)
    return token_a, [delivery_id, *others]


def installation_authorized(endpoint: WebhookEndpoint) -> bool:
    """The credential that created the endpoint still holds: not revoked or expired, its
    member active, and `svc:sessions:read` still granted (DESIGN.md §1, cancellation)."""
    membership = endpoint.created_by
    if not membership.is_active or not membership.user.is_active or not endpoint.workspace.is_available:
        return False
    now = timezone.now()
    if endpoint.credential_kind == "api_key":
        from apps.tenancy.models import ApiKey

        key = ApiKey.objects.filter(id=endpoint.credential_id).values("revoked_at", "expires_at", "scopes").first()
        return bool(
            key
            and key["revoked_at"] is None
            and (key["expires_at"] is None or key["expires_at"] > now)
            and "svc:sessions:read" in key["scopes"]
        )
    from apps.oauth.models import AccessToken, RefreshToken

    # An OAuth installation is the member's grant to the application for this workspace: alive
    # while an unexpired access token or an unrevoked refresh token with the scope remains.
    grant = {"user_id": membership.user_id, "workspace_id": endpoint.workspace_id,
             "application_id": endpoint.oauth_application_id}
    tokens = AccessToken.objects.filter(**grant, expires__gt=now, scope__contains="svc:sessions:read")
    refresh = RefreshToken.objects.filter(
        **grant, revoked__isnull=True, access_token__scope__contains="svc:sessions:read"
    )
    return tokens.exists() or refresh.exists()


# Per process: endpoint id → (checked at, authorized). Revocations and deactivations through
# the services cancel deliveries at once (apps/webhooks/receivers.py); this attempt-time check is
# the backstop for every other path, and may lag by these few seconds.
_installation_checks: dict[str, tuple[float, bool]] = {}
INSTALLATION_CHECK_SECONDS = 2.0


def _installation_authorized_cached(endpoint: WebhookEndpoint) -> bool:
    now = time.monotonic()
    cached = _installation_checks.get(endpoint.id)
    if cached is None or now - cached[0] > INSTALLATION_CHECK_SECONDS:
        if len(_installation_checks) > 10_000:
            _installation_checks.clear()
        cached = (now, installation_authorized(endpoint))
        _installation_checks[endpoint.id] = cached
    return cached[1]


def _stop_reason(endpoint: WebhookEndpoint) -> str | None:
    if endpoint.deleted_at is not None:
        return StopReason.ENDPOINT_DELETED
    if not endpoint.active:
        return StopReason.ENDPOINT_DISABLED
    if not _installation_authorized_cached(endpoint):
        return StopReason.INSTALLATION_UNAUTHORIZED
    return None


def request_headers(
    delivery: Delivery, body: bytes, material: keys.SigningMaterial | None = None
) -> list[tuple[str, str]]:
    from apps.webhooks import signing

    material = material or keys.signing_material()
    signature = signing.sign(material.seed, kid=material.kid, timestamp=int(time.time()), body=body)
    return [
        ("Content-Type", "application/json"),
        ("User-Agent", USER_AGENT),
        ("Svc-Webhook-Id", delivery.endpoint_id),
        ("Svc-Event-Id", delivery.event_id),
        ("Svc-Delivery-Id", delivery.id),
        ("Svc-Signature", signature),
    ]


# Deliveries one task attempts at most: its own and those queued behind it for the same
# endpoint. A backlog then costs a few statements per batch instead of per delivery; a batch
# stops early rather than outlive its lease, and at a receiver's first network error or timeout.
BATCH = 20
LEASE_MARGIN_SECONDS = 1.0
_STOP_BATCH_ERRORS = {"network_error", "timeout", "blocked_destination"}


def deliver_once(delivery_id: str, token: str, *, batch: int = 1) -> str:
    """Attempt `delivery_id` if `token` still holds its queue lease, together with up to
    `batch - 1` deliveries queued behind it for the same endpoint. Returns what happened to
    `delivery_id`: `skipped` (another worker has it, or it is no longer due), `cancelled`,
    `lease_lost`, or its status after the attempt."""
    token_a, ids = _take_attempt_lease(delivery_id, token, batch=batch)
    if token_a is None:
        return "skipped"
    by_id = Delivery.objects.select_related("endpoint__created_by__user", "endpoint__workspace").in_bulk(ids)
    deliveries = [by_id[i] for i in ids if i in by_id]
    endpoint = deliveries[0].endpoint
    reason = _stop_reason(endpoint)
    if reason is not None:
        now = timezone.now()
        Delivery.objects.filter(id__in=ids, lease_token=token_a).update(
            status=DeliveryStatus.CANCELLED, stop_reason=reason, terminal_at=now, updated_at=now,
            lease_until=None, lease_token="",
        )
        return "cancelled"

    try:
        ssrf.check_url(endpoint.url, policy())
        blocked = False
    except ssrf.UnsafeDestination:
        blocked = True
    material = keys.signing_material()
    # Each request may take the whole timeout: start one only if it ends inside the lease,
    # with a margin for recording it.
    lease_ends = time.monotonic() + settings.CONNECT_WEBHOOK_LEASE_SECONDS - LEASE_MARGIN_SECONDS
    attempted = []
    for delivery in deliveries:
        if attempted and (
            time.monotonic() + settings.CONNECT_WEBHOOK_TIMEOUT_SECONDS > lease_ends
            or attempted[-1][2].error in _STOP_BATCH_ERRORS
        ):
            break
        started_at = timezone.now()
        if blocked:
            outcome = outbound.Outcome(None, "blocked_destination", 0)
        else:
            body = delivery.body.encode("utf-8")
            outcome = sender().post(endpoint.url, request_headers(delivery, body, material), body)
        attempted.append((delivery, started_at, outcome))
    statuses = _record(token_a, attempted)
    unattempted = ids[len(attempted):]
    if unattempted:  # due again at once: the sweeper queues them
        Delivery.objects.filter(id__in=unattempted, lease_token=token_a).update(lease_until=None, lease_token="")
    return statuses.get(delivery_id, "lease_lost")


def _outcome_changes(delivery: Delivery, outcome: outbound.Outcome, now) -> tuple[str, dict]:
    number = delivery.attempt_count + 1
    changes = {"attempt_count": F("attempt_count") + 1, "last_http_status": outcome.http_status,
               "updated_at": now, "lease_until": None, "lease_token": ""}
    if not outcome.error:
        status = DeliveryStatus.SUCCEEDED
        changes.update(status=status, terminal_at=now, next_attempt_at=None)
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


def _record(attempt_token: str, attempted: list[tuple[Delivery, object, outbound.Outcome]]) -> dict[str, str]:
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
            status, changes = _outcome_changes(delivery, outcome, now)
            statuses[delivery.id] = status
            key = (status, outcome.http_status, delivery.attempt_count, delivery.kind)
            groups.setdefault(key, (changes, []))[1].append(delivery.id)
            rows.append(DeliveryAttempt(
                delivery_id=delivery.id, number=delivery.attempt_count + 1, started_at=started_at,
                completed_at=started_at + timedelta(milliseconds=outcome.duration_ms),
                http_status=outcome.http_status, duration_ms=outcome.duration_ms, error=outcome.error,
            ))
        for changes, group_ids in groups.values():
            Delivery.objects.filter(id__in=group_ids, lease_token=attempt_token).update(**changes)
        DeliveryAttempt.objects.bulk_create(rows)
    return statuses
