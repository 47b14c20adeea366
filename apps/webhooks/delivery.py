"""Drains: claiming due deliveries in batches, attempting them, recording the results.

1. Due: pending or retrying, `next_attempt_at` come, no live lease. Drain tasks claim it.
2. A claim leases up to BATCH due deliveries of one endpoint under a fresh token in one
   transaction (PostgreSQL: SKIP LOCKED; SQLite: one writer): two drains never hold one delivery.
3. Fair: the endpoint claimed is the one that used the least worker time (`_candidates`) among
   those below CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY batches in flight; a batch starts attempts
   only within BATCH_SLICE_SECONDS, so a worker is back to claiming after one slow attempt.
4. Slow endpoints (an attempt of SLOW_ATTEMPT_SECONDS or more in their last batch) hold at most
   CONNECT_WEBHOOK_SLOW_BATCHES batches between them: a worker is left for the quick ones, whose
   due deliveries therefore never wait behind a slow receiver's attempt.
5. Results are written only where the token still holds (a cancelled delivery stays cancelled):
   apps/webhooks/results.py. An owned endpoint's door (apps/webhooks/owners.py) adds to it.
6. A killed worker's lease expires and the delivery is due again: nothing is lost; the
   receiver may see an event twice (at least once) and deduplicates on its id.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Callable, Sequence

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, Count, F, FloatField, Max, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from apps.webhooks import keys, outbound, results, services, signing, standard
from apps.webhooks.destinations import policy
from apps.webhooks.installation import unauthorized_installations
from apps.webhooks.models import ACTIVE_STATUSES, Delivery, DeliveryStatus, StopReason, WebhookEndpoint, attempt_token
from apps.webhooks.owners import door_of
from engine import ssrf

USER_AGENT = "Connect-Webhooks/1.0"

_sender: outbound.Sender | None = None


def sender() -> outbound.Sender:
    """One per process, so a worker keeps its connections to receivers alive between deliveries."""
    global _sender
    if _sender is None:
        _sender = outbound.Sender(policy(), timeout=settings.CONNECT_WEBHOOK_TIMEOUT_SECONDS)
    return _sender


# Deliveries one claim takes at most, all for one endpoint: a backlog costs a few statements per
# batch instead of per delivery. At the default cap of one batch per endpoint a single worker
# carries one endpoint's backlog, so a claim's and a record's fixed cost is spread over as many
# deliveries as a quick receiver takes within the slice below. A batch stops at a receiver's
# first network error or timeout (the rest are released, due again), and starts no request
# that could end after its drain's deadline: the attempt lease, and django-q2's task timeout,
# minus a margin to record results.
BATCH = 100
LEASE_MARGIN_SECONDS = 1.0
# Fairness: a batch starts another attempt only within this slice of its start, so a receiver
# that answers slowly gets one attempt per claim and then waits its turn, while a quick one's
# batch goes on over its connection. A worker is thus held by one endpoint for at most the slice
# plus one attempt's timeout before it claims again, least worker time first (claim_batch).
BATCH_SLICE_SECONDS = 1.0
MIN_CHARGE_SECONDS = 0.001  # a batch always costs something, so equal endpoints take turns
# An attempt this long holds its worker for longer than a quick endpoint's delivery should wait:
# its endpoint is slow until a batch of it goes by without one (a quick receiver answers in
# milliseconds; a timeout always counts as slow).
SLOW_ATTEMPT_SECONDS = 2.0
# PostgreSQL: claims of slow endpoints take this transaction-level advisory lock, so two of them
# cannot both see a free slow slot (the ORM has no lock that is not on a row).
SLOW_CLAIMS_LOCK = 0x5105_C1A1
# Endpoints with due work a claim reads, in order: more than the batches a deployment has in
# flight, so one below its cap is always among them.
CANDIDATES = 200
# What an attempt reads of a delivery (request_headers, results.record, a door's render): a batch
# loads no more.
ATTEMPT_FIELDS = ("id", "endpoint_id", "event_id", "body", "attempt_count", "kind")
_STOP_BATCH_ERRORS = {"network_error", "timeout", "blocked_destination"}


def _due(now):
    return Delivery.objects.filter(status__in=ACTIVE_STATUSES, next_attempt_at__lte=now).filter(
        Q(lease_until__isnull=True) | Q(lease_until__lte=now)
    )


def _claimable(now):
    """Due, of an endpoint whose delivery is not suspended (apps/webhooks/owners.py `Suspend`):
    held deliveries wait, and the sweeper does not wake for them. (A claim picks its endpoint
    from these and then locks only delivery rows: `_due` for one endpoint.)"""
    return _due(now).filter(endpoint__suspended_at__isnull=True)


def any_due() -> bool:
    return _claimable(timezone.now()).exists()


def due_count(*, limit: int) -> int:
    """Deliveries due now, counted up to `limit` (the metrics' cheap gauge)."""
    return _claimable(timezone.now())[:limit].count()


def _leased(now):
    return Delivery.objects.filter(status__in=ACTIVE_STATUSES, lease_until__gt=now).exclude(lease_token="")


def _batches_in_flight(endpoint_id: str, now) -> int:
    """Attempt batches of the endpoint holding a live lease, one lease token each. A batch whose
    worker died stops counting when its lease expires."""
    return _leased(now).filter(endpoint_id=endpoint_id).values("lease_token").distinct().count()


def _slow_batches_in_flight(now) -> int:
    return _leased(now).filter(endpoint__slow=True).values("lease_token").distinct().count()


def _candidates(now, current: float) -> list[tuple[str, float, int, bool]]:
    """(endpoint id, start, batches in flight, slow) of the endpoints with due work, in claim order:
    the earliest finish first, where a batch starts at the endpoint's clock (or the rotation's
    `current` time when its clock is behind it) and is expected to cost what its last one did
    (fair_clock - fair_start): a quick endpoint goes ahead of slow ones whose clocks are level
    with its own. An endpoint with no finished batch yet is expected to cost a whole batch slice,
    so a newly busy one waits behind at most that much of the others' worker time instead of
    going ahead of every one of them: otherwise several new slow receivers each take a worker
    once, one after another, while a quick endpoint's deliveries wait. On a tie, the endpoint
    whose delivery has waited longest."""
    due = _due(now)
    in_flight = (
        _leased(now).filter(endpoint_id=OuterRef("pk")).order_by().values("endpoint_id")
        .annotate(batches=Count("lease_token", distinct=True)).values("batches")
    )
    oldest = due.filter(endpoint_id=OuterRef("pk")).order_by("next_attempt_at").values("next_attempt_at")[:1]
    # Per endpoint, its oldest due delivery: one probe of the partial index delivery_endpoint_due
    # (empty for an idle endpoint), not a pass over a backlog of thousands.
    endpoints = (
        WebhookEndpoint.objects.filter(suspended_at__isnull=True)
        .annotate(oldest_due=Subquery(oldest)).filter(oldest_due__isnull=False)
        .annotate(batches=Coalesce(Subquery(in_flight), 0),
                  start=Greatest("fair_clock", Value(current, output_field=FloatField())),
                  finish=F("start") + Case(When(fair_clock__gt=F("fair_start"), then=F("fair_clock") - F("fair_start")),
                                           default=Value(BATCH_SLICE_SECONDS, output_field=FloatField())))
        .order_by("finish", "oldest_due", "pk")
    )
    return list(endpoints.values_list("pk", "start", "batches", "slow")[:CANDIDATES])


def claim_batch(*, limit: int = BATCH) -> tuple[str, list[str]]:
    """Lease up to `limit` due deliveries of one endpoint, oldest first: of the endpoints with due
    work and fewer than CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY batches in flight, the one whose
    next batch would finish first on the rotation's clock of worker time (`_candidates`,
    WebhookEndpoint.fair_clock), skipping slow endpoints while CONNECT_WEBHOOK_SLOW_BATCHES of
    theirs are in flight. Returns (attempt token, ids), or ("", []) when nothing may be claimed.

    The cap holds across workers. PostgreSQL locks the endpoint's row (`FOR NO KEY UPDATE SKIP
    LOCKED`: a claim for another endpoint passes by, and inserting a delivery, which takes a key
    share lock, is not blocked), then counts its batches in flight again in a fresh statement,
    which sees every claim committed before the lock was granted; a slow endpoint's claim takes
    SLOW_CLAIMS_LOCK first and counts the slow batches the same way. SQLite's IMMEDIATE
    transaction makes the whole claim one writer's step. A claimed endpoint's clock and start
    become its start: an endpoint back from idle starts at the rotation's current time (the
    highest start of any claim), so time spent idle is not saved up as credit against the busy
    ones."""
    now = timezone.now()
    cap = settings.CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY
    skip_locked = connection.features.has_select_for_update_skip_locked
    slow_in_flight = None
    with transaction.atomic():
        current = WebhookEndpoint.objects.aggregate(current=Max("fair_start"))["current"] or 0.0
        for endpoint_id, start, batches, slow in _candidates(now, current):
            if batches >= cap:
                continue
            if slow:
                if slow_in_flight is None:
                    if connection.vendor == "postgresql":
                        with connection.cursor() as cursor:
                            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SLOW_CLAIMS_LOCK])
                    slow_in_flight = _slow_batches_in_flight(now)
                if slow_in_flight >= settings.CONNECT_WEBHOOK_SLOW_BATCHES:
                    continue
            if skip_locked:
                row = WebhookEndpoint.objects.filter(pk=endpoint_id).select_for_update(no_key=True, skip_locked=True)
                if not list(row.values_list("pk", flat=True)) or _batches_in_flight(endpoint_id, now) >= cap:
                    continue
            batch = _due(now).filter(endpoint_id=endpoint_id).order_by("next_attempt_at")
            if skip_locked:
                batch = batch.select_for_update(skip_locked=True)
            ids = list(batch.values_list("id", flat=True)[:limit])
            if not ids:
                continue
            token = attempt_token()
            Delivery.objects.filter(id__in=ids).update(
                lease_token=token, lease_until=now + timedelta(seconds=settings.CONNECT_WEBHOOK_LEASE_SECONDS)
            )
            WebhookEndpoint.objects.filter(pk=endpoint_id).update(
                fair_clock=Greatest("fair_clock", Value(start, output_field=FloatField())), fair_start=start
            )
            return token, ids
    return "", []


