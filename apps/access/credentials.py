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
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Literal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from apps.access.principal import Principal
from apps.core.errors import Forbidden, InsufficientScope, Unauthorized, WorkspaceNotFound
from apps.core.text import NUL
from apps.oauth.audience import rest_audiences, served_audience
from apps.oauth.models import AccessToken, RefreshToken
from apps.tenancy.models import API_KEY_PREFIX, ApiKey, Membership, Workspace, hash_api_key
from engine.postgresql import prepared

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
    """The credential of a `Bearer` header. Refused: no header (`missing`); another scheme, or
    `Bearer` with nothing after it (`not_bearer`: no credential was presented); a malformed
    one (`invalid`: a credential was presented, and it is not one)."""
    if not header:
        raise Unauthorized("missing")
    scheme, _, credential = header.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise Unauthorized("not_bearer")
    if " " in credential or NUL in credential:
        raise Unauthorized("invalid")
    return credential


def principal_for_api_key(key: str) -> Principal:
    """One query of only the columns admission reads (the key, its workspace, issuer and the
    issuer's user: `KEY_LOOKUP`), no ORM query building; an update of `last_used_at` at most
    once per `CONNECT_API_KEY_TOUCH_SECONDS`."""
    row = _lookup_key(hash_api_key(key))
    if row is None:
        raise Unauthorized("invalid")
    key_id, scopes, revoked_at, expires_at, last_used_at = row[:5]
    now = timezone.now()
    if not key_holds(_aware(revoked_at), _aware(expires_at), now):
        raise Unauthorized("invalid")
    workspace = Workspace.from_db(connection.alias, KEY_LOOKUP.workspace_fields, row[5:10])
    workspace.suspended_at = _aware(workspace.suspended_at)
    workspace.created_at = _aware(workspace.created_at)
    if not workspace_is_available(workspace.suspended_at):
        raise WorkspaceNotFound()
    membership_id, user_id, membership_active, user_active = row[10:]
    if not member_is_active(bool(membership_active), bool(user_active)):
        raise Forbidden()
    last_used_at = _aware(last_used_at)
    if last_used_at is None or now - last_used_at > timedelta(seconds=settings.CONNECT_API_KEY_TOUCH_SECONDS):
        ApiKey.objects.filter(pk=key_id).update(last_used_at=now)
    # The issuer and its user as admission read them; any other field loads on first use.
    issuer = Membership.from_db(connection.alias, ("id", "workspace_id", "user_id", "is_active"),
                                (membership_id, workspace.id, user_id, bool(membership_active)))
    issuer.workspace = workspace
    issuer.user = get_user_model().from_db(connection.alias, ("id", "is_active"), (user_id, bool(user_active)))
    return Principal(
        workspace=workspace,
        scopes=frozenset(json.loads(scopes) if isinstance(scopes, (str, bytes)) else scopes),
        kind="api_key",
        credential_id=key_id,
        issuer=issuer,
    )


class _KeyLookup:
    """The API-key lookup's SQL, written once per database vendor from the models' tables and
    columns: the key's state, its workspace's fields, the issuer's and its user's `is_active`."""

    workspace_fields = ("id", "slug", "name", "suspended_at", "created_at")
    key_fields = ("id", "scopes", "revoked_at", "expires_at", "last_used_at")

    def __init__(self) -> None:
        self._sql: dict[str, str] = {}

    def sql(self) -> str:
        vendor = connection.vendor
        if vendor not in self._sql:
            q = connection.ops.quote_name
            user = get_user_model()._meta

            def cols(alias: str, model_meta, names) -> list[str]:
                return [f"{alias}.{q(model_meta.get_field(n).column)}" for n in names]

            select = [
                *cols("k", ApiKey._meta, self.key_fields),
                *cols("w", Workspace._meta, self.workspace_fields),
                *cols("m", Membership._meta, ("id", "user", "is_active")),
                f"u.{q(user.get_field('is_active').column)}",
            ]
            self._sql[vendor] = (
                f"SELECT {', '.join(select)} FROM {q(ApiKey._meta.db_table)} k "  # noqa: S608 - our own names
                f"JOIN {q(Workspace._meta.db_table)} w ON w.{q(Workspace._meta.pk.column)} = "
                f"k.{q(ApiKey._meta.get_field('workspace').column)} "
                f"JOIN {q(Membership._meta.db_table)} m ON m.{q(Membership._meta.pk.column)} = "
                f"k.{q(ApiKey._meta.get_field('issued_by').column)} "
                f"JOIN {q(user.db_table)} u ON u.{q(user.pk.column)} = m.{q(Membership._meta.get_field('user').column)} "
                f"WHERE k.{q(ApiKey._meta.get_field('key_hash').column)} = %s"
            )
        return self._sql[vendor]


KEY_LOOKUP = _KeyLookup()


def _lookup_key(key_hash: str) -> tuple | None:
    # Prepared once per connection on PostgreSQL, where planning the joins cost more than
    # running them (engine/postgresql/prepared.py).
    return prepared.fetchone("connect_key_lookup", KEY_LOOKUP.sql(), [key_hash])


def _aware(value: datetime | str | None) -> datetime | None:
    """A timestamp read by a raw cursor: SQLite gives naive UTC (Django's converter), or text
    when the column's declared type is not recognised; PostgreSQL an aware datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt_timezone.utc)


def token_checksum(token: str) -> str:
    # DOT 3.x looks tokens up by this checksum; only the checksum is stored (TOKEN_STORAGE gate).
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def principal_for_access_token(token: str, *, audience: str | Collection[str]) -> Principal:
    """`audience` is the resource the request is addressed to, or the resources the entry point
    accepts (`apps.oauth.audience`). Two queries: the token with its workspace, then the
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
        raise Unauthorized("invalid")
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
    audiences = audience or rest_audiences(settings.CONNECT_BASE_URL)
    return principal_for_access_token(credential, audience=audiences)


def require_scope(principal: Principal, *scopes: str) -> None:
    """`403 insufficient_scope` naming every one of `scopes` unless the principal holds them all."""
    if not all(principal.has_scope(scope) for scope in scopes):
        raise InsufficientScope(scopes)


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

