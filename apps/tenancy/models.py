from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models

from apps.core.ids import new_id


class Workspace(models.Model):
    """A tenant. Every tenant row carries its workspace; a suspended workspace answers
    `404 workspace_not_found` to every credential it issued."""

    id = models.CharField(primary_key=True, max_length=40, default=new_id, editable=False)
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    suspended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_available(self) -> bool:
        return self.suspended_at is None


class Membership(models.Model):
    """A user's place in a workspace. Credentials name the membership that issued them, so
    deactivating it turns all of them into `403 forbidden` at once."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique_user")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.workspace}"


# Every API key starts with this; anything else in a Bearer header is an OAuth token.
API_KEY_PREFIX = "svc_"

# An ingest key's only scope: it writes through the ingest API and reads nothing. No other key
# or token is given it (apps/tenancy/services.validate_scopes), and it is not an OAuth scope.
INGEST_SCOPE = "svc:ingest:write"


def hash_api_key(key: str) -> str:
    # Keys carry ≥190 bits of randomness, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    """`svc_` + 40 random base62 characters. Only the hash is stored; `prefix` is for display.

    Two kinds, told apart by their scopes: a read key (any of settings.CONNECT_SCOPES) and an
    ingest key (exactly `[INGEST_SCOPE]`); no key holds both."""

    id = models.CharField(primary_key=True, max_length=40, default=new_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    issued_by = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_ingest(self) -> bool:
        return INGEST_SCOPE in self.scopes
