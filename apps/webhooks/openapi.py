"""OpenAPI for what DRF views do not describe: the public JWKS document and the request
Connect sends to receivers (OpenAPI 3.1 `webhooks`), with its four Svc-* headers."""

from __future__ import annotations

from typing import Any

from apps.webhooks.filters import SESSION_STATUSES

SESSION_SCHEMA_REF = "#/components/schemas/WebhookSession"


def _session_schema() -> dict[str, Any]:
    nullable = {"type": ["string", "null"]}
    return {
        "type": "object",
        "required": ["id", "label", "memo", "status", "startedAt", "endedAt", "createdAt", "updatedAt"],
        "properties": {
            "id": {"type": "string"},
            "label": nullable,
            "memo": nullable,
            "status": {"type": "string", "enum": list(SESSION_STATUSES)},
            "startedAt": {**nullable, "format": "date-time"},
            "endedAt": {**nullable, "format": "date-time"},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
        },
    }


def _body(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["id", "type", "occurredAt", "data"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "description": "`evt_` + id: the same across retries and replays"},
            "type": {"type": "string", "const": event_type},
            "occurredAt": {"type": "string", "format": "date-time"},
            "data": data,
        },
    }


HEADERS = {
    "Svc-Webhook-Id": "`wh_` + id of the endpoint",
    "Svc-Event-Id": "`evt_` + id; the same across retries and manual replays",
    "Svc-Delivery-Id": "`dlv_` + id; the same for a normal retry, new for a manual replay",
    "Svc-Signature": "`t=<unix seconds>,kid=<key id>,v1=<base64url Ed25519 signature over \"<t>.<raw body>\">`; "
    "verify with the key of that kid from /.well-known/webhook-signing-keys.json, within ±5 minutes",
}


def _webhook(event_type: str, summary: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"receive_{event_type.replace('.', '_')}",
            "summary": summary,
            "description": "Sent by Connect to the endpoint's URL. Acknowledge with any 2xx within 10 seconds; "
            "anything else (and redirects) is retried at 1 m, 5 m, 30 m, 2 h, 8 h and 24 h.",
            "parameters": [
                {"name": name, "in": "header", "required": True, "description": text, "schema": {"type": "string"}}
                for name, text in HEADERS.items()
            ],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _body(event_type, data)}}},
            "responses": {"2XX": {"description": "Received; the response body is ignored."}},
        }
    }


def extend(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["WebhookSession"] = _session_schema()
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
    session = {"$ref": SESSION_SCHEMA_REF}
    stamp = {"type": "string", "format": "date-time"}
    status = {"type": "string", "enum": list(SESSION_STATUSES)}
    schema.setdefault("webhooks", {}).update(
        {
            "session.created": _webhook(
                "session.created",
                "A session was created",
                {
                    "type": "object",
                    "required": ["sessionId", "occurredAt", "session"],
                    "properties": {"sessionId": {"type": "string"}, "occurredAt": stamp, "session": session},
                },
            ),
            "session.status_changed": _webhook(
                "session.status_changed",
                "A session's status changed",
                {
                    "type": "object",
                    "required": ["sessionId", "status", "previousStatus", "occurredAt", "session"],
                    "properties": {
                        "sessionId": {"type": "string"},
                        "status": status,
                        "previousStatus": status,
                        "occurredAt": stamp,
                        "session": session,
                    },
                },
            ),
            "webhook.test": _webhook(
                "webhook.test",
                "A test delivery (POST /api/v1/webhooks/{id}/test)",
                {"type": "object", "properties": {"webhookId": {"type": "string"}, "message": {"type": "string"}}},
            ),
        }
    )
