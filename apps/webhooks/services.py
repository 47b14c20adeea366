"""Writes to webhooks: endpoints, deliveries (created, replayed, cancelled, purged).

New deliveries are created `pending` and due; after commit a drain task is queued on django-q2
unless one is already waiting (apps/webhooks/drain_queue.py). If that is lost, the sweeper queues one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterable

from django.db import transaction
from django.utils import timezone

from apps.access.principal import Principal
from apps.core.errors import InvalidRequest, NotAllowed, invalid
from apps.core.ids import new_id
from apps.core.timestamps import iso_ms
from apps.events import selectors as event_selectors
from apps.events.models import EventType
from apps.events.representations import event_envelope
from apps.events.retention import retention as event_retention
from apps.webhooks import drain_queue, keys, standard
from apps.webhooks import filters as webhook_filters
from apps.webhooks.destinations import check_destination
from apps.webhooks.installation import unauthorized_installations
from apps.webhooks.models import (
    ACTIVE_STATUSES,
    Delivery,
    DeliveryKind,
    DeliveryStatus,
    DisabledReason,
    EndpointSigning,
    StopReason,
    WebhookEndpoint,
)
from apps.webhooks.representations import request_body
from apps.webhooks.selectors import RETENTION_DAYS, deliverable_endpoints

TEST_EVENT_TYPE = "webhook.test"
MAX_NAME_LENGTH = 200


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise invalid("name", f"must be a non-blank string of at most {MAX_NAME_LENGTH} characters")
    return name


def _check_filters(value: Any) -> list[dict[str, Any]]:
    try:
        return webhook_filters.validate_filters(value)
    except webhook_filters.InvalidFilters as error:
        raise InvalidRequest(detail=error.detail) from None


# How long a rotated-out Standard Webhooks secret keeps signing beside the new one, unless the
# rotation says otherwise (`graceSeconds`): a day, for receivers to deploy the new secret.
DEFAULT_SECRET_GRACE_SECONDS = 86400
MAX_SECRET_GRACE_SECONDS = 7 * 86400


def _installation(principal: Principal) -> dict[str, Any]:
    """The caller's credential, as the installation of an endpoint it creates or re-enables."""
    credential = {"created_by": principal.issuer, "credential_kind": principal.kind,
                  "credential_id": str(principal.credential_id), "oauth_application_id": None}
    if principal.kind == "oauth":
        from apps.oauth.models import AccessToken

        credential["oauth_application_id"] = (
            AccessToken.objects.filter(pk=principal.credential_id).values_list("application_id", flat=True).first()
        )
    return credential


def _check_signing(value: Any) -> str:
    if value not in EndpointSigning.values:
        raise invalid("signing", "must be one of " + ", ".join(f'"{v}"' for v in EndpointSigning.values))
    return value


def _set_signing(endpoint: WebhookEndpoint, signing: str) -> None:
    """Turning Standard Webhooks on issues a secret (shown in this response only); turning it
    off erases the secrets, so turning it on again issues a new one."""
    if signing == endpoint.signing:
        return
    endpoint.signing = signing
    endpoint.sealed_previous_secret, endpoint.previous_secret_until = None, None
    if signing == EndpointSigning.STANDARD_WEBHOOKS:
        _new_secret(endpoint)
    else:
        endpoint.sealed_secret = None


def _new_secret(endpoint: WebhookEndpoint) -> None:
    secret = standard.new_secret()
    endpoint.sealed_secret = keys.seal(secret)
    # Read by the representation (`signingSecret`) of this response only; never stored plain.
    endpoint.shown_secret = standard.serialize(secret)


@transaction.atomic
def create_endpoint(*, principal: Principal, name: Any, url: Any, filters: Any,
                    signing: Any = EndpointSigning.SVC) -> WebhookEndpoint:
    now = timezone.now()
    endpoint = WebhookEndpoint(
        workspace=principal.workspace,
        name=_check_name(name),
        filters=_check_filters(filters),
        url=check_destination(url),
        active=True,
        created_at=now,
        updated_at=now,
        **_installation(principal),
    )
    _set_signing(endpoint, _check_signing(signing))
    endpoint.save(force_insert=True)
    return endpoint


