"""Bearer authentication for every entry point (REST, MCP, event stream).

`authenticate_bearer` turns an Authorization header into a `Principal` or raises the wire
error, checked in this order: the credential itself (401), its workspace (404
workspace_not_found), its issuer's membership (403 forbidden). Scopes are checked later, per
endpoint, with `require_scope`.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from apps.core.errors import Forbidden, InsufficientScope, Unauthorized, WorkspaceNotFound, www_authenticate
from apps.core.text import NUL
from apps.tenancy.models import ApiKey, hash_api_key
from apps.tenancy.principal import Principal

API_KEY_PREFIX = "svc_"


def bearer_credential(header: str | None) -> str:
    if not header:
        raise Unauthorized()
    scheme, _, credential = header.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential or " " in credential or NUL in credential:
        raise Unauthorized()
    return credential


def principal_for_api_key(key: str) -> Principal:
    try:
        api_key = ApiKey.objects.select_related("workspace", "issued_by__user").get(key_hash=hash_api_key(key))
    except ApiKey.DoesNotExist:
        raise Unauthorized() from None
    now = timezone.now()
    if api_key.revoked_at is not None or (api_key.expires_at is not None and api_key.expires_at <= now):
        raise Unauthorized()
    if not api_key.workspace.is_available:
        raise WorkspaceNotFound()
    if not api_key.issued_by.is_active or not api_key.issued_by.user.is_active:
        raise Forbidden()
    if api_key.last_used_at is None or now - api_key.last_used_at > timedelta(
        seconds=settings.CONNECT_API_KEY_TOUCH_SECONDS
    ):
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
    return Principal(
        workspace=api_key.workspace,
        scopes=frozenset(api_key.scopes),
        kind="api_key",
        credential_id=api_key.id,
        issuer=api_key.issued_by,
    )


def authenticate_bearer(header: str | None, *, audience: str | tuple[str, ...] | None = None) -> Principal:
    """`audience` is the resource the request is addressed to (or the resources, when several
    are accepted, as at /mcp); default the base URL."""
    credential = bearer_credential(header)
    if credential.startswith(API_KEY_PREFIX):
        return principal_for_api_key(credential)
    from apps.oauth.credentials import principal_for_access_token

    return principal_for_access_token(credential, audience=audience or settings.CONNECT_BASE_URL)


def require_scope(principal: Principal, scope: str) -> None:
    if not principal.has_scope(scope):
        raise InsufficientScope()


class BearerAuthentication(BaseAuthentication):
    """DRF adapter: `request.auth` is the Principal; `request.user` its issuer's user."""

    def authenticate(self, request):
        principal = authenticate_bearer(request.META.get("HTTP_AUTHORIZATION"))
        return principal.issuer.user, principal

    def authenticate_header(self, request) -> str:
        return www_authenticate()


class HasScope(BasePermission):
    """`permission_classes = [HasScope.of("svc:sessions:read")]`."""

    scope: str = ""

    @classmethod
    def of(cls, scope: str) -> type[HasScope]:
        return type(f"HasScope_{scope}", (cls,), {"scope": scope})

    def has_permission(self, request, view) -> bool:
        if request.auth is None:
            raise Unauthorized()
        require_scope(request.auth, self.scope)
        return True
