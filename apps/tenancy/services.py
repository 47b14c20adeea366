"""Writes to tenancy: workspaces, memberships and API keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from apps.core.ids import random_base62
from apps.tenancy.models import API_KEY_PREFIX, INGEST_SCOPE, ApiKey, Membership, Workspace, hash_api_key

API_KEY_RANDOM_LENGTH = 40
API_KEY_DISPLAY_PREFIX_LENGTH = len(API_KEY_PREFIX) + 6


class UnknownScope(ValueError):
    pass


@transaction.atomic
def create_workspace(*, slug: str, name: str | None = None) -> Workspace:
    return Workspace.objects.create(slug=slug, name=name or slug)


@transaction.atomic
def add_member(
    *, workspace: Workspace, email: str, password: str | None = None, staff: bool = False
) -> Membership:
    """Create the user if needed and make them an active member (re-activating a former one)."""
    User = get_user_model()
    user = User.objects.filter(email__iexact=email).first() or User.objects.filter(username=email).first()
    if user is None:
        user = User.objects.create_user(username=email, email=email, password=password)
    elif password:
        user.set_password(password)
        user.save(update_fields=["password"])
    if staff and not user.is_staff:
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    membership, _ = Membership.objects.get_or_create(workspace=workspace, user=user)
    return activate_member(membership=membership)


@transaction.atomic
def activate_member(*, membership: Membership) -> Membership:
    """The member's API keys and OAuth grants work again."""
    if not membership.is_active:
        membership.is_active = True
        membership.deactivated_at = None
        membership.save(update_fields=["is_active", "deactivated_at"])
    return membership


@transaction.atomic
def deactivate_member(*, membership: Membership) -> Membership:
    """The member's API keys and OAuth grants answer `403 forbidden` from now on."""
    if membership.is_active:
        membership.is_active = False
        membership.deactivated_at = timezone.now()
        membership.save(update_fields=["is_active", "deactivated_at"])
    return membership


def validate_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes of a read key, or `[INGEST_SCOPE]` alone: an ingest key holds nothing else,
    so a leaked recorder's key reads nothing and a reader's key writes nothing."""
    scopes = list(dict.fromkeys(s.strip() for s in scopes if s.strip()))
    unknown = [s for s in scopes if s not in settings.CONNECT_SCOPES and s != INGEST_SCOPE]
    if unknown or not scopes:
        raise UnknownScope(f"unknown or missing scopes: {', '.join(unknown) or '(none)'}")
    if INGEST_SCOPE in scopes and len(scopes) > 1:
        raise UnknownScope(f"{INGEST_SCOPE} is an ingest key's only scope: issue it alone (issue_ingest_key)")
    return scopes


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    key: str  # the only time the plain key exists: it is never stored


@transaction.atomic
def issue_api_key(*, membership: Membership, scopes: Iterable[str], name: str = "API key",
                  replace: bool = False) -> IssuedKey:
    """A new key. `replace`: the member's live keys of the same name are revoked in the same
    transaction, so the new one takes their place (a key cannot be shown twice: replacing is
    how a repeated setup reuses "its" key)."""
    scopes = validate_scopes(scopes)
    if replace:
        ApiKey.objects.filter(issued_by=membership, name=name, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    key = API_KEY_PREFIX + random_base62(API_KEY_RANDOM_LENGTH)
    api_key = ApiKey.objects.create(
        workspace=membership.workspace,
        issued_by=membership,
        name=name,
        prefix=key[:API_KEY_DISPLAY_PREFIX_LENGTH],
        key_hash=hash_api_key(key),
        scopes=scopes,
    )
    return IssuedKey(api_key=api_key, key=key)


@transaction.atomic
def issue_ingest_key(*, membership: Membership, name: str = "Ingest key", replace: bool = False) -> IssuedKey:
    """A key for a recorder: `svc:ingest:write` only (it reads nothing). Like any key it is
    issued on behalf of a member, whose deactivation turns it into `403 forbidden`."""
    return issue_api_key(membership=membership, scopes=[INGEST_SCOPE], name=name, replace=replace)


@transaction.atomic
def revoke_api_key(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


@transaction.atomic
def suspend_workspace(*, workspace: Workspace) -> Workspace:
    """Every credential of the workspace answers `404 workspace_not_found` until unsuspended."""
    if workspace.suspended_at is None:
        workspace.suspended_at = timezone.now()
        workspace.save(update_fields=["suspended_at"])
    return workspace


@transaction.atomic
def unsuspend_workspace(*, workspace: Workspace) -> Workspace:
    if workspace.suspended_at is not None:
        workspace.suspended_at = None
        workspace.save(update_fields=["suspended_at"])
    return workspace
