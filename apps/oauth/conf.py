"""django-oauth-toolkit settings, imported by connect/settings.py (no Django imports here)."""

from __future__ import annotations

OAUTH2_PROVIDER_MODELS: dict[str, str] = {}

OAUTH2_PROVIDER = {
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "REFRESH_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "SCOPES": {
        "svc:sessions:read": "Read sessions and receive session events",
        "svc:transcripts:read": "Read and search transcripts and receive transcript events",
        "svc:boards:read": "Read AI board contents",
        "svc:webhooks:read": "Read webhook endpoints and delivery history",
        "svc:webhooks:write": "Create, update, delete, test and replay webhooks",
    },
    "DEFAULT_SCOPES": ["svc:sessions:read", "svc:transcripts:read", "svc:boards:read"],
}
