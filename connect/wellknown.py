"""Every `/.well-known/…` document Connect publishes, in one place (docs/api/).
No credential is needed for any of them.

- `oauth-protected-resource` (RFC 9728): the resource server's metadata. Every 401 names the
  root document (apps/access/render.py); `…/mcp` answers too, for MCP clients that probe the
  path-based location first (its `resource` is `{base_url}/mcp`).
- `oauth-authorization-server` (RFC 8414): DOT's metadata view for the issuer
  `{auth_url}/api/auth`, at the root and at the issuer's path-based location.
- `webhook-signing-keys.json`: the JWKS receivers verify deliveries with; its content is
  apps/webhooks/keys.py's.
- `mcp/server.json`: the MCP registry's description of `/mcp` (apps/mcp/discovery.py).

These sit above every app (like connect/urls.py): each document reads the app that owns its
facts, and no app imports this module.
"""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from oauth2_provider import views as dot
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.mcp import discovery
from apps.oauth.audience import MCP_PATH, normalise
from apps.webhooks import keys

JWKS_MAX_AGE_SECONDS = 300
MCP_SERVER_JSON_MAX_AGE_SECONDS = 300


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
        return Response(protected_resource_metadata(normalise(settings.CONNECT_BASE_URL) + self.resource_path))


@extend_schema_view(
    get=extend_schema(operation_id="getMcpProtectedResourceMetadata", summary="Protected resource metadata for /mcp")
)
class McpProtectedResourceMetadataApi(ProtectedResourceMetadataApi):
    """The same document for the MCP endpoint, for clients that probe the path-based location
    (RFC 9728 §3.1) before the root one."""

    resource_path = MCP_PATH


@require_GET
def signing_keys_view(request) -> JsonResponse:  # noqa: ARG001
    """Cacheable for a short while: receivers refresh on an unknown kid, so a rotation is
    picked up within the cache lifetime."""
    response = JsonResponse(keys.jwks())
    response["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_SECONDS}"
    return response


@require_GET
def mcp_server_json_view(request) -> JsonResponse:  # noqa: ARG001
    """Public and the same for everyone; it changes only with a deployment."""
    response = JsonResponse(discovery.server_json(), json_dumps_params={"ensure_ascii": False})
    response["Cache-Control"] = f"public, max-age={MCP_SERVER_JSON_MAX_AGE_SECONDS}"
    return response


urlpatterns = [
    path(".well-known/oauth-protected-resource", ProtectedResourceMetadataApi.as_view()),
    path(".well-known/oauth-protected-resource/mcp", McpProtectedResourceMetadataApi.as_view()),
    # RFC 8414 §3: the issuer `{auth_url}/api/auth` has a path, so strict clients ask for
    # /.well-known/oauth-authorization-server/api/auth; others ask at the root. DOT names the
    # root route when it derives an issuer; Connect sets OIDC_ISS_ENDPOINT, so it never needs to.
    path(".well-known/oauth-authorization-server", dot.OAuthServerMetadataView.as_view(), name="oauth-server-metadata"),
    path(
        ".well-known/oauth-authorization-server/api/auth",
        dot.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata-issuer",
    ),
    path(".well-known/webhook-signing-keys.json", signing_keys_view),
    path(".well-known/mcp/server.json", mcp_server_json_view),
]
