"""OpenAPI plumbing shared by every app: the error body and the postprocessing hook."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

ERROR_DESCRIPTIONS = {
    400: "`invalid_request`: query parameters or request shape fail validation",
    401: "`unauthorized`: Bearer credential missing, invalid, expired, of another audience or without a workspace",
    403: "`insufficient_scope` (scope missing) or `forbidden` (issuer no longer an active member)",
    404: "`not_found`, or `workspace_not_found` when the credential's workspace cannot be resolved",
    405: "`method_not_allowed`",
    409: "`not_allowed`",
    429: "`rate_limited`: the credential's or the workspace's request limit for this window is spent "
    "(see `Retry-After`); on the event stream also `connection_limit` (too many open streams)",
    500: "`internal_server_error`",
    503: "`timeout`: the request's database work took longer than the per-request limit",
}


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="Machine-readable error code")


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error rows of an operation: the given ones plus those every operation can return."""
    codes = sorted({*statuses, 401, 403, 404, 429, 500, 503})
    return {code: OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code]) for code in codes}


# Paths added by apps that are not DRF views (event stream, MCP, webhook requests) register
# a function here; each takes the schema and edits it in place.
SCHEMA_EXTENDERS: list[Any] = []


RATE_LIMIT_HEADERS = {
    "RateLimit-Limit": "Requests allowed in the current window (the tighter of the credential's and the workspace's)",
    "RateLimit-Remaining": "Requests left in the current window",
    "RateLimit-Reset": "Seconds until the current window ends",
}


def document_rate_limits(result: dict[str, Any]) -> None:
    """Every operation that takes a Bearer credential is rate limited (apps/access/ratelimit.py):
    it can answer 429, and its responses but 401 carry the RateLimit headers (401 and the
    credential's own 403 `forbidden` / 404 `workspace_not_found` come before counting, so those
    carry none); a 429 also Retry-After."""
    components = result.setdefault("components", {})
    headers = components.setdefault("headers", {})
    for name, description in RATE_LIMIT_HEADERS.items():
        headers[name] = {"description": description, "schema": {"type": "integer", "minimum": 0}}
    headers["Retry-After"] = {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}
    components.setdefault("schemas", {}).setdefault(
        "Error", {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
    )
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict) or not any("bearerAuth" in s for s in operation.get("security", [])):
                continue
            responses = operation.setdefault("responses", {})
            responses.setdefault(
                "429",
                {
                    "description": ERROR_DESCRIPTIONS[429],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            )
            for status, response in responses.items():
                if status == "401":
                    continue  # no credential, nothing counted: a 401 carries no RateLimit headers
                refs = {name: {"$ref": f"#/components/headers/{name}"} for name in RATE_LIMIT_HEADERS}
                if status == "429":
                    refs["Retry-After"] = {"$ref": "#/components/headers/Retry-After"}
                response.setdefault("headers", {}).update(refs)


def postprocess(result: dict[str, Any], generator, request, public) -> dict[str, Any]:  # noqa: ARG001
    for extend in SCHEMA_EXTENDERS:
        extend(result)
    document_rate_limits(result)
    return result
