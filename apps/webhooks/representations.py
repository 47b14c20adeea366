"""How webhook endpoints and deliveries look on the wire (DESIGN.md §1, contract §2.9)."""

from __future__ import annotations

import json
from typing import Any

from apps.core.timestamps import iso_ms
from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint


def endpoint_repr(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {
        "id": endpoint.id,
        "name": endpoint.name,
        "url": endpoint.url,
        "filters": endpoint.filters,
        "active": endpoint.active,
        "createdAt": iso_ms(endpoint.created_at),
        "updatedAt": iso_ms(endpoint.updated_at),
    }


def delivery_repr(delivery: Delivery) -> dict[str, Any]:
    """`delivery.endpoint` should be loaded with it (select_related) in listings."""
    return {
        "id": delivery.id,
        "eventId": delivery.event_id,
        "eventType": delivery.event_type,
        "endpointId": delivery.endpoint_id,
        "endpointName": delivery.endpoint.name,
        "endpointUrl": delivery.endpoint.url,
        "kind": delivery.kind,
        "status": delivery.status,
        "attemptCount": delivery.attempt_count,
        "lastHttpStatus": delivery.last_http_status,
        "nextAttemptAt": iso_ms(delivery.next_attempt_at) if not delivery.is_terminal else None,
        "terminalAt": iso_ms(delivery.terminal_at),
        "stopReason": delivery.stop_reason or None,
        "createdAt": iso_ms(delivery.created_at),
        "updatedAt": iso_ms(delivery.updated_at),
    }


def attempt_repr(attempt: DeliveryAttempt) -> dict[str, Any]:
    return {
        "attemptNumber": attempt.number,
        "startedAt": iso_ms(attempt.started_at),
        "completedAt": iso_ms(attempt.completed_at),
        "httpStatus": attempt.http_status,
        "durationMs": attempt.duration_ms,
        "error": attempt.error or None,
    }


def delivery_with_attempts_repr(delivery: Delivery, attempts: list[DeliveryAttempt]) -> dict[str, Any]:
    return {**delivery_repr(delivery), "attempts": [attempt_repr(a) for a in attempts]}


def request_body(*, event_id: str, event_type: str, occurred_at: str, data: dict[str, Any]) -> str:
    """The body sent to receivers (DESIGN.md §1): the event id is inside the signed bytes, so
    receivers deduplicate on a signed value. Fixed when the delivery is created."""
    return json.dumps(
        {"id": event_id, "type": event_type, "occurredAt": occurred_at, "data": data},
        separators=(",", ":"),
        ensure_ascii=False,
    )