@transaction.atomic
def update_endpoint(*, endpoint: WebhookEndpoint, changes: dict[str, Any],
                    principal: Principal | None = None) -> WebhookEndpoint:
    """PATCH: any of name, url, filters, active, signing. Deactivating cancels the endpoint's
    pending and retrying deliveries (`endpoint_disabled`). Activating an inactive endpoint —
    whatever disabled it — makes `principal`, the caller, its installation: the credential
    that asks for deliveries answers for them from now on (docs/decisions/webhook-installation.md)."""
    shown_secret = None
    endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    if "name" in changes:
        endpoint.name = _check_name(changes["name"])
    if "url" in changes:
        endpoint.url = check_destination(changes["url"])
    if "filters" in changes:
        endpoint.filters = _check_filters(changes["filters"])
    if "signing" in changes:
        _set_signing(endpoint, _check_signing(changes["signing"]))
        shown_secret = getattr(endpoint, "shown_secret", None)
    if "active" in changes:
        if not isinstance(changes["active"], bool):
            raise invalid("active", "must be true or false")
        if endpoint.active and not changes["active"]:
            cancel_active_deliveries(endpoint_ids=[endpoint.id], reason=StopReason.ENDPOINT_DISABLED)
            endpoint.disabled_reason = DisabledReason.ENDPOINT_DISABLED
        elif not endpoint.active and changes["active"]:
            if principal is None:
                raise ValueError("activating an endpoint needs the caller, its new installation")
            for field, value in _installation(principal).items():
                setattr(endpoint, field, value)
            endpoint.disabled_reason = ""
        endpoint.active = changes["active"]
    endpoint.updated_at = timezone.now()
    endpoint.save()
    endpoint.shown_secret = shown_secret
    return endpoint


@transaction.atomic
def rotate_secret(*, endpoint: WebhookEndpoint, grace_seconds: Any = DEFAULT_SECRET_GRACE_SECONDS) -> WebhookEndpoint:
    """A new Standard Webhooks secret (shown in this response only). The current one keeps
    signing beside it for `grace_seconds`; a secret that was still in its grace period stops at
    once (two signatures at most). `409 not_allowed` unless the endpoint signs that way."""
    if isinstance(grace_seconds, bool) or not isinstance(grace_seconds, int) or not (
            0 <= grace_seconds <= MAX_SECRET_GRACE_SECONDS):
        raise invalid("graceSeconds", f"must be an integer from 0 to {MAX_SECRET_GRACE_SECONDS}")
    endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
    if endpoint.signing != EndpointSigning.STANDARD_WEBHOOKS or endpoint.sealed_secret is None:
        raise NotAllowed(detail='the endpoint does not sign with Standard Webhooks; PATCH it with '
                         '{"signing": "standard-webhooks"} to get a secret')
    now = timezone.now()
    if grace_seconds:
        endpoint.sealed_previous_secret = endpoint.sealed_secret
        endpoint.previous_secret_until = now + timedelta(seconds=grace_seconds)
    else:
        endpoint.sealed_previous_secret, endpoint.previous_secret_until = None, None
    _new_secret(endpoint)
    endpoint.updated_at = now
    endpoint.save()
    return endpoint


def standard_secrets(endpoint: WebhookEndpoint, *, now: datetime) -> list[bytes]:
    """The secrets that sign the endpoint's Standard Webhooks signatures now, current first."""
    if endpoint.signing != EndpointSigning.STANDARD_WEBHOOKS or endpoint.sealed_secret is None:
        return []
    secrets = [keys.unseal(endpoint.sealed_secret)]
    if endpoint.sealed_previous_secret is not None and endpoint.previous_secret_until and \
            endpoint.previous_secret_until > now:
        secrets.append(keys.unseal(endpoint.sealed_previous_secret))
    return secrets


