"""Credentials: the Bearer header, API keys and OAuth tokens → `Principal`, and the batch
"which of these admitted credentials still hold" check.

What makes a credential hold is written once here (`key_holds`, `token_holds`,
`member_is_active`, `workspace_is_available`) and read by both paths:
- `authenticate_bearer` (every request) checks in the order every entry point answers: the
  credential itself — known, unrevoked, unexpired, for this audience — (401), then its
  workspace (404 workspace_not_found), then the member who issued it (403 forbidden). Scopes
  are checked later, per endpoint, with `require_scope`.
- `invalid_credentials` re-checks credentials admitted earlier, a batch at a time, by id: the
  event stream's periodic recheck and the webhook installation check. A handful of queries per
  batch, however many refs it holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.access.audience import rest_audiences, served_audience
from apps.access.principal import Principal
from apps.core.errors import Forbidden, InsufficientScope, Unauthorized, WorkspaceNotFound
from apps.core.text import NUL
from apps.oauth.models import AccessToken, RefreshToken
from apps.tenancy.models import API_KEY_PREFIX, ApiKey, Membership, Workspace, hash_api_key

# --- The rules -------------------------------------------------------------------------------


def key_holds(revoked_at: datetime | None, expires_at: datetime | None, now: datetime) -> bool:
    return revoked_at is None and (expires_at is None or expires_at > now)


def token_holds(expires: datetime, now: datetime) -> bool:
    # DOT's AccessToken.is_expired() is `now >= expires`: the same instant.
    return expires > now


def member_is_active(membership_active: bool, user_active: bool) -> bool:
    return membership_active and user_active


def workspace_is_available(suspended_at: datetime | None) -> bool:
    return suspended_at is None


# --- One request -----------------------------------------------------------------------------


def bearer_credential(header: str | None) -> str:
    if not header:
        raise Unauthorized()
    scheme, _, credential = header.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential or " " in credential or NUL in credential:
        raise Unauthorized()
    return credential


def principal_for_api_key(key: str) -> Principal:
    """One query (the key with its workspace, issuer and user); an update of `last_used_at` at
    most once per `CONNECT_API_KEY_TOUCH_SECONDS`."""
    try:
        api_key = ApiKey.objects.select_related("workspace", "issued_by__user").get(key_hash=hash_api_key(key))
    except ApiKey.DoesNotExist:
        raise Unauthorized() from None
    now = timezone.now()
    if not key_holds(api_key.revoked_at, api_key.expires_at, now):
        raise Unauthorized()
    if not workspace_is_available(api_key.workspace.suspended_at):
        raise WorkspaceNotFound()
    if not member_is_active(api_key.issued_by.is_active, api_key.issued_by.user.is_active):
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


def token_checksum(token: str) -> str:
    # DOT 3.x looks tokens up by this checksum; only the checksum is stored (TOKEN_STORAGE gate).
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def principal_for_access_token(token: str, *, audience: str | Collection[str]) -> Principal:
    """`audience` is the resource the request is addressed to, or the resources the entry point
    accepts (`apps.access.audience`). Two queries: the token with its workspace, then the
    membership with its user."""
    audiences = (audience,) if isinstance(audience, str) else audience
    access_token = (
        AccessToken.objects.select_related("workspace").filter(token_checksum=token_checksum(token)).first()
    )
    served = served_audience(access_token.resource, audiences) if access_token is not None else None
    if (
        access_token is None
        or not token_holds(access_token.expires, timezone.now())
        or access_token.workspace is None
        or access_token.user_id is None
        or served is None
    ):
        raise Unauthorized()
    workspace = access_token.workspace
    if not workspace_is_available(workspace.suspended_at):
        raise WorkspaceNotFound()
    membership = (
        Membership.objects.select_related("user").filter(workspace=workspace, user_id=access_token.user_id).first()
    )
    if membership is None or not member_is_active(membership.is_active, membership.user.is_active):
        raise Forbidden()
    membership.workspace = workspace  # already loaded; spares the lazy query
    return Principal(
        workspace=workspace,
        scopes=frozenset(access_token.scope.split()),
        kind="oauth",
        credential_id=str(access_token.pk),
        issuer=membership,
        audience=served,
    )


def authenticate_bearer(header: str | None, *, audience: str | Collection[str] | None = None) -> Principal:
    """The Principal behind an Authorization header, or the wire error. `audience`: the
    resources the entry point accepts; default REST's (`{base_url}`)."""
    credential = bearer_credential(header)
    if credential.startswith(API_KEY_PREFIX):
        return principal_for_api_key(credential)
    return principal_for_access_token(credential, audience=audience or rest_audiences(settings.CONNECT_BASE_URL))


