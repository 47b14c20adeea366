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
    429: "`connection_limit`",
    500: "`internal_server_error`",
}


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="Machine-readable error code")


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """The error rows of an operation: the given ones plus those every operation can return."""
    codes = sorted({*statuses, 401, 403, 404, 500})
    return {code: OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code]) for code in codes}


# Paths added by apps that are not DRF views (event stream, MCP, webhook requests) register
# a function here; each takes the schema and edits it in place.
SCHEMA_EXTENDERS: list[Any] = []


def postprocess(result: dict[str, Any], generator, request, public) -> dict[str, Any]:  # noqa: ARG001
    for extend in SCHEMA_EXTENDERS:
        extend(result)
    return result
