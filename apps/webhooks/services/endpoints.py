"""Writes to endpoints: created, changed, their Standard Webhooks secrets rotated, turned off when
their installation stops holding, deleted. Turning one off or deleting it cancels its pending and
retrying deliveries (apps/webhooks/services/deliveries.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterable

from django.db import transaction
from django.utils import timezone

from apps.access.principal import Principal
from apps.core.errors import InvalidRequest, NotAllowed, invalid
from apps.webhooks import keys, standard
from apps.webhooks import filters as webhook_filters
from apps.webhooks.destinations import check_destination
from apps.webhooks.installation import unauthorized_installations
from apps.webhooks.models import DisabledReason, EndpointSigning, StopReason, WebhookEndpoint
from apps.webhooks.services.deliveries import cancel_active_deliveries

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
