"""Re-checking the credentials of open streams, in batches: a handful of queries per process
per interval, however many streams are open (not one query per stream or per event).

The rules are authentication's (apps/tenancy/authentication.py, apps/oauth/credentials.py):
a credential revoked, expired or deleted, a suspended workspace, or an issuer no longer an
active member ends the stream."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from apps.oauth.models import AccessToken
from apps.tenancy.models import ApiKey, Membership, Workspace


@dataclass(frozen=True)
class CredentialRef:
    kind: str  # "api_key" | "oauth"
    credential_id: str
    membership_id: int
    workspace_id: int


def invalid_credentials(refs: set[CredentialRef]) -> set[CredentialRef]:
    if not refs:
        return set()
    now = timezone.now()
    key_ids = {r.credential_id for r in refs if r.kind == "api_key"}
    token_ids = {int(r.credential_id) for r in refs if r.kind == "oauth"}
    good_keys = {
        key_id
        for key_id, revoked_at, expires_at in ApiKey.objects.filter(pk__in=key_ids).values_list(
            "pk", "revoked_at", "expires_at"
        )
        if revoked_at is None and (expires_at is None or expires_at > now)
    }
    good_tokens = {
        str(pk) for pk in AccessToken.objects.filter(pk__in=token_ids, expires__gt=now).values_list("pk", flat=True)
    }
    good_members = set(
        Membership.objects.filter(
            pk__in={r.membership_id for r in refs}, is_active=True, user__is_active=True
        ).values_list("pk", flat=True)
    )
    good_workspaces = set(
        Workspace.objects.filter(pk__in={r.workspace_id for r in refs}, suspended_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    return {
        r
        for r in refs
        if r.credential_id not in (good_keys if r.kind == "api_key" else good_tokens)
        or r.membership_id not in good_members
        or r.workspace_id not in good_workspaces
    }
