"""Public metadata documents (contract §4.6): no credential needed."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


def protected_resource_metadata(resource: str) -> dict:
    return {
        "resource": resource,
        "authorization_servers": [f"{settings.CONNECT_AUTH_URL}/api/auth"],
        "scopes_supported": list(settings.CONNECT_READ_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_documentation": f"{settings.CONNECT_BASE_URL}/docs",
    }


class ProtectedResourceMetadataApi(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    resource_path = ""

    @extend_schema(
        operation_id="getProtectedResourceMetadata",
        summary="OAuth 2.0 protected resource metadata (RFC 9728)",
        auth=[],
        responses={
            200: inline_serializer(
                "ProtectedResourceMetadata",
                {
                    "resource": serializers.CharField(),
                    "authorization_servers": serializers.ListField(child=serializers.CharField()),
                    "scopes_supported": serializers.ListField(child=serializers.CharField()),
                    "bearer_methods_supported": serializers.ListField(child=serializers.CharField()),
                    "resource_documentation": serializers.CharField(),
                },
            )
        },
    )
    def get(self, request: Request) -> Response:
        return Response(protected_resource_metadata(settings.CONNECT_BASE_URL + self.resource_path))


@extend_schema_view(
    get=extend_schema(operation_id="getMcpProtectedResourceMetadata", summary="Protected resource metadata for /mcp")
)
class McpProtectedResourceMetadataApi(ProtectedResourceMetadataApi):
    """The same document for the MCP endpoint: MCP clients compare `resource` with the URL
    they connect to (DESIGN.md "MCP and OAuth discovery")."""

    resource_path = "/mcp"
