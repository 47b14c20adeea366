"""Signal receivers: deliveries for recorded events, prompt cancellation when an
installation loses its right (apps/webhooks/installation.py). The receivers cancel at once on
the saves that take the right away; the attempt-time check (delivery.installation_authorized)
covers every other path."""

from __future__ import annotations

from django.db.models.signals import post_save
from django.utils import timezone

from apps.access.credentials import key_holds
from apps.events.signals import event_recorded
from apps.tenancy.models import ApiKey, Membership
from apps.webhooks import services
from apps.webhooks.installation import INSTALLATION_SCOPE
from apps.webhooks.models import WebhookEndpoint


def on_event_recorded(sender, event, **kwargs) -> None:  # noqa: ARG001
    """Runs inside record_event's transaction: the deliveries commit with the event."""
    services.create_event_deliveries(
        workspace_id=event.workspace_id,
        event_id=event.id,
        event_type=event.type,
        session_id=event.session_id,
        occurred_at=event.occurred_at,
        data=event.data,
    )


def _cancel_for(endpoints) -> None:
    """The endpoints read inactive (`installation_unauthorized`) and their pending deliveries
    are cancelled; a caller with a valid credential re-enables them (PATCH `active: true`)."""
    ids = list(endpoints.values_list("id", flat=True))
    if ids:
        services.disable_unauthorized(endpoint_ids=ids)


def on_api_key_saved(sender, instance, **kwargs) -> None:  # noqa: ARG001
    """A key that no longer holds (revoked, expired) or no longer grants the scope stops its
    endpoints' deliveries now."""
    if not key_holds(instance.revoked_at, instance.expires_at, timezone.now()) or INSTALLATION_SCOPE not in (
        instance.scopes or []
    ):
        _cancel_for(WebhookEndpoint.objects.filter(credential_kind="api_key", credential_id=instance.id))


def on_membership_saved(sender, instance, **kwargs) -> None:  # noqa: ARG001
    if not instance.is_active:
        _cancel_for(WebhookEndpoint.objects.filter(created_by=instance))


def connect() -> None:
    event_recorded.connect(on_event_recorded, dispatch_uid="webhooks.event_recorded")
    post_save.connect(on_api_key_saved, sender=ApiKey, dispatch_uid="webhooks.api_key_saved")
    post_save.connect(on_membership_saved, sender=Membership, dispatch_uid="webhooks.membership_saved")
