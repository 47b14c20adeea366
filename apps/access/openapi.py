"""Documents BearerAuthentication as two alternatives: an API key or an OAuth 2.1 token,
the latter with the operation's scope; on the ingest API, an (ingest) API key only."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension

from apps.access.rest import view_scopes


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "apps.access.rest.BearerAuthentication"
    name = ["bearerAuth", "oauth2"]

    def get_security_requirement(self, auto_schema):
        scopes = list(view_scopes(auto_schema.view, auto_schema.method))
        if getattr(auto_schema.view, "ingest", False):
            # The ingest API takes an ingest key only, never an OAuth token; OpenAPI 3.1 lets a
            # non-OAuth scheme name the roles (here: the scope) it needs.
            return [{"bearerAuth": scopes}]
        return [{"bearerAuth": []}, {"oauth2": scopes}]

    def get_security_definition(self, auto_schema):
        auth = f"{settings.CONNECT_AUTH_URL}/api/auth/oauth2"
        return [
            {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key (`svc_…`) or an OAuth 2.1 access token.",
            },
            {
                "type": "oauth2",
                "flows": {
                    "authorizationCode": {
                        "authorizationUrl": f"{auth}/authorize",
                        "tokenUrl": f"{auth}/token",
                        "refreshUrl": f"{auth}/token",
                        "scopes": dict(settings.CONNECT_SCOPES),
                    }
                },
            },
        ]