def _charge(endpoint_id: str, seconds: float, *, slow: bool | None = None) -> None:
    """Move the endpoint back in the rotation by the worker time its batch used, and mark it
    slow or quick by the batch's attempts (None: it made none, the mark stands)."""
    changes = {} if slow is None else {"slow": slow}
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        fair_clock=F("fair_clock") + max(seconds, MIN_CHARGE_SECONDS), **changes
    )


def installation_authorized(endpoint: WebhookEndpoint) -> bool:
    """The credential that created the endpoint still holds — not revoked or expired, its
    member active, its workspace available — and still grants `svc:sessions:read` (docs/api/webhooks.md,
    §1, cancellation): the doorkeeper's batch check, for one installation."""
    return endpoint.id not in unauthorized_installations([endpoint])


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
    delivery: Delivery, body: bytes, material: keys.SigningMaterial | None = None, secrets: Sequence[bytes] = (),
    extra: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """The contract's headers, always; with `secrets` (an endpoint that opted in), the Standard
    Webhooks ones too, at the same timestamp (apps/webhooks/standard.py); then `extra`, what the
    endpoint's owner adds to each of its deliveries (apps/webhooks/owners.py)."""
    material = material or keys.signing_material()
    timestamp = int(time.time())
    signature = signing.sign(material.seed, kid=material.kid, timestamp=timestamp, body=body)
    headers = [
        ("Content-Type", "application/json"),
        ("User-Agent", USER_AGENT),
        ("Svc-Webhook-Id", delivery.endpoint_id),
        ("Svc-Event-Id", delivery.event_id),
        ("Svc-Delivery-Id", delivery.id),
        ("Svc-Signature", signature),
    ]
    if secrets:
        headers += standard.headers(secrets, msg_id=delivery.event_id, timestamp=timestamp, body=body)
    return headers + list(extra)


