"""REST views for webhook endpoints and deliveries (docs/api/webhooks.md). Views check
scopes, validate the request's shape and call selectors/services; representations format."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.access.credentials import require_scope
from apps.core.errors import invalid
from apps.core.openapi import error_responses
from apps.core.params import DEFAULT_PAGE_SIZE, CursorField, LimitField, NoQuery, validate_query
from apps.core.text import NotText, loads_text
from apps.core.timestamps import parse_iso
from apps.recordings.models import SessionStatus
from apps.webhooks import selectors, services, shapes
from apps.webhooks.filters import SUBSCRIBABLE_TYPES
from apps.webhooks.models import DeliveryKind, DeliveryStatus, EndpointSigning
from apps.webhooks.representations import (
    delivery_repr,
    delivery_with_attempts_repr,
    endpoint_repr,
    recovery_repr,
)

WEBHOOKS_READ = "svc:webhooks:read"
WEBHOOKS_WRITE = "svc:webhooks:write"
SESSIONS_READ = "svc:sessions:read"  # session.* subscriptions need it too (docs/api/webhooks.md)


def json_body(request: Request, *, allowed: set[str], required: set[str] = frozenset()) -> dict[str, Any]:
    """The request's JSON object. A missing or other content type, malformed JSON, a string
    that is not Unicode text, a non-object, unknown or missing fields: `400 invalid_request`,
    whose `detail` names the part at fault (never a value the client sent)."""
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise invalid("Content-Type", "must be application/json")
    try:
        body = loads_text(request.body or b"")
    except NotText:
        raise invalid("body", "must be JSON text (UTF-8, no U+0000, no lone surrogate)") from None
    if not isinstance(body, dict):
        raise invalid("body", "must be a JSON object")
    if set(body) - allowed:
        raise invalid("body", "unknown field; the fields are " + ", ".join(sorted(allowed)))
    missing = sorted(required - set(body))
    if missing:
        raise invalid(missing[0], "required")
    return body


# --- Documented request bodies (response bodies are the components of apps/webhooks/shapes.py,
# the declarations the representations are generated from) ----------------------------------


class FilterEntry(serializers.Serializer):
    type = serializers.ChoiceField(choices=list(SUBSCRIBABLE_TYPES))
    sessionId = serializers.CharField(required=False, min_length=1)
    status = serializers.ListField(
        child=serializers.ChoiceField(choices=SessionStatus.values),
        required=False,
        help_text="Only on `session.status_changed` entries; unique values.",
    )


class EndpointIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    url = serializers.URLField(help_text="HTTPS; private, loopback, link-local and internal destinations are refused")
    filters = FilterEntry(many=True, help_text="1 to 20 entries; AND within an entry, OR across entries")
    signing = serializers.ChoiceField(
        choices=EndpointSigning.values, required=False, default=EndpointSigning.SVC,
        help_text="`standard-webhooks` adds the Standard Webhooks headers (webhook-id, webhook-timestamp, "
        "webhook-signature) to the Svc-* ones; the response's `signingSecret` (`whsec_…`) is shown this once",
    )


class EndpointPatchIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    url = serializers.URLField(required=False)
    filters = FilterEntry(many=True, required=False)
    active = serializers.BooleanField(
        required=False, help_text="true on an inactive endpoint re-enables it, and the caller's credential becomes "
        "its installation (needs svc:sessions:read too)")
    signing = serializers.ChoiceField(
        choices=EndpointSigning.values, required=False,
        help_text="turning `standard-webhooks` on issues a secret, shown in this response only; turning it off "
        "erases the secrets",
    )


# An inline schema, not a serializer: its one field needs no component of its own.
ROTATE_SECRET_BODY = {"application/json": {
    "type": "object",
    "additionalProperties": False,
    "properties": {"graceSeconds": {
        "type": "integer", "minimum": 0, "maximum": services.MAX_SECRET_GRACE_SECONDS,
        "default": services.DEFAULT_SECRET_GRACE_SECONDS,
        "description": "how long the previous secret keeps signing beside the new one (default one day; 0 stops "
        "it now, e.g. after a leak)",
    }},
}}


# --- Endpoints --------------------------------------------------------------------------------


class EndpointListApi(APIView):
    # Each method's scopes, checked in the method (`require_scope`) and declared here for the door
    # (named when it refuses an ingest key) and /openapi.json (apps/access/rest.py `view_scopes`).
    required_scopes = {"get": (WEBHOOKS_READ,), "post": (WEBHOOKS_WRITE, SESSIONS_READ)}

    class QueryIn(serializers.Serializer):
        cursor = CursorField()
        limit = LimitField()

    @extend_schema(
        operation_id="listWebhooks",
        summary="List webhook endpoints, newest first",
        parameters=[QueryIn],
        responses={200: shapes.ENDPOINT_PAGE.ref(), **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        require_scope(request.auth, WEBHOOKS_READ)
        query = validate_query(self.QueryIn, request)
        endpoints, next_cursor = selectors.endpoints_page(
            workspace=request.auth.workspace, limit=query.get("limit", DEFAULT_PAGE_SIZE), cursor=query.get("cursor")
        )
        services.reconcile_installations(endpoints)
        return Response({"items": [endpoint_repr(e) for e in endpoints], "nextCursor": next_cursor})

    @extend_schema(
        operation_id="createWebhook",
        summary="Create an active webhook endpoint (needs svc:webhooks:write and svc:sessions:read)",
        request=EndpointIn,
        responses={201: shapes.ENDPOINT.ref(), **error_responses(400)},
    )
    def post(self, request: Request) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE, SESSIONS_READ)
        body = json_body(request, allowed={"name", "url", "filters", "signing"}, required={"name", "url", "filters"})
        endpoint = services.create_endpoint(
            principal=request.auth, name=body["name"], url=body["url"], filters=body["filters"],
            signing=body.get("signing", EndpointSigning.SVC),
        )
        return Response(endpoint_repr(endpoint), status=201)


class EndpointDetailApi(APIView):
    required_scopes = {"get": (WEBHOOKS_READ,), "patch": (WEBHOOKS_WRITE,),
                       "delete": (WEBHOOKS_WRITE,)}  # fmt: skip

    @extend_schema(operation_id="getWebhook", summary="Read a webhook endpoint",
                   responses={200: shapes.ENDPOINT.ref(), **error_responses(400)})
    def get(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_READ)
        validate_query(NoQuery, request)
        endpoint = selectors.get_endpoint(workspace=request.auth.workspace, endpoint_id=id)
        return Response(endpoint_repr(services.reconcile_installations([endpoint])[0]))

    @extend_schema(
        operation_id="updateWebhook",
        summary="Update any of name, url, filters, active, signing; deactivating cancels pending deliveries, "
        "re-enabling makes the caller's credential the endpoint's installation",
        request=EndpointPatchIn,
        responses={200: shapes.ENDPOINT.ref(), **error_responses(400)},
    )
    def patch(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE)
        endpoint = selectors.get_endpoint(workspace=request.auth.workspace, endpoint_id=id)
        body = json_body(request, allowed={"name", "url", "filters", "active", "signing"})
        services.reconcile_installations([endpoint])
        if "filters" in body or (body.get("active") is True and not endpoint.active):
            # New filters, or a new installation: what deliveries need, the caller must hold.
            require_scope(request.auth, SESSIONS_READ)
        endpoint = services.update_endpoint(endpoint=endpoint, changes=body, principal=request.auth)
        return Response(endpoint_repr(endpoint))

    @extend_schema(
        operation_id="deleteWebhook",
        summary="Delete a webhook endpoint; its pending deliveries are cancelled",
        responses={204: OpenApiResponse(description="deleted"), **error_responses()},
    )
    def delete(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE)
        endpoint = selectors.get_endpoint(workspace=request.auth.workspace, endpoint_id=id)
        services.delete_endpoint(endpoint=endpoint)
        return Response(status=204)


class EndpointTestApi(APIView):
    required_scopes = {"post": (WEBHOOKS_WRITE,)}

    @extend_schema(
        operation_id="testWebhook",
        summary="Send one signed test delivery (kind `test`, event type `webhook.test`, one attempt)",
        request=None,
        responses={202: shapes.DELIVERY.ref(), **error_responses()},
    )
    def post(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE)
        endpoint = selectors.get_endpoint(workspace=request.auth.workspace, endpoint_id=id)
        delivery = services.send_test_delivery(endpoint=endpoint)
        return Response(delivery_repr(delivery), status=202)


class EndpointRotateSecretApi(APIView):
    required_scopes = {"post": (WEBHOOKS_WRITE,)}

    @extend_schema(
        operation_id="rotateWebhookSecret",
        summary="Issue a new Standard Webhooks secret; the previous one keeps signing for `graceSeconds`",
        description=(
            "Only for an endpoint with `signing: standard-webhooks` (else `409 not_allowed`). The response's "
            "`signingSecret` is the new `whsec_` secret, shown this once. Until `previousSecretExpiresAt`, every "
            "delivery's `webhook-signature` carries two space-separated `v1,` signatures, new secret first, so a "
            "receiver verifies with either while it deploys the new one. Rotating again during a grace period ends "
            "the older secret at once."
        ),
        request=ROTATE_SECRET_BODY,
        responses={200: shapes.ENDPOINT.ref(), **error_responses(400, 409)},
    )
    def post(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE)
        endpoint = selectors.get_endpoint(workspace=request.auth.workspace, endpoint_id=id)
        body = json_body(request, allowed={"graceSeconds"}) if request.body else {}
        endpoint = services.rotate_secret(
            endpoint=endpoint, grace_seconds=body.get("graceSeconds", services.DEFAULT_SECRET_GRACE_SECONDS))
        return Response(endpoint_repr(endpoint))


class RecoverIn(serializers.Serializer):
    since = serializers.DateTimeField(help_text="ISO 8601 with a time zone; within the event log's retention "
                                      "(`CONNECT_EVENT_RETENTION_DAYS`, default 30 days)")
    until = serializers.DateTimeField(required=False, help_text="default now; after `since`")


def _timestamp(body: dict[str, Any], name: str) -> datetime | None:
    value = body.get(name)
    if value is None and name not in body:
        return None
    try:
        parsed = parse_iso(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise invalid(name, "must be an ISO 8601 timestamp with a time zone")
    return parsed


class EndpointRecoverApi(APIView):
    required_scopes = {"post": (WEBHOOKS_WRITE,)}

    @extend_schema(
        operation_id="recoverWebhook",
        summary="Queue again what this endpoint missed in a window (extension)",
        description=(
            "For every event recorded in `[since, until)` that matches the endpoint's filters and whose last "
            "delivery to it did not succeed — `dead_letter`, `cancelled`, or none because the endpoint was "
            "inactive then (events from before the endpoint was created are not included) — queues a new "
            "delivery with the original event id and the normal retry policy. Pending, retrying and "
            f"succeeded deliveries are left alone, so repeating a call queues nothing twice. At most "
            f"{services.RECOVER_MAX} per call (`more` says when to call again). `409 not_allowed` when the "
            "endpoint is inactive."
        ),
        request=RecoverIn,
        responses={202: shapes.RECOVERY.ref(), **error_responses(400, 409)},
    )
    def post(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE)
        endpoint = selectors.get_endpoint(workspace=request.auth.workspace, endpoint_id=id)
        body = json_body(request, allowed={"since", "until"}, required={"since"})
        queued, more = services.recover_deliveries(
            endpoint=endpoint, since=_timestamp(body, "since"), until=_timestamp(body, "until")
        )
        return Response(recovery_repr(queued, more), status=202)


# --- Deliveries -------------------------------------------------------------------------------


class DeliveryListApi(APIView):
    required_scopes = {"get": (WEBHOOKS_READ,)}

    class QueryIn(serializers.Serializer):
        endpointId = serializers.CharField(required=False, min_length=1)
        status = serializers.ChoiceField(choices=DeliveryStatus.values, required=False)
        eventType = serializers.CharField(required=False, min_length=1)
        eventId = serializers.CharField(required=False, min_length=1)
        kind = serializers.ChoiceField(choices=DeliveryKind.values, required=False)
        cursor = CursorField()
        limit = LimitField()

    @extend_schema(
        operation_id="listWebhookDeliveries",
        summary="List deliveries, newest first",
        parameters=[QueryIn],
        responses={200: shapes.DELIVERY_PAGE.ref(), **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        require_scope(request.auth, WEBHOOKS_READ)
        query = validate_query(self.QueryIn, request)
        deliveries, next_cursor = selectors.deliveries_page(
            workspace=request.auth.workspace,
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            cursor=query.get("cursor"),
            endpoint_id=query.get("endpointId"),
            status=query.get("status"),
            event_type=query.get("eventType"),
            event_id=query.get("eventId"),
            kind=query.get("kind"),
        )
        return Response({"items": [delivery_repr(d) for d in deliveries], "nextCursor": next_cursor})


class DeliveryDetailApi(APIView):
    required_scopes = {"get": (WEBHOOKS_READ,)}

    @extend_schema(
        operation_id="getWebhookDelivery",
        summary="Read a delivery with its attempts (404 after the 30-day retention window)",
        responses={200: shapes.DELIVERY_WITH_ATTEMPTS.ref(), **error_responses(400)},
    )
    def get(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_READ)
        validate_query(NoQuery, request)
        delivery = selectors.get_delivery(workspace=request.auth.workspace, delivery_id=id)
        return Response(delivery_with_attempts_repr(delivery, selectors.delivery_attempts(delivery=delivery)))


class DeliveryReplayApi(APIView):
    required_scopes = {"post": (WEBHOOKS_WRITE,)}

    @extend_schema(
        operation_id="replayWebhookDelivery",
        summary="Queue a new delivery of the same event (new dlv_ id, same evt_ id, normal retry policy)",
        request=None,
        responses={202: shapes.DELIVERY.ref(), **error_responses(409)},
    )
    def post(self, request: Request, id: str) -> Response:
        require_scope(request.auth, WEBHOOKS_WRITE)
        delivery = selectors.get_delivery(workspace=request.auth.workspace, delivery_id=id)
        replay = services.replay_delivery(delivery=delivery)
        return Response(delivery_repr(replay), status=202)
