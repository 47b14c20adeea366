"""Bench only: variants of production code switched on by environment variables, for an A/B in
one checkout (bench/settings.py adds this app when one is set; `bench/ingest.py --vs-env`).

- `BENCH_CLAIM_SQL=1`: the idempotency claim as one hand-written, prepared
  `INSERT … ON CONFLICT DO NOTHING RETURNING id` (apps/ingest/idempotency.py `_create` is the
  ORM's `create`). A conflict returns no row, which the claim treats as the ORM's IntegrityError.
"""

from __future__ import annotations

import os

from django.apps import AppConfig


class BenchVariants(AppConfig):
    name = "bench"
    label = "bench_variants"

    def ready(self) -> None:
        if os.environ.get("BENCH_CLAIM_SQL") == "1":
            _claim_as_one_statement()


def _claim_as_one_statement() -> None:
    from django.db import IntegrityError, connection

    from apps.ingest import idempotency
    from apps.ingest.models import IdempotencyKey
    from engine.postgresql import prepared

    table = IdempotencyKey._meta.db_table
    sql = (f'INSERT INTO {table} (workspace_id, credential_id, "key", fingerprint, created_at)'
           " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (credential_id, \"key\") DO NOTHING RETURNING id")
    orm_create = idempotency._create

    def _create(principal, key, fingerprint, now):
        if connection.vendor != "postgresql" or connection.in_atomic_block:
            return orm_create(principal, key, fingerprint, now)
        row = prepared.fetchone("bench_idempotency_claim", sql,
                                [principal.workspace.pk, principal.credential_id, key, fingerprint, now])
        if row is None:
            raise IntegrityError("idempotency key taken")
        claimed = IdempotencyKey(id=row[0], workspace_id=principal.workspace.pk, credential_id=principal.credential_id,
                                 key=key, fingerprint=fingerprint, created_at=now)
        claimed._state.adding = False
        return claimed

    idempotency._create = _create