def disable_unauthorized(*, endpoint_ids: Iterable[str]) -> int:
    """Endpoints whose installation no longer holds become inactive with that reason, and their
    pending and retrying deliveries are cancelled (`installation_unauthorized`). Returns how
    many endpoints this turned off."""
    ids = list(endpoint_ids)
    if not ids:
        return 0
    now = timezone.now()
    with transaction.atomic():
        turned_off = WebhookEndpoint.objects.filter(id__in=ids, active=True).update(
            active=False, disabled_reason=DisabledReason.INSTALLATION_UNAUTHORIZED, updated_at=now)
        cancel_active_deliveries(endpoint_ids=ids, reason=StopReason.INSTALLATION_UNAUTHORIZED)
    return turned_off


def reconcile_installations(endpoints: list[WebhookEndpoint]) -> list[WebhookEndpoint]:
    """Before endpoints are shown: those still marked active whose installation no longer holds
    (an expired key or token, which no save announced) are turned off now, with the reason, so
    what a reader sees is what the drains will do. One batch check for all of them."""
    active = [e for e in endpoints if e.active and e.deleted_at is None]
    unauthorized = unauthorized_installations(active) if active else set()
    if unauthorized:
        disable_unauthorized(endpoint_ids=unauthorized)
        for endpoint in endpoints:
            if endpoint.id in unauthorized:
                endpoint.active, endpoint.disabled_reason = False, DisabledReason.INSTALLATION_UNAUTHORIZED
    return endpoints


@transaction.atomic
def delete_endpoint(*, endpoint: WebhookEndpoint) -> None:
    """The endpoint answers 404 from now on; its active deliveries are cancelled
    (`endpoint_deleted`) and its history stays until the purge."""
    now = timezone.now()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(deleted_at=now, active=False, updated_at=now)
    cancel_active_deliveries(endpoint_ids=[endpoint.id], reason=StopReason.ENDPOINT_DELETED)


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


def _new_delivery(*, endpoint: WebhookEndpoint, event_id: str, event_type: str, kind: str, body: str, now,
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


def _drain_after_commit() -> None:
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
        _new_delivery(endpoint=e, event_id=event_id, event_type=event_type, kind=DeliveryKind.EVENT, body=body, now=now)
        for e in matching
    ]
    Delivery.objects.bulk_create(deliveries)
    _drain_after_commit()
    return deliveries


def event_facts(*, event_type: str, session_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """What a filter entry is matched against (webhook_filters.filters_match)."""
    return {"type": event_type, "sessionId": session_id, "status": data.get("status")}


def queue_delivery(*, endpoint: WebhookEndpoint, event_id: str, event_type: str, body: str) -> Delivery:
    """One event delivery of a body another app shaped for its own wire (the MCP events
    extension's), to an endpoint that app owns, written in the caller's transaction and then
    drained, signed, retried and guarded like every delivery. The caller picks the endpoint from
    `selectors.deliverable_endpoints(owner=…)`, so an expired one is never given one."""
    delivery = _new_delivery(endpoint=endpoint, event_id=event_id, event_type=event_type,
                             kind=DeliveryKind.EVENT, body=body, now=timezone.now())
    delivery.save(force_insert=True)
    _drain_after_commit()
    return delivery


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
    delivery = _new_delivery(
        endpoint=endpoint, event_id=event_id, event_type=TEST_EVENT_TYPE, kind=DeliveryKind.TEST, body=body, now=now
    )
    delivery.save(force_insert=True)
    _drain_after_commit()
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
    replay = _new_delivery(
        endpoint=endpoint,
        event_id=delivery.event_id,
        event_type=delivery.event_type,
        kind=DeliveryKind.EVENT,
        body=delivery.body,
        now=timezone.now(),
        replay_of=delivery,
    )
    replay.save(force_insert=True)
    _drain_after_commit()
    return replay


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
            queued.append(_new_delivery(
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
        _drain_after_commit()


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
