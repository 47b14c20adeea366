"""Signal receivers: deliveries for recorded events, prompt cancellation when an
installation loses its right."""

from __future__ import annotations

from django.db.models.signals import post_save

from apps.webhooks.models import StopReason, WebhookEndpoint


def on_event_recorded(sender, event, **kwargs) -> None:  # noqa: ARG001
    """Runs inside record_event's transaction: the deliveries commit with the event."""
    from apps.webhooks import services

    services.create_event_deliveries(
        workspace_id=event.workspace_id,
        event_id=event.id,
        event_type=event.type,
        session_id=event.session_id,
        occurred_at=event.occurred_at,
        data=event.data,
    )


def _cancel_for(endpoints) -> None:
    from apps.webhooks import services

    ids = list(endpoints.values_list("id", flat=True))
    if ids:
        services.cancel_active_deliveries(endpoint_ids=ids, reason=StopReason.INSTALLATION_UNAUTHORIZED)


def on_api_key_saved(sender, instance, **kwargs) -> None:  # noqa: ARG001
    """A revoked key, or one whose scopes lost svc:sessions:read, stops its endpoints' deliveries
    now; the attempt-time check (delivery.installation_authorized) covers every other path."""
    if instance.revoked_at is not None or "svc:sessions:read" not in (instance.scopes or []):
        _cancel_for(WebhookEndpoint.objects.filter(credential_kind="api_key", credential_id=instance.id))


def on_membership_saved(sender, instance, **kwargs) -> None:  # noqa: ARG001
    if not instance.is_active:
        _cancel_for(WebhookEndpoint.objects.filter(created_by=instance))


def connect() -> None:
    from apps.tenancy.models import ApiKey, Membership

    try:
        from apps.events.signals import event_recorded
    except ImportError:  # the outbox is not installed: no events, no event deliveries
        event_recorded = None
    if event_recorded is not None:
        event_recorded.connect(on_event_recorded, dispatch_uid="webhooks.event_recorded")
    post_save.connect(on_api_key_saved, sender=ApiKey, dispatch_uid="webhooks.api_key_saved")
    post_save.connect(on_membership_saved, sender=Membership, dispatch_uid="webhooks.membership_saved")
