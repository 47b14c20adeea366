from __future__ import annotations

from django.db import models

from apps.tenancy.models import Workspace


class IdempotencyKey(models.Model):
    """A request made with an `Idempotency-Key` and, once answered, its answer (Stripe's rules,
    apps/ingest/idempotency.py). Scoped to the credential that sent it: another key's requests
    never see it. `status` is null while the first request is in flight. Kept 24 hours."""

    # No index of its own: keys are found by credential and key, purged by age (migration 0002).
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+", db_index=False)
    credential_id = models.CharField(max_length=40)
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the method, path and canonical body")
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    body = models.BinaryField(null=True, blank=True)
    created_at = models.DateTimeField()
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["credential_id", "key"], name="idempotency_one_per_key")]
        indexes = [models.Index(fields=["created_at"], name="idempotency_created")]

    def __str__(self) -> str:
        return f"{self.key} ({self.status or 'in flight'})"
