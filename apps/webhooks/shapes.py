"""The webhook wire shapes (docs/api/webhooks.md), each declared once: the
endpoint, the delivery and its attempts as the REST API shows them, and the request body
Connect sends to receivers. The representation functions (apps/webhooks/representations.py),
the /openapi.json components and the OpenAPI `webhooks` section are derived from these."""

from __future__ import annotations

from apps.core.shapes import BOOLEAN, INTEGER, JSON, STRING, TIMESTAMP, Field, Shape, Spread, page_of
from apps.core.timestamps import iso_ms
from apps.events.models import EventType
from apps.recordings.models import SessionStatus
from apps.recordings.shapes import SESSION_CREATED_DATA, SESSION_STATUS_CHANGED_DATA
from apps.webhooks.filters import SUBSCRIBABLE_TYPES
from apps.webhooks.models import (
    AttemptError,
    Delivery,
    DeliveryKind,
    DeliveryStatus,
    DisabledReason,
    EndpointSigning,
    REST_STOP_REASONS,
    WebhookEndpoint,
)

TEST_EVENT_TYPE = "webhook.test"
EVENT_TYPES = (*SUBSCRIBABLE_TYPES, TEST_EVENT_TYPE)

FILTER_ENTRY = Shape(
    "FilterEntry",
    (
        Field("type", STRING, choices=SUBSCRIBABLE_TYPES),
        Field("sessionId", STRING, required=False),
        Field("status", STRING, choices=SessionStatus, many=True, required=False,
              description="Only on `session.status_changed` entries; unique values."),
    ),
    component=True,
)

def _shown_secret(endpoint: WebhookEndpoint) -> str | None:
    # Set by the service on the instance it just issued a secret for; never read from storage.
    return getattr(endpoint, "shown_secret", None)


def _previous_secret_until(endpoint: WebhookEndpoint) -> str | None:
    until = endpoint.previous_secret_until
    return iso_ms(until) if until is not None and endpoint.sealed_previous_secret is not None else None


ENDPOINT = Shape(
    "EndpointOut",
    (
        Field("id", STRING, description="`wh_` + id"),
        Field("name", STRING),
        Field("url", STRING),
        # Stored normalised by apps/webhooks/filters.validate_filters, as the wire shows it.
        Field("filters", FILTER_ENTRY, many=True, stored=True),
        Field("active", BOOLEAN, description="false once a caller disabled it or its installation's credential "
              "stopped holding (`disabledReason`); nothing is delivered to an inactive endpoint"),
        Field("disabledReason", STRING, nullable=True, choices=DisabledReason, empty_is_null=True,
              description="null while active; `endpoint_disabled`: a caller set `active` false; "
              "`installation_unauthorized`: the credential that created (or last re-enabled) it was revoked, "
              "expired, lost `svc:sessions:read`, or its member was deactivated. PATCH `active: true` with a "
              "valid credential re-enables it, and that credential becomes its installation"),
        Field("signing", STRING, choices=EndpointSigning,
              description="`svc`: the Svc-* headers and Ed25519 signature only; `standard-webhooks`: also "
              "`webhook-id`, `webhook-timestamp` and `webhook-signature` (HMAC-SHA256, `whsec_` secret)"),
        Field("signingSecret", STRING, nullable=True, getter=_shown_secret,
              description="the `whsec_` secret, only in the response that issued it (create or an update that "
              "turned `standard-webhooks` on, and `rotate-secret`); null everywhere else: it cannot be shown again"),
        Field("previousSecretExpiresAt", TIMESTAMP, nullable=True, getter=_previous_secret_until,
              description="after a rotation, until when the previous secret still signs beside the new one; "
              "null when only one secret signs"),
        Field("createdAt", TIMESTAMP),
        Field("updatedAt", TIMESTAMP),
    ),
    component=True,
)


def _next_attempt_at(delivery: Delivery) -> str | None:
    # Null once the delivery is terminal: it will not be attempted again.
    return iso_ms(delivery.next_attempt_at) if not delivery.is_terminal else None


