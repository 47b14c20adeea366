"""OpenAPI for what DRF views do not describe: the public JWKS document and the request
Connect sends to receivers (OpenAPI 3.1 `webhooks`), with its four Svc-* headers and, for an
endpoint with `signing: standard-webhooks`, the three Standard Webhooks ones. The request
bodies are derived from their declarations (apps/webhooks/shapes.py): a session in a body is
the `SessionOut` component, as REST shows it."""

from __future__ import annotations

from typing import Any

from apps.events.models import EventType
from apps.webhooks.shapes import TEST_EVENT_TYPE, typed_body

HEADERS = {
    "Svc-Webhook-Id": "`wh_` + id of the endpoint",
    "Svc-Event-Id": "`evt_` + id; the same across retries and manual replays",
    "Svc-Delivery-Id": "`dlv_` + id; the same for a normal retry, new for a manual replay",
    "Svc-Signature": "`t=<unix seconds>,kid=<key id>,v1=<base64url Ed25519 signature over \"<t>.<raw body>\">`; "
    "verify with the key of that kid from /.well-known/webhook-signing-keys.json, within ±5 minutes",
}
# Sent only to endpoints with `signing: standard-webhooks` (apps/webhooks/standard.py).
STANDARD_HEADERS = {
    "webhook-id": "Standard Webhooks: the event id (`evt_` + id), the same across retries and replays",
    "webhook-timestamp": "Standard Webhooks: unix seconds of this attempt (the same `t` as Svc-Signature)",
    "webhook-signature": "Standard Webhooks: `v1,<base64 HMAC-SHA256 over \"<webhook-id>.<webhook-timestamp>.<raw body>\">` "
    "with the endpoint's `whsec_` secret; after a rotation, two such signatures separated by a space "
    "(new secret first) until `previousSecretExpiresAt`",
}


def _webhook(event_type: str, summary: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"receive_{event_type.replace('.', '_')}",
            "summary": summary,
            "description": "Sent by Connect to the endpoint's URL. Acknowledge with any 2xx within 10 seconds; "
            "anything else (and redirects) is retried at 1 m, 5 m, 30 m, 2 h, 8 h and 24 h.",
            "parameters": [
                {"name": name, "in": "header", "required": True, "description": text, "schema": {"type": "string"}}
                for name, text in HEADERS.items()
            ] + [
                {"name": name, "in": "header", "required": False, "description": text, "schema": {"type": "string"}}
                for name, text in STANDARD_HEADERS.items()
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": typed_body(event_type).json_schema()}},
            },
            "responses": {"2XX": {"description": "Received; the response body is ignored."}},
        }
    }


def extend(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["JsonWebKeySet"] = {
        "type": "object",
        "required": ["keys"],
        "properties": {
            "keys": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["kty", "crv", "kid", "x", "use", "alg"],
                    "properties": {
                        "kty": {"type": "string", "const": "OKP"},
                        "crv": {"type": "string", "const": "Ed25519"},
                        "kid": {"type": "string"},
                        "x": {"type": "string", "description": "base64url public key"},
                        "use": {"type": "string", "const": "sig"},
                        "alg": {"type": "string", "const": "EdDSA"},
                    },
                },
            }
        },
    }
    schema.setdefault("paths", {})["/.well-known/webhook-signing-keys.json"] = {
        "get": {
            "operationId": "getWebhookSigningKeys",
            "summary": "Public keys that sign webhook requests (active and retiring)",
            "security": [],
            "tags": ["webhooks"],
            "responses": {
                "200": {
                    "description": "JWKS; cacheable for a few minutes (Cache-Control)",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JsonWebKeySet"}}},
                }
            },
        }
    }
    summaries = {
        EventType.SESSION_CREATED: "A session was created",
        EventType.SESSION_STATUS_CHANGED: "A session's status changed",
        TEST_EVENT_TYPE: "A test delivery (POST /api/v1/webhooks/{id}/test)",
    }
    schema.setdefault("webhooks", {}).update(
        {str(event_type): _webhook(str(event_type), summary) for event_type, summary in summaries.items()}
    )
