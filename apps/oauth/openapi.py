"""The authorization server's endpoints in /openapi.json. They are django-oauth-toolkit views,
not DRF ones, so drf-spectacular cannot see them; they are described here (OAuth 2.1,
RFC 8414, RFC 7009, RFC 7591) so the document covers every public path."""

from __future__ import annotations

from typing import Any

OAUTH_ERROR = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "error_description": {"type": "string"}},
    "required": ["error"],
}


def _operation(operation_id: str, summary: str, *, form: dict[str, Any] | None = None, ok: dict[str, Any]) -> dict:
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": ["oauth"],
        "security": [],
        "responses": {**ok, "400": {"description": "OAuth error", "content": {"application/json": {"schema": OAUTH_ERROR}}}},
    }
    if form is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": form}}},
        }
    return operation


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema or {"type": "object"}}}}


def extend(schema: dict[str, Any]) -> None:
    string = {"type": "string"}
    metadata = _operation(
        "getAuthorizationServerMetadata",
        "OAuth 2.0 authorization server metadata (RFC 8414)",
        ok={"200": _json("metadata document")},
    )
    schema["paths"]["/.well-known/oauth-authorization-server"] = {"get": metadata}
    schema["paths"]["/.well-known/oauth-authorization-server/api/auth"] = {
        "get": {**metadata, "operationId": "getAuthorizationServerMetadataForIssuer"}
    }
    schema["paths"]["/api/auth/oauth2/authorize"] = {
        "get": {
            "operationId": "authorize",
            "summary": "Authorization endpoint: code flow with PKCE S256 and an RFC 8707 `resource`",
            "tags": ["oauth"],
            "security": [],
            "parameters": [
                {"in": "query", "name": name, "required": required, "schema": string}
                for name, required in [
                    ("response_type", True),
                    ("client_id", True),
                    ("redirect_uri", True),
                    ("code_challenge", True),
                    ("code_challenge_method", True),
                    ("resource", True),
                    ("scope", False),
                    ("state", False),
                ]
            ],
            "responses": {
                "302": {"description": "to the login page, or back to the client with `code` or `error`"},
                "200": {"description": "the consent page (HTML)"},
            },
        }
    }
    schema["paths"]["/api/auth/oauth2/token"] = {
        "post": _operation(
            "token",
            "Token endpoint: exchange a code (with `code_verifier`) or rotate a refresh token",
            form={k: string for k in ("grant_type", "code", "redirect_uri", "client_id", "code_verifier", "refresh_token", "resource")},
            ok={"200": _json("access token (1 hour) and refresh token (30 days, rotated)")},
        )
    }
    schema["paths"]["/api/auth/oauth2/revoke"] = {
        "post": _operation(
            "revokeToken",
            "Revoke an access or refresh token (RFC 7009)",
            form={k: string for k in ("token", "token_type_hint", "client_id")},
            ok={"200": {"description": "revoked (or already unknown)"}},
        )
    }
    register = _operation(
        "registerClient",
        "Dynamic client registration for public clients (RFC 7591)",
        ok={"201": _json("the registered client")},
    )
    register["requestBody"] = {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}
    schema["paths"]["/api/auth/oauth2/register"] = {"post": register}