DELIVERY = Shape(
    "DeliveryOut",
    (
        Field("id", STRING, description="`dlv_` + id"),
        Field("eventId", STRING, description="`evt_` + id; constant across retries and replays"),
        Field("eventType", STRING, choices=EVENT_TYPES),
        Field("endpointId", STRING),
        # `delivery.endpoint` should be loaded with it (select_related) in listings.
        Field("endpointName", STRING, source="endpoint.name"),
        Field("endpointUrl", STRING, source="endpoint.url"),
        Field("kind", STRING, choices=DeliveryKind),
        Field("status", STRING, choices=DeliveryStatus),
        Field("attemptCount", INTEGER),
        Field("lastHttpStatus", INTEGER, nullable=True),
        Field("nextAttemptAt", TIMESTAMP, nullable=True, getter=_next_attempt_at),
        Field("terminalAt", TIMESTAMP, nullable=True),
        Field("stopReason", STRING, nullable=True, choices=REST_STOP_REASONS, empty_is_null=True),
        Field("createdAt", TIMESTAMP),
        Field("updatedAt", TIMESTAMP),
    ),
    component=True,
)

ATTEMPT = Shape(
    "AttemptOut",
    (
        Field("attemptNumber", INTEGER, source="number"),
        Field("startedAt", TIMESTAMP),
        Field("completedAt", TIMESTAMP),
        Field("httpStatus", INTEGER, nullable=True),
        Field("durationMs", INTEGER),
        Field("error", STRING, nullable=True, choices=AttemptError, empty_is_null=True),
        Field("errorDetail", STRING, nullable=True, empty_is_null=True,
              description="what happened, naming the host and port: `connection refused by example.com:443: nothing "
              "listens there`, a TLS failure, `no complete response from … within 10 s`, the HTTP status answered"),
    ),
    component=True,
)

DELIVERY_WITH_ATTEMPTS = Shape(
    "DeliveryWithAttemptsOut",
    (Spread(DELIVERY, "delivery"), Field("attempts", ATTEMPT, many=True)),
    params=("delivery", "attempts"),
    component=True,
)

# `POST /api/v1/webhooks/{id}/recover`: how many deliveries one call queued.
RECOVERY = Shape(
    "WebhookRecovery",
    (
        Field("queued", INTEGER, description="new deliveries queued by this call"),
        Field("more", BOOLEAN, description="true when the per-call cap was reached: call again with the same window "
              "for the rest (what this call queued is pending now, so it is not queued twice)"),
    ),
    params=("queued", "more"),
    component=True,
)
ENDPOINT_PAGE = page_of(ENDPOINT, "WebhookPage", cursor_description="pass back as `cursor` for the next page; "
                        "null on the last")
DELIVERY_PAGE = page_of(DELIVERY, "WebhookDeliveryPage", cursor_description="pass back as `cursor` for the next "
                        "page; null on the last")

# --- What receivers get ----------------------------------------------------------------------

WEBHOOK_TEST_DATA = Shape(
    "WebhookTestData",
    (Field("webhookId", STRING, description="`wh_` + id of the endpoint"), Field("message", STRING)),
    closed=True,
)

# The body sent to receivers (docs/api/webhooks.md): the event id is inside the signed bytes, so
# receivers deduplicate on a signed value. Fixed when the delivery is created.
WEBHOOK_BODY = Shape(
    "WebhookBody",
    (
        Field("id", STRING, source="event_id", description="`evt_` + id: the same across retries and replays"),
        Field("type", STRING, source="event_type", choices=EVENT_TYPES),
        Field("occurredAt", TIMESTAMP, source="occurred_at", stored=True),
        # The event's data as recorded (apps/recordings/shapes.py), or the test delivery's.
        Field("data", JSON, stored=True),
    ),
    params=("event_id", "event_type", "occurred_at", "data"),
    closed=True,
)

DATA_SHAPES: dict[str, Shape] = {
    EventType.SESSION_CREATED: SESSION_CREATED_DATA,
    EventType.SESSION_STATUS_CHANGED: SESSION_STATUS_CHANGED_DATA,
    TEST_EVENT_TYPE: WEBHOOK_TEST_DATA,
}


def typed_body(event_type: str) -> Shape:
    """The body of one event type, for documentation."""
    return WEBHOOK_BODY.specialise(
        f"WebhookBody[{event_type}]",
        component=False,
        type=Field("type", STRING, source="event_type", const=event_type),
        data=Field("data", DATA_SHAPES[event_type]),
    )