def drain_deadline() -> float:
    """When a drain must have finished its last request (time.monotonic()): inside both the
    attempt lease of any batch it claims and the task timeout django-q2 kills a worker at."""
    budget = min(settings.CONNECT_WEBHOOK_LEASE_SECONDS, settings.Q_CLUSTER.get("timeout") or float("inf"))
    return time.monotonic() + budget - LEASE_MARGIN_SECONDS


def drain(*, on_backlog: Callable[[], object] = lambda: None) -> list[tuple[str, str]]:
    """Claim and attempt batches until nothing is due or no request could end before the
    deadline. `on_backlog` is called when more may be due than this drain will reach: after a
    full claim (so another worker joins in while this one sends) and when time runs out.
    Returns (delivery id, what happened) in attempt order: its status after the attempt,
    `cancelled`, or `lease_lost` (cancelled while in flight; the result was not written)."""
    deadline = drain_deadline()
    done: list[tuple[str, str]] = []
    while time.monotonic() + settings.CONNECT_WEBHOOK_TIMEOUT_SECONDS <= deadline:
        token, ids = claim_batch(limit=BATCH)
        if not ids:
            return done
        if len(ids) == BATCH:
            on_backlog()
        done += attempt_batch(token, ids, deadline=deadline)
    on_backlog()
    return done


