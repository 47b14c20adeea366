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
import uuid
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
    token = uuid.uuid4().hex
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


def _take_attempt_lease(delivery_id: str, token: str) -> str | None:
    now = timezone.now()
    attempt_token = uuid.uuid4().hex
    taken = Delivery.objects.filter(
        id=delivery_id, lease_token=token, lease_until__gt=now, status__in=ACTIVE_STATUSES
    ).update(lease_token=attempt_token, lease_until=now + timedelta(seconds=settings.CONNECT_WEBHOOK_LEASE_SECONDS))
    return attempt_token if taken else None


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


def request_headers(delivery: Delivery, body: bytes) -> list[tuple[str, str]]:
    from apps.webhooks import signing

    material = keys.signing_material()
    signature = signing.sign(material.seed, kid=material.kid, timestamp=int(time.time()), body=body)
    return [
        ("Content-Type", "application/json"),
        ("User-Agent", USER_AGENT),
        ("Svc-Webhook-Id", delivery.endpoint_id),
        ("Svc-Event-Id", delivery.event_id),
        ("Svc-Delivery-Id", delivery.id),
        ("Svc-Signature", signature),
    ]


def deliver_once(delivery_id: str, token: str) -> str:
    """Attempt one delivery if `token` still holds its queue lease. Returns what happened:
    `skipped` (another worker has it, or it is no longer due), `cancelled`, or the status
    after the attempt."""
    attempt_token = _take_attempt_lease(delivery_id, token)
    if attempt_token is None:
        return "skipped"
    delivery = Delivery.objects.select_related("endpoint__created_by__user", "endpoint__workspace").get(id=delivery_id)
    endpoint = delivery.endpoint
    reason = _stop_reason(endpoint)
    if reason is not None:
        now = timezone.now()
        Delivery.objects.filter(id=delivery_id, lease_token=attempt_token).update(
            status=DeliveryStatus.CANCELLED, stop_reason=reason, terminal_at=now, updated_at=now,
            lease_until=None, lease_token="",
        )
        return "cancelled"

    body = delivery.body.encode("utf-8")
    started_at = timezone.now()
    try:
        ssrf.check_url(endpoint.url, policy())
    except ssrf.UnsafeDestination:
        outcome = outbound.Outcome(None, "blocked_destination", 0)
    else:
        outcome = sender().post(endpoint.url, request_headers(delivery, body), body)
    return _record(delivery, attempt_token, started_at, outcome)


def _record(delivery: Delivery, attempt_token: str, started_at, outcome: outbound.Outcome) -> str:
    completed_at = timezone.now()
    number = delivery.attempt_count + 1
    delays = settings.CONNECT_WEBHOOK_RETRY_SCHEDULE if delivery.kind == DeliveryKind.EVENT else ()
    changes = {
        "attempt_count": F("attempt_count") + 1,
        "last_http_status": outcome.http_status,
        "updated_at": completed_at,
        "lease_until": None,
        "lease_token": "",
    }
    if not outcome.error:
        status = DeliveryStatus.SUCCEEDED
        changes.update(status=status, terminal_at=completed_at, next_attempt_at=None)
    else:
        delay = schedule.delay_after(number, delays)
        if delay is None:
            status = DeliveryStatus.DEAD_LETTER
            changes.update(status=status, terminal_at=completed_at, next_attempt_at=None,
                           stop_reason=StopReason.MAX_ATTEMPTS, is_dead_letter=True)
        else:
            status = DeliveryStatus.RETRYING
            changes.update(status=status, next_attempt_at=completed_at + timedelta(seconds=delay))
    with transaction.atomic():
        written = Delivery.objects.filter(id=delivery.id, lease_token=attempt_token).update(**changes)
        if not written:
            return "lease_lost"
        DeliveryAttempt.objects.create(
            delivery_id=delivery.id,
            number=number,
            started_at=started_at,
            completed_at=completed_at,
            http_status=outcome.http_status,
            duration_ms=outcome.duration_ms,
            error=outcome.error,
        )
    return status
