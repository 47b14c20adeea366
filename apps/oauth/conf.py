"""django-oauth-toolkit settings, imported by connect/settings.py (no Django imports here).

Policy (docs/api/authentication-and-scopes.md): authorization code + PKCE S256 only,
access tokens 1 h, refresh tokens 30 days with rotation and reuse detection, tokens stored
hashed. DOT's models are swapped for ours (apps/oauth/models.py) so every grant and token
carries the workspace the member chose at consent. The issuer (`OIDC_ISS_ENDPOINT`) depends
on CONNECT_AUTH_URL and is set in connect/settings.py.
"""

from __future__ import annotations

# DOT's models point at each other (AccessToken <-> RefreshToken, AccessToken -> IDToken,
# all -> Application). Swapping only some would make our first migration depend on
# oauth2_provider's and theirs on ours, so all five live in apps.oauth.
OAUTH2_PROVIDER_MODELS: dict[str, str] = {
    "OAUTH2_PROVIDER_APPLICATION_MODEL": "oauth.Application",
    "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL": "oauth.AccessToken",
    "OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL": "oauth.RefreshToken",
    "OAUTH2_PROVIDER_GRANT_MODEL": "oauth.Grant",
    "OAUTH2_PROVIDER_ID_TOKEN_MODEL": "oauth.IDToken",
}

OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "apps.oauth.validators.ConnectOAuth2Validator",
    "PKCE_REQUIRED": True,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "REFRESH_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # No grace period: a replayed rotated refresh token is always treated as theft.
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "SCOPES": {
        "svc:sessions:read": "Read sessions and receive session events",
        "svc:transcripts:read": "Read and search transcripts and receive transcript events",
        "svc:boards:read": "Read AI board contents",
        "svc:webhooks:read": "Read webhook endpoints and delivery history",
        "svc:webhooks:write": "Create, update, delete, test and replay webhooks",
    },
    # Webhook scopes are granted only when asked for (docs/api/authentication-and-scopes.md).
    "DEFAULT_SCOPES": ["svc:sessions:read", "svc:transcripts:read", "svc:boards:read"],
    # Consent is where the member picks the workspace, so it is never skipped.
    "REQUEST_APPROVAL_PROMPT": "force",
    # The per-application list comes from Application.get_allowed_schemes (native-app schemes);
    # this default only applies where DOT has no application at hand.
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],
    # RFC 8252 §7.3: loopback redirect URIs match on any port; "localhost" counts as loopback.
    "ALLOW_LOCALHOST_LOOPBACK": True,
    # RFC 9700 behaviour gates: enforce now instead of warning.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    # Only the SHA-256 checksum of access and refresh tokens is stored.
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    # RFC 8414 discovery advertises exactly what the server accepts.
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    # RFC 7591: open registration; apps.oauth.views.RegistrationView admits public clients only.
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "DCR_REGISTRATION_TOKEN_EXPIRE_SECONDS": 90 * 24 * 3600,
    # Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document). Our fetcher
    # applies the webhooks' SSRF rules and one deadline to the whole fetch (apps/oauth/cimd.py);
    # the library resolves, stores and backs off. 5 KB is the draft's recommended read limit.
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "apps.oauth.cimd.GuardedMetadataFetcher",
    "CIMD_MAX_DOCUMENT_SIZE": 5 * 1024,
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
}