def attempt_batch(token: str, ids: list[str], *, deadline: float) -> list[tuple[str, str]]:
    """Attempt the deliveries `token` leases, in order, over one connection to their endpoint;
    record them in one transaction; release the ones not attempted (due again at once)."""
    by_id = Delivery.objects.only(*ATTEMPT_FIELDS).in_bulk(ids)
    deliveries = [by_id[i] for i in ids if i in by_id]
    if not deliveries:
        return []
    # One endpoint per batch (claim_batch): read it, and what its installation check needs, once.
    endpoint = WebhookEndpoint.objects.select_related("created_by__user", "workspace").get(
        pk=deliveries[0].endpoint_id)
    reason = _stop_reason(endpoint)
    if reason == StopReason.INSTALLATION_UNAUTHORIZED:
        # Found here first (an expiry, or a path no receiver saw): the endpoint reads inactive,
        # with the reason, from now on, and stops getting new deliveries.
        services.disable_unauthorized(endpoint_ids=[endpoint.id])
    if reason is not None:
        now = timezone.now()
        Delivery.objects.filter(id__in=ids, lease_token=token).update(
            status=DeliveryStatus.CANCELLED, stop_reason=reason, terminal_at=now, updated_at=now,
            lease_until=None, lease_token="",
        )
        _charge(endpoint.id, 0)
        return [(d.id, "cancelled") for d in deliveries]

    try:
        ssrf.check_url(endpoint.url, policy())
        blocked = ""
    except ssrf.UnsafeDestination as exc:
        blocked = outbound.describe(endpoint.url, "blocked_destination", exc=exc)
    material = keys.signing_material()
    secrets = services.standard_secrets(endpoint, now=timezone.now())
    # An owned endpoint's door: its headers, the answers that end a delivery, its bodies.
    door = door_of(endpoint)
    extra = door.headers(endpoint)
    body_of = door.render(endpoint, deliveries) if door.render is not None and not blocked else None
    taken: set[str] = set()  # this batch's deliveries the receiver took or refused for good
    attempted = []
    batch_started = time.monotonic()
    for delivery in deliveries:
        if attempted and attempted[-1][2].error in _STOP_BATCH_ERRORS:
            break
        if attempted and time.monotonic() - batch_started >= BATCH_SLICE_SECONDS:
            break
        if time.monotonic() + settings.CONNECT_WEBHOOK_TIMEOUT_SECONDS > deadline:
            break
        started_at = timezone.now()
        if blocked:
            outcome = outbound.Outcome(None, "blocked_destination", 0, blocked)
        else:
            body = body_of(delivery, taken) if body_of is not None else delivery.body.encode("utf-8")
            outcome = sender().post(endpoint.url, request_headers(delivery, body, material, secrets, extra), body)
            if not outcome.error or results.final(outcome, door.final_statuses):
                taken.add(delivery.id)
        attempted.append((delivery, started_at, outcome))
    statuses = results.record(token, attempted, final_statuses=door.final_statuses)
    results.observe(endpoint.id, attempted, statuses)
    if door.suspend is not None and any(o.error and not results.final(o, door.final_statuses)
                                        for _, _, o in attempted):
        results.suspend_if_failing(endpoint, door.suspend, door.final_statuses)
    unattempted = [d.id for d in deliveries[len(attempted):]]
    if unattempted:
        Delivery.objects.filter(id__in=unattempted, lease_token=token).update(lease_until=None, lease_token="")
    slow = any(outcome.error == "timeout" or outcome.duration_ms >= SLOW_ATTEMPT_SECONDS * 1000
               for _, _, outcome in attempted)
    _charge(endpoint.id, time.monotonic() - batch_started, slow=slow if attempted else None)
    return [(d.id, statuses.get(d.id, "lease_lost")) for d, _, _ in attempted]