def require_scope(principal: Principal, scope: str) -> None:
    if not principal.has_scope(scope):
        raise InsufficientScope()


# --- Many admitted credentials at once -------------------------------------------------------


@dataclass(frozen=True)
class CredentialRef:
    """A credential admitted earlier, by id.

    kind "api_key": `credential_id` is the ApiKey id. kind "oauth": the access token's pk; the
    token itself must hold. kind "oauth_grant": the OAuth application's id; the member's grant
    to that application for this workspace holds while an unexpired access token or an
    unrevoked refresh token of it remains (a webhook installation outlives token rotation)."""

    kind: Literal["api_key", "oauth", "oauth_grant"]
    credential_id: str
    membership_id: int
    workspace_id: str


def invalid_credentials(refs: Iterable[CredentialRef], *, scope: str | None = None) -> set[CredentialRef]:
    """The refs that no longer hold: credential revoked, expired or deleted, workspace
    suspended, issuer no longer an active member; with `scope`, also a credential that no
    longer grants it. Four queries, one more for grants."""
    refs = set(refs)
    if not refs:
        return set()
    now = timezone.now()
    active_users = {
        pk: user_id
        for pk, user_id, is_active, user_active in Membership.objects.filter(
            pk__in={r.membership_id for r in refs}
        ).values_list("pk", "user_id", "is_active", "user__is_active")
        if member_is_active(is_active, user_active)
    }
    available = {
        pk
        for pk, suspended_at in Workspace.objects.filter(pk__in={r.workspace_id for r in refs}).values_list(
            "pk", "suspended_at"
        )
        if workspace_is_available(suspended_at)
    }
    holding = _holding_credentials(refs, now=now, scope=scope, users=active_users)
    return {r for r in refs if r not in holding or r.membership_id not in active_users or r.workspace_id not in available}


def _holding_credentials(
    refs: set[CredentialRef], *, now: datetime, scope: str | None, users: dict[int, int]
) -> set[CredentialRef]:
    holding: set[CredentialRef] = set()
    key_ids = {r.credential_id for r in refs if r.kind == "api_key"}
    if key_ids:
        good = {
            pk
            for pk, revoked_at, expires_at, scopes in ApiKey.objects.filter(pk__in=key_ids).values_list(
                "pk", "revoked_at", "expires_at", "scopes"
            )
            if key_holds(revoked_at, expires_at, now) and (scope is None or scope in scopes)
        }
        holding |= {r for r in refs if r.kind == "api_key" and r.credential_id in good}
    token_ids = {int(r.credential_id) for r in refs if r.kind == "oauth" and r.credential_id.isdigit()}
    if token_ids:
        good = {
            str(pk)
            for pk, expires, token_scope in AccessToken.objects.filter(pk__in=token_ids).values_list(
                "pk", "expires", "scope"
            )
            if token_holds(expires, now) and (scope is None or scope in token_scope.split())
        }
        holding |= {r for r in refs if r.kind == "oauth" and r.credential_id in good}
    grants = [r for r in refs if r.kind == "oauth_grant" and r.credential_id.isdigit() and r.membership_id in users]
    if grants:
        live = _live_grants(grants, now=now, scope=scope, users=users)
        holding |= {r for r in grants if (r.credential_id, users[r.membership_id], r.workspace_id) in live}
    return holding


def _live_grants(
    grants: list[CredentialRef], *, now: datetime, scope: str | None, users: dict[int, int]
) -> set[tuple[str, int, str]]:
    """(application id, user id, workspace id) of the grants with an unexpired access token or
    an unrevoked refresh token (granting `scope`, when given)."""
    wanted = Q()
    for r in grants:
        wanted |= Q(application_id=r.credential_id, user_id=users[r.membership_id], workspace_id=r.workspace_id)
    fields = ("application_id", "user_id", "workspace_id")
    # `token_holds` and a live refresh token, said in SQL: a grant needs only to exist, so the
    # database answers with the union instead of every token of every grant.
    tokens = AccessToken.objects.filter(wanted, expires__gt=now)
    refresh = RefreshToken.objects.filter(wanted, revoked__isnull=True)
    if scope is not None:
        tokens = tokens.filter(scope__contains=scope)
        refresh = refresh.filter(access_token__scope__contains=scope)
    live = tokens.values_list(*fields).union(refresh.values_list(*fields))
    return {(str(application_id), user_id, workspace_id) for application_id, user_id, workspace_id in live}

